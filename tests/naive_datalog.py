"""A plain naive bottom-up Datalog evaluator over Python sets: the tests' independent reference.

It reuses only the parser (AST and task order, for strata). Per task: apply every rule to the
whole current database until nothing changes. Integer `/` and `%` are C's (truncating); a row
whose arithmetic divides by zero is dropped, as the engine does. Run as a script to write a
program directory's expected/*.csv: `python tests/naive_datalog.py tests/programs/<name>`.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from levelflow.tasks import build_tasks, load_program
from levelflow.tasks.ast import Atom, BinOp, Comparison, Const, Negation, Var, Wildcard

_CONVERT = {"number": int, "unsigned": int, "float": float, "symbol": str}
_CMP = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


_FRESH = itertools.count()  # names of the variables that stand for deferred expressions


class _NoValue(Exception):
    """Arithmetic without a value (division by zero): the row is dropped."""


def value(term, env):
    """Return the value of a term under a variable binding."""
    if isinstance(term, Const):
        return term.value
    if isinstance(term, Var):
        return env[term.name]
    a, b = value(term.left, env), value(term.right, env)
    if term.op == "+":
        return a + b
    if term.op == "-":
        return a - b
    if term.op == "*":
        return a * b
    if b == 0:
        raise _NoValue
    if isinstance(a, float) or isinstance(b, float):
        return a / b if term.op == "/" else a - b * int(a / b)
    q = abs(a) // abs(b)
    q = q if (a >= 0) == (b >= 0) else -q
    return q if term.op == "/" else a - b * q


def bound(term, env):
    """Return whether every variable of a term has a value."""
    if isinstance(term, Var):
        return term.name in env
    if isinstance(term, BinOp):
        return bound(term.left, env) and bound(term.right, env)
    return True


def match(atom, row, env):
    """Return env extended so that atom matches row, or None."""
    env = dict(env)
    checks = []
    for arg, v in zip(atom.args, row, strict=True):
        if isinstance(arg, Var) and arg.name not in env:
            env[arg.name] = v
        elif not isinstance(arg, Wildcard):
            checks.append((arg, v))  # after binding: `r(x, x + 1)` needs x first
    try:
        return env if all(value(arg, env) == v for arg, v in checks) else None
    except _NoValue:
        return None


def solve(body, db, env):
    """Yield every binding that satisfies the body literals (tried in a workable order)."""
    if not body:
        yield env
        return
    for k, lit in enumerate(body):  # the first literal that can run now
        rest = body[:k] + body[k + 1:]
        try:
            if isinstance(lit, Atom):
                own = {a.name for a in lit.args if isinstance(a, Var)}
                if all(bound(a, {**env, **dict.fromkeys(own)}) for a in lit.args):
                    for row in list(db[lit.relation]):
                        env2 = match(lit, row, env)
                        if env2 is not None:
                            yield from solve(rest, db, env2)
                    return
            elif isinstance(lit, Negation):
                if all(bound(a, env) for a in lit.atom.args if not isinstance(a, Wildcard)):
                    if not any(match(lit.atom, row, env) is not None
                               for row in db[lit.atom.relation]):
                        yield from solve(rest, db, env)
                    return
            elif bound(lit.left, env) and bound(lit.right, env):
                if _CMP[lit.op](value(lit.left, env), value(lit.right, env)):
                    yield from solve(rest, db, env)
                return
            elif lit.op == "=":
                for var, expr in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(var, Var) and var.name not in env and bound(expr, env):
                        yield from solve(rest, db, {**env, var.name: value(expr, env)})
                        return
        except _NoValue:
            return
    deferred = _defer_expressions(body, env)
    if deferred is None:
        raise ValueError(f"cannot order body {body}")
    yield from solve(deferred, db, env)


def _defer_expressions(body, env):
    """Return the body with one atom's unbound expression arguments replaced by fresh variables
    and equalities checked once bound (`t(x-1, y), t(y-1, x)`: no atom can run first), or None.
    """
    for k, lit in enumerate(body):
        if not isinstance(lit, Atom):
            continue
        own = {a.name for a in lit.args if isinstance(a, Var)}
        args, checks = [], []
        for a in lit.args:
            if isinstance(a, BinOp) and not bound(a, {**env, **dict.fromkeys(own)}):
                fresh = Var(f"@k{next(_FRESH)}")
                args.append(fresh)
                checks.append(Comparison("=", fresh, a))
            else:
                args.append(a)
        if checks:
            return (*body[:k], Atom(lit.relation, tuple(args)), *body[k + 1:], *checks)
    return None


def read_facts(path, decl, delimiter):
    """Return the set of tuples in a fact file (the format is trusted)."""
    rows = set()
    lines = Path(path).read_text().split("\n")
    for line in lines[:-1] if lines[-1] == "" else lines:
        line = line.removesuffix("\r")
        fields = line.split(delimiter)
        rows.add(tuple(_CONVERT[t](f) for t, f in zip(decl.types, fields[:decl.arity],
                                                          strict=True)))
    return rows


def evaluate(program_tasks, factdir):
    """Return every relation of the program as a set of tuples, by naive fixpoint per task."""
    program = program_tasks.program
    db = {name: set() for name in program.decls}
    for name, io in program.inputs.items():
        path = Path(factdir) / (io.option("filename") or f"{name}.facts")
        decl = program.decls[name]
        if decl.arity == 0:
            db[name] = {()} if path.read_text() else set()
        else:
            db[name] = read_facts(path, decl, io.option("delimiter") or "\t")
    for task in program_tasks.tasks:
        changed = True
        while changed:
            changed = False
            for rule in task.rules:
                for env in list(solve(rule.body, db, {})):
                    for head in rule.heads:
                        decl = program.decls[head.relation]
                        try:
                            row = tuple(_CONVERT[t](value(a, env))
                                        for a, t in zip(head.args, decl.types, strict=True))
                        except _NoValue:
                            continue
                        if row not in db[head.relation]:
                            db[head.relation].add(row)
                            changed = True
    return db


def format_row(row, types, delimiter="\t"):
    """Return a tuple as an output line without newline (floats as `%g`, nullary as `()`)."""
    if not types:
        return "()"
    return delimiter.join(f"{v:g}" if t == "float" else str(v) for v, t in zip(row, types,
                                                                               strict=True))


def expected_files(program_dir):
    """Return {output file name: sorted lines} for a test program directory."""
    program_dir = Path(program_dir)
    pt = build_tasks(load_program(program_dir / "program.dl"))
    db = evaluate(pt, program_dir / "facts")
    out = {}
    for name, io in pt.program.outputs.items():
        decl = pt.program.decls[name]
        lines = sorted(format_row(r, decl.types, io.option("delimiter") or "\t")
                       for r in db[name])
        out[io.option("filename") or f"{name}.csv"] = lines
    for name in pt.program.printsize:
        out.setdefault("printsize.txt", []).append(f"{name}\t{len(db[name])}")
    return out


if __name__ == "__main__":
    for d in sys.argv[1:]:
        for fname, lines in expected_files(d).items():
            path = Path(d) / "expected" / fname
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(line + "\n" for line in lines))
            print(f"{path}: {len(lines)} lines")
