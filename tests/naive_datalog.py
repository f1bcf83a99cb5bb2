"""A plain naive bottom-up Datalog evaluator over Python sets: the tests' independent reference.

It reuses only the parser (AST and task order, for strata). Per task: apply every rule to the
whole current database until nothing changes. Integer `/` and `%` are C's (truncating); a row
whose arithmetic divides by zero or leaves 64 bits is dropped, as the engine does. Functors are
written here from Soufflé's documentation and its interpreter's C++ (one plain Python line
each), apart from levelflow's own code. Run as a script to write a
program directory's expected/*.csv: `python tests/naive_datalog.py tests/programs/<name>`.
"""

from __future__ import annotations

import itertools
import math
import re
import sys
from pathlib import Path

from levelflow.tasks import build_tasks, load_program
from levelflow.tasks.aggregates import is_aggregate_rule
from levelflow.tasks.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Comparison,
    Const,
    Negation,
    Var,
    Wildcard,
)

_CONVERT = {"number": int, "unsigned": int, "float": float, "symbol": str}
_CMP = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


_FRESH = itertools.count()  # names of the variables that stand for deferred expressions


class _NoValue(Exception):
    """Arithmetic without a value (division by zero): the row is dropped."""


def int64(v):
    """Return v if it is a 64-bit signed integer (floats pass), else drop the row."""
    if isinstance(v, int) and not -2**63 <= v < 2**63:
        raise _NoValue
    return v


def bits(v):
    """Return v modulo 2^64 read as a signed 64-bit integer (C++ bit operations)."""
    v &= 2**64 - 1
    return v - 2**64 if v >= 2**63 else v


def power(a, b):
    """Soufflé's `^`: C's pow, truncated to an integer for integers."""
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.pow(a, b)
        except (OverflowError, ValueError):
            raise _NoValue from None
    if b >= 0:
        return int64(a ** b) if abs(a) < 2 or b < 64 else int64(2**64)
    if a == 0:
        raise _NoValue  # pow(0, -n) is infinite
    return 1 if a == 1 else ((-1) ** b if a == -1 else 0)


def arith(op, a, b):
    """Return `a op b` for Soufflé's binary operators."""
    if op == "+":
        return int64(a + b)
    if op == "-":
        return int64(a - b)
    if op == "*":
        return int64(a * b)
    if op == "^":
        return power(a, b)
    if op in ("band", "bor", "bxor"):
        return bits({"band": a & b, "bor": a | b, "bxor": a ^ b}[op])
    if op == "bshl":
        return bits(a << (b & 63))
    if op == "bshr":
        return a >> (b & 63)
    if op == "bshru":
        return bits((a & (2**64 - 1)) >> (b & 63))
    if op == "land":
        return int(a != 0 and b != 0)
    if op == "lor":
        return int(a != 0 or b != 0)
    if op == "lxor":
        return int((a != 0) != (b != 0))
    if b == 0:
        raise _NoValue
    if isinstance(a, float) or isinstance(b, float):
        return a / b if op == "/" else math.fmod(a, b)
    q = abs(a) // abs(b)
    q = q if (a >= 0) == (b >= 0) else -q
    return int64(q if op == "/" else a - b * q)


def to_int(v, low=-2**63, high=2**63):
    """A float, integer or decimal text as an integer (C's truncation), or drop the row."""
    if isinstance(v, str):
        text = v.lstrip(" \t")
        digits = text[1:] if text[:1] in ("+", "-") else text
        if not (digits.isascii() and digits.isdigit()):
            raise _NoValue  # Soufflé stops with an error
        v = int(text)
    if isinstance(v, float) and not math.isfinite(v):
        raise _NoValue
    v = int(v)
    if not low <= v < high:
        raise _NoValue
    return v


def to_unsigned(v):
    """C's conversion to a 64-bit unsigned (text as strtoull reads it), held as its int64 bits;
    a float outside (-1, 2^64) is undefined: drop the row."""
    if isinstance(v, float):
        if not (math.isfinite(v) and -1 < v < 2**64):
            raise _NoValue
        return bits(int(v))
    if isinstance(v, str):
        v = to_int(v, low=-2**64, high=2**64)
    return bits(v)


def to_float(v):
    """A number or a decimal text as a float."""
    try:
        v = float(v)
    except ValueError:
        raise _NoValue from None
    if not math.isfinite(v):
        raise _NoValue
    return v


def substr(s, i, n):
    """C++'s s.substr(i, n): Soufflé warns and gives "" when i is outside s."""
    if i < 0 or i > len(s):
        return ""
    return s[i:] if n < 0 else s[i:i + n]


FUNCTORS = {
    "min": lambda *xs: min(xs), "max": lambda *xs: max(xs), "cat": lambda *xs: "".join(xs),
    "strlen": len, "substr": substr, "bnot": lambda x: ~x, "lnot": lambda x: int(x == 0),
    "to_string": lambda x: f"{x:f}" if isinstance(x, float) else str(x),
    "to_number": to_int, "ftoi": to_int, "utoi": to_int,
    "to_unsigned": to_unsigned, "itou": to_unsigned, "ftou": to_unsigned,
    "to_float": to_float, "itof": to_float, "utof": lambda x: to_float(x % 2**64),
}


def value(term, env):
    """Return the value of a term under a variable binding."""
    if isinstance(term, Const):
        return term.value
    if isinstance(term, Var):
        return env[term.name]
    if isinstance(term, Call):
        if term.name == "autoinc":  # the binding's number (see number_bindings)
            return env["@autoinc"] + (term.args[0].value if term.args else 0)
        args = [value(a, env) for a in term.args]
        if term.name.startswith("#"):
            return record_functor(term.name, args)
        if term.name.startswith("@"):
            return user_functor(term.name, args)
        if term.name in ("min", "max") and any(isinstance(a, float) for a in args):
            args = [float(a) for a in args]  # an integer literal among floats is a float
        return FUNCTORS[term.name](*args)
    a, b = value(term.left, env), value(term.right, env)
    if isinstance(a, float) or isinstance(b, float):
        a, b = float(a), float(b)
    return arith(term.op, a, b)


def user_functor(name, args):
    """`@f|types|result|FILE.py`: the function f of that file, imported here on its own;
    None is no value."""
    import importlib.util
    fname, _, kind, path = name[1:].split("|", 3)
    if path not in _USER_MODULES:
        spec = importlib.util.spec_from_file_location(f"naive_functors_{len(_USER_MODULES)}",
                                                      path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _USER_MODULES[path] = module
    result = getattr(_USER_MODULES[path], fname)(*args)
    if result is None or (kind == "unsigned" and result < 0):
        raise _NoValue
    return float(result) if kind == "float" else int64(result)


_USER_MODULES = {}


def record_functor(name, args):
    """Records and ADTs as the front end lowers them: `#pack:CODES` makes the JSON text of
    the list of fields (nested records as their lists), `#get:CODE` takes field i back out
    (no value for nil, JSON null, or a missing field)."""
    import json
    head, _, codes = name.partition(":")
    if head == "#pack":
        plain = {"i": int, "u": int, "f": float, "s": str, "b": str, "r": json.loads}
        fields = [plain[c](a) for c, a in zip(codes, args, strict=True)]
        return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)
    fields = json.loads(args[0])
    if fields is None or args[1] >= len(fields):
        raise _NoValue
    field = fields[args[1]]
    if (codes == "r") != (field is None or isinstance(field, list)) or (
            (codes == "s") != isinstance(field, str)):
        raise _NoValue  # another branch's field: its tag test drops the row
    if codes == "r":
        return json.dumps(field, separators=(",", ":"), ensure_ascii=False)
    return float(field) if codes == "f" else field


def souffle_range(lo, hi, step=None):
    """Soufflé's range: from lo up to (not including) hi by step (1 or -1 by direction);
    a zero step gives lo once when lo != hi."""
    if step is None:
        step = 1 if lo <= hi else -1
    out = []
    x = lo
    while (step > 0 and x < hi) or (step < 0 and x > hi):
        out.append(x)
        x += step
    if step == 0 and lo != hi:
        out.append(lo)
    return out


def test(op, a, b):
    """`contains(a, b)`: b holds a; `match(a, b)`: the regex a matches the whole of b."""
    if op == "contains":
        return a in b
    try:
        return re.fullmatch(a, b, re.ASCII) is not None
    except re.error:
        return False


def bound(term, env):
    """Return whether every variable of a term has a value."""
    if isinstance(term, Var):
        return term.name in env
    if isinstance(term, BinOp):
        return bound(term.left, env) and bound(term.right, env)
    if isinstance(term, Call):
        return all(bound(a, env) for a in term.args)
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
            elif _is_range(lit) and bound(_is_range(lit)[1], env):
                var, call = _is_range(lit)
                for x in souffle_range(*(value(a, env) for a in call.args)):
                    if var.name not in env or env[var.name] == x:
                        yield from solve(rest, db, {**env, var.name: x})
                return
            elif bound(lit.left, env) and bound(lit.right, env):
                a, b = value(lit.left, env), value(lit.right, env)
                if lit.op.lstrip("!") in ("contains", "match"):
                    ok = test(lit.op.lstrip("!"), a, b) != lit.op.startswith("!")
                else:
                    ok = _CMP[lit.op](a, b)
                if ok:
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
            if isinstance(a, BinOp | Call) and not bound(a, {**env, **dict.fromkeys(own)}):
                fresh = Var(f"@k{next(_FRESH)}")
                args.append(fresh)
                checks.append(Comparison("=", fresh, a))
            else:
                args.append(a)
        if checks:
            return (*body[:k], Atom(lit.relation, tuple(args)), *body[k + 1:], *checks)
    return None


def _is_range(lit):
    """Return (var, call) for `var = range(...)`, else None."""
    if not (isinstance(lit, Comparison) and lit.op == "="):
        return None
    for var, call in ((lit.left, lit.right), (lit.right, lit.left)):
        if isinstance(var, Var) and isinstance(call, Call) and call.name == "range":
            return var, call
    return None


def calls_autoinc(term):
    """Return whether a head argument calls autoinc()."""
    if isinstance(term, Call):
        return term.name == "autoinc" or any(calls_autoinc(a) for a in term.args)
    return isinstance(term, BinOp) and (calls_autoinc(term.left) or calls_autoinc(term.right))


def number_bindings(envs):
    """autoinc(): the rule's distinct bindings, sorted by their variables taken by name, are
    numbered 0, 1, ... (levelflow's numbering: Soufflé's counter follows its evaluation order)."""
    keyed = {tuple(env[k] for k in sorted(env)): env for env in envs}
    return [{**keyed[key], "@autoinc": i} for i, key in enumerate(sorted(keyed))]


def read_facts(path, decl, delimiter):
    """Return the set of tuples in a fact file (the format is trusted)."""
    rows = set()
    lines = Path(path).read_text().split("\n")
    for line in lines[:-1] if lines[-1] == "" else lines:
        line = line.removesuffix("\r")
        fields = line.split(delimiter)
        if decl.shapes:  # records and ADTs in Soufflé's text form
            from levelflow.tasks.record_values import Types
            types = Types(decl.record_types)
            fields = [types.read(f, s) if s else f for f, s in zip(fields, decl.shapes,
                                                                   strict=False)]
        rows.add(tuple(bits(int(f)) if t == "unsigned" else _CONVERT[t](f)
                       for t, f in zip(decl.types, fields[:decl.arity], strict=True)))
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
        if task.subsumes:
            subsumed_fixpoint(task, db, program.decls)
            continue
        if any(program.decls[n].choice for n in task.relations):
            _chosen_rounds(task, db, program.decls)
            continue
        changed = True
        while changed:
            changed = False
            for rule in task.rules:
                envs = list(solve(rule.body, db, {}))
                if is_aggregate_rule(rule):
                    new = aggregated(rule, envs, program.decls[rule.heads[0].relation])
                    changed |= not new <= db[rule.heads[0].relation]
                    db[rule.heads[0].relation] |= new
                    continue
                if any(calls_autoinc(a) for h in rule.heads for a in h.args):
                    envs = number_bindings(envs)
                for env in envs:
                    for head in rule.heads:
                        decl = program.decls[head.relation]
                        try:
                            row = tuple(_CONVERT[t](value(a, env))
                                        for a, t in zip(head.args, decl.types, strict=True))
                        except _NoValue:
                            continue
                        # An unsigned is C's: modulo 2^64, held as the int64 of its bits.
                        row = tuple(bits(v) if t == "unsigned" else v
                                    for v, t in zip(row, decl.types, strict=True))
                        if row not in db[head.relation]:
                            db[head.relation].add(row)
                            changed = True
    return db


def subsumed_fixpoint(task, db, decls):
    """Evaluate a task with subsumptive rules: X = P(X ∪ T(X)) until X stays, where P drops
    each tuple another tuple dominates (of two dominating each other, the smaller stays)."""
    while True:
        before = {n: frozenset(db[n]) for n in task.relations}
        found = {n: set() for n in task.relations}
        for rule in task.rules:
            for env in list(solve(rule.body, db, {})):
                head = rule.heads[0]
                try:
                    found[head.relation].add(tuple(
                        _CONVERT[t](value(a, env))
                        for a, t in zip(head.args, decls[head.relation].types, strict=True)))
                except _NoValue:
                    continue
        for n in task.relations:
            db[n] |= found[n]
        for n in task.relations:
            db[n] -= dominated(task, n, db, decls)
        if all(db[n] == before[n] for n in task.relations):
            return


def dominated(task, name, db, decls):
    """Return the tuples of `name` that its subsumptive rules remove from db[name]."""
    types = decls[name].types * 2
    pairs = set()
    for rule in task.subsumes:
        if rule.heads[0].relation != "@sub:" + name:
            continue
        for env in solve(rule.body, db, {}):
            pairs.add(tuple(_CONVERT[t](value(a, env))
                            for a, t in zip(rule.heads[0].args, types, strict=True)))
    n = decls[name].arity
    return {p[:n] for p in pairs
            if p[:n] != p[n:] and (p[n:] + p[:n] not in pairs or p[n:] < p[:n])}



def _chosen_rounds(task, db, decls):
    """Evaluate a task holding a relation chosen while evaluating (several keys, or in a
    recursive cycle): naive rounds, each deriving from the last round's whole database; a
    chosen relation takes its new candidates in tuple order, each kept when no tuple it holds
    shares the value of any of its keys."""
    while True:
        derived = {n: set() for n in task.relations}
        for rule in task.rules:
            for env in solve(rule.body, db, {}):
                for head in rule.heads:
                    try:
                        derived[head.relation].add(tuple(
                            _CONVERT[t](value(a, env))
                            for a, t in zip(head.args, decls[head.relation].types, strict=True)))
                    except _NoValue:
                        continue
        changed = False
        for name, rows in derived.items():
            keys = decls[name].choice
            held = [{tuple(r[i] for i in g) for r in db[name]} for g in keys]
            for row in sorted(rows - db[name]):
                mine = [tuple(row[i] for i in g) for g in keys]
                if any(k in h for k, h in zip(mine, held, strict=True)):
                    continue
                for k, h in zip(mine, held, strict=True):
                    h.add(k)
                db[name].add(row)
                changed = True
        if not changed:
            return


def aggregated(rule, envs, decl):
    """Return a lowered aggregate rule's tuples: its bindings grouped by the head's other
    arguments; count/sum of no binding at all is 0 when there are no groups to speak of."""
    head = rule.heads[0]
    agg = next(a for a in head.args if isinstance(a, Aggregate))
    groups = {}
    for env in envs:
        key = tuple(value(a, env) for a in head.args if not isinstance(a, Aggregate))
        try:
            v = value(agg.target, env) if agg.target is not None else 1
        except _NoValue:
            continue
        groups.setdefault(key, []).append(v)
    if len(head.args) == 1 and not groups:
        groups[()] = []
    pos = head.args.index(agg)
    out = set()
    for key, vals in groups.items():
        if agg.kind == "count":
            got = len(vals)
        elif agg.kind == "sum":
            got = sum(vals, 0.0 if decl.types[pos] == "float" else 0)
            if isinstance(got, int) and not -2**63 <= got < 2**63:
                continue  # an overflowing sum has no value
        elif not vals:
            continue  # min, max and mean of nothing: no value
        elif agg.kind == "mean":
            got = sum(float(v) for v in vals) / len(vals)
        else:
            got = min(vals) if agg.kind == "min" else max(vals)
        row = key[:pos] + (_CONVERT[decl.types[pos]](got),) + key[pos:]
        out.add(tuple(_CONVERT[t](v) for v, t in zip(row, decl.types, strict=True)))
    return out


def format_row(row, types, delimiter="\t"):
    """Return a tuple as an output line without newline (floats as Soufflé's `%.17g`, nullary
    as `()`)."""
    if not types:
        return "()"
    return delimiter.join(f"{v:.17g}" if t == "float" else str(v) for v, t in zip(row, types,
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
