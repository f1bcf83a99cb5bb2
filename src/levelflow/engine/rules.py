"""One Datalog rule body, whatever holds the rows: the order of joins, filters and bindings.

Constant: the rule, the declarations. Changes while a body is built: the frame so far, the
variables it binds (with their types), the comparisons and negations still waiting.
A backend (`Ops`) supplies the frame and expression operations: Spark DataFrames in
engine/compile.py, Polars frames in engine/plans/columnar.py; both therefore give the same
tuples. Inside a body every bound variable x is the column `var_col(x)`; expression arguments
of an atom are columns `k<atom>_<pos>`, matched against the expression's value as soon as its
variables are bound (by that atom or a later one: `tak(x-1, y, ...)` may be joined before x).
Arithmetic follows Soufflé on 64-bit integers (`/` truncates, `%` takes the dividend's sign);
an overflow or a division by zero has no value and drops the row; an unsigned result below
zero is an overflow; an integer literal takes its unsigned operand's type, as Soufflé infers it.
Functors (`Call`, tasks/functors.py) are operations of the backend too; `x = range(a, b)`
binds x to one row per value (`generate`); `contains` and `match` filter (`test`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from levelflow.errors import LevelflowError
from levelflow.tasks import functors
from levelflow.tasks.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Comparison,
    Const,
    Decl,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)

AUTOINC = "_auto"  # the column of a body row's number


class CompileError(LevelflowError):
    """A rule cannot be evaluated (an ungrounded variable, a non-stratified negation, ...)."""


def where(node: object) -> str:
    """Return the `file:line:col` prefix of a node, or `rule` when it carries no position."""
    loc = getattr(node, "loc", None)
    return str(loc) if loc is not None else "rule"


def var_col(name: str) -> str:
    """Return the column name of variable `name`: `v_` and the name, unique regardless of case.

    Spark resolves column names without case by default, so `i` and `I` in one rule would be
    ambiguous; `_` becomes `__` and an upper-case letter `_` plus its lower case (`I` -> `v__i`).
    """
    return "v_" + "".join("__" if ch == "_" else f"_{ch.lower()}" if ch.isupper() else ch
                          for ch in name)


def term_vars(term: Term) -> set[str]:
    """Return the names of the variables in a term."""
    if isinstance(term, Var):
        return {term.name}
    if isinstance(term, BinOp):
        return term_vars(term.left) | term_vars(term.right)
    if isinstance(term, Call):
        return set().union(*map(term_vars, term.args))
    return set()


def reads_own(rule: Rule, names: Sequence[str]) -> bool:
    """Return whether a rule's body reads a relation of its own task (positively)."""
    for lit in rule.body:
        if isinstance(lit, Negation) and lit.atom.relation in names:
            raise CompileError(f"{lit.loc or 'rule'}: error: negation of {lit.atom.relation} "
                               f"inside its own recursion is not stratified")
        if isinstance(lit, Atom) and lit.relation in names:
            return True
    return False


def literal_vars(lit: object) -> set[str]:
    """Return the variables of a body literal."""
    if isinstance(lit, Atom):
        return set().union(*map(term_vars, lit.args))
    if isinstance(lit, Negation):
        return literal_vars(lit.atom)
    return term_vars(lit.left) | term_vars(lit.right)


class Ops:
    """A backend's operations on frames and expressions (see compile.py, plans/columnar.py)."""

    def lit(self, value, kind: str): ...
    def col(self, name: str): ...
    def arith(self, op: str, left, right, kind: str): ...  # no value on overflow or x / 0
    # + - * / % ^ and the bitwise, shift and logical operators of tasks/functors.py.
    def call(self, name: str, args: list, kinds: list[str], kind: str): ...  # a functor's value
    def test(self, op: str, left, right): ...  # `contains` / `match` as a condition
    def generate(self, df, name: str, args: list, kind: str): ...  # a row per `range` value
    def numbered(self, df, cols: list[str], name: str): ...  # distinct rows numbered 0.. in
    # the order of `cols` (the variables by name): autoinc()'s numbers, the same in every plan
    def non_negative(self, value): ...  # the value where >= 0, else none
    def cast(self, expr, primitive: str): ...
    def unit(self): ...  # one row, no variables: the empty conjunction
    def size(self, pos: int) -> int: ...  # rows of the frame body atom `pos` reads (estimate)
    def filter(self, df, cond): ...
    def select(self, df, named: list[tuple[str, object]]): ...
    def with_columns(self, df, named: list[tuple[str, object]]): ...
    def drop(self, df, names: list[str]): ...
    def join(self, cur, adf, on: list[str], pos: int): ...  # inner; `pos` for size hints
    def cross(self, cur, adf, pos: int): ...
    def exists(self, cur, adf, present: bool): ...  # cur if adf (non-)empty, else no rows
    def anti(self, cur, adf, on: list[str]): ...
    def not_null(self, df, names: list[str]): ...
    def nullary_head(self, body): ...  # one True row if the body has any row
    def aggregate(self, df, keys: list[str], kind: str, out: str, primitive: str): ...
    # per group of `keys` (one group when none, even of no rows) the aggregate `kind` of
    # column VALUE as column `out`: count, sum (none on overflow; 0 for no rows), min, max,
    # mean (a float); none where a group has no value (min of no rows)


def term_expr(ops: Ops, term: Term, types: Mapping[str, str]) -> tuple[object, str]:
    """Return a term as an expression over variable columns and its primitive type."""
    if isinstance(term, Var):
        if term.name not in types:
            raise CompileError(f"{where(term)}: error: variable {term.name} is not grounded")
        return ops.col(var_col(term.name)), types[term.name]
    if isinstance(term, Const):
        return ops.lit(term.value, term.kind), term.kind
    if isinstance(term, Wildcard):
        raise CompileError(f"{where(term)}: error: a wildcard has no value here")
    if isinstance(term, Call):
        return call_expr(ops, term, types)
    left, lt = term_expr(ops, term.left, types)
    right, rt = term_expr(ops, term.right, types)
    if "symbol" in (lt, rt):
        raise CompileError(f"{where(term)}: error: arithmetic on a symbol")
    if isinstance(term.left, Const) and lt == "number" and rt == "unsigned":
        lt = "unsigned"
    if isinstance(term.right, Const) and rt == "number" and lt == "unsigned":
        rt = "unsigned"
    kind = "float" if "float" in (lt, rt) else ("unsigned" if lt == rt == "unsigned" else "number")
    if term.op not in functors.ARITH_OPS + functors.INTEGRAL_OPS:
        raise CompileError(f"{where(term)}: error: unknown operator {term.op}")
    if kind == "float" and term.op in functors.INTEGRAL_OPS:
        raise CompileError(f"{where(term)}: error: '{term.op}' on a float")
    value = ops.arith(term.op, left, right, kind)
    return (ops.non_negative(value) if kind == "unsigned" else value), kind


def call_args(ops: Ops, call: Call, types: Mapping[str, str]) -> tuple[list, list[str], str]:
    """Return a functor's argument expressions, their types and its result type; an integer
    literal takes the type the other arguments agree on."""
    parts = [term_expr(ops, a, types) for a in call.args]
    written = ["int" if isinstance(a, Const) and a.kind == "number" else t
               for a, (_, t) in zip(call.args, parts, strict=True)]
    try:
        kind = functors.call_type(call.name, written) or "number"
    except functors.FunctorTypeError as e:
        raise CompileError(f"{where(call)}: error: {e}") from None
    joined = call.name in ("min", "max", "range", "bnot", "lnot")
    exprs, kinds = [], []
    for a, (expr, t), w in zip(call.args, parts, written, strict=True):
        if w == "int":
            t = kind if joined else "number"
            expr = ops.lit(a.value, t)
        exprs.append(expr)
        kinds.append(t)
    return exprs, kinds, kind


def call_expr(ops: Ops, call: Call, types: Mapping[str, str]) -> tuple[object, str]:
    """Return a functor's value (none where Soufflé's is an error) and its type."""
    if call.name == "range":
        raise CompileError(f"{where(call)}: error: 'range' only binds a variable: x = range(...)")
    if call.name == "autoinc":  # head_rows numbered the body's rows in AUTOINC
        base = call.args[0].value if call.args else 0
        return ops.arith("+", ops.col(AUTOINC), ops.lit(base, "number"), "number"), "number"
    exprs, kinds, kind = call_args(ops, call, types)
    value = ops.call(call.name, exprs, kinds, kind)
    return (ops.non_negative(value) if kind == "unsigned" else value), kind


def compare(op: str, left, right):
    """Return the boolean expression `left op right` (Spark columns and Polars expressions)."""
    if op == "=":
        return left == right
    if op == "!=":
        return left != right
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    if op == ">=":
        return left >= right
    raise ValueError(f"unknown comparison {op}")


def atom_frame(ops: Ops, df, atom: Atom, decl: Decl, bound: Mapping[str, str], tag: int = 0):
    """Return the atom's rows filtered (constants, repeats) and renamed to variable columns.

    Also returns the new variables with their types, and the expression arguments, each kept
    as a column `k<tag>_<pos>` to be matched against the expression's value.
    """
    if len(atom.args) != decl.arity:
        raise CompileError(f"{where(atom)}: error: {atom.relation} has arity {decl.arity}, "
                           f"used with {len(atom.args)} arguments")
    first: dict[str, str] = {}
    exprs: list[tuple[str, Term]] = []
    for i, arg in enumerate(atom.args):
        col = f"c{i}"
        if isinstance(arg, Const):
            df = ops.filter(df, ops.col(col) == ops.lit(arg.value, decl.types[i]))
        elif isinstance(arg, Var):
            if arg.name in first:  # `r(x, x)`: a repeated variable is an equality filter
                df = ops.filter(df, ops.col(col) == ops.col(first[arg.name]))
            else:
                first[arg.name] = col
        elif isinstance(arg, BinOp | Call):
            exprs.append((f"k{tag}_{i}", arg))
    named = [(var_col(name), ops.col(col)) for name, col in first.items()]
    named += [(k, ops.col(f"c{k.split('_')[1]}")) for k, _ in exprs]
    new = {name: decl.types[int(col[1:])] for name, col in first.items() if name not in bound}
    # Selecting no column would lose the rows' count, which a variable-free atom still needs.
    return (ops.select(df, named) if named else df), new, exprs


class Body:
    """The plan of one rule body being built: the frame so far and its bound variables."""

    __slots__ = ("ops", "rule", "decls", "frames", "df", "types", "pending", "waiting")

    def __init__(self, ops: Ops, rule: Rule, decls: Mapping[str, Decl], frames: Mapping) -> None:
        self.ops = ops
        self.rule = rule
        self.decls = decls
        self.frames = frames
        self.df = None
        self.types: dict[str, str] = {}  # bound variable -> primitive type
        self.pending = [i for i, lit in enumerate(rule.body) if not isinstance(lit, Atom)]
        # Expression arguments of joined atoms whose variables are not all bound yet:
        # (column, expression), each a filter once they are.
        self.waiting: list[tuple[str, Term]] = []

    def _expr(self, term: Term):
        return term_expr(self.ops, term, self.types)[0]

    def join_atom(self, i: int) -> None:
        """Join the positive atom at body position i into the frame."""
        ops, atom = self.ops, self.rule.body[i]
        adf, new, exprs = atom_frame(ops, self.frames[i], atom, self.decls[atom.relation],
                                     self.types, i)
        names = [var_col(a.name) for a in atom.args if isinstance(a, Var)]
        if self.df is None:
            self.types.update(new)
            self.waiting += exprs
            self.df = adf
            if names or self._waits():
                self._match_waiting()
            else:  # no variables: filter by the constant expressions, then "a tuple exists"
                # (its `k` columns kept until then: a frame of no columns has no rows' count).
                for k, t in self.waiting:
                    self.df = ops.filter(self.df, ops.col(k) == self._expr(t))
                self.df, self.waiting = ops.exists(ops.unit(), self.df, True), []
            return
        known = set(self.types)
        bound_cols = {var_col(v) for v in known}
        # Expressions over already-bound variables become computed join keys (`fib(n-1, x)`).
        keyed = [(k, t) for k, t in exprs if term_vars(t) <= known]
        cur = self.df
        if keyed:
            cur = ops.with_columns(cur, [(k, self._expr(t)) for k, t in keyed])
        on = list(dict.fromkeys(c for c in names if c in bound_cols)) + [k for k, _ in keyed]
        if on:
            cur = ops.join(cur, adf, on, i)
        elif names or len(keyed) < len(exprs):
            cur = ops.cross(cur, adf, i)
        else:  # no variables at all: the atom only says "some such tuple exists"
            cur = ops.exists(cur, adf, True)
        self.df = ops.drop(cur, [k for k, _ in keyed])
        self.types.update(new)
        # Expressions over this atom's own (or mixed) variables are filters: now, or once a
        # later atom or an equality binds what they still need.
        self.waiting += [(k, t) for k, t in exprs if not term_vars(t) <= known]
        self._match_waiting()

    def _waits(self) -> bool:
        """Return whether a waiting expression needs a variable not bound yet."""
        return any(not term_vars(t) <= set(self.types) for _, t in self.waiting)

    def _match_waiting(self) -> bool:
        """Filter by each waiting expression whose variables are now bound; return whether any."""
        known = set(self.types)
        ready = [(k, t) for k, t in self.waiting if term_vars(t) <= known]
        for k, t in ready:
            self.df = self.ops.filter(self.df, self.ops.col(k) == self._expr(t))
        if ready:
            done = [k for k, _ in ready]
            self.df = self.ops.drop(self.df, done)
            self.waiting = [(k, t) for k, t in self.waiting if k not in done]
        return bool(ready)

    def anti_join(self, i: int) -> None:
        """Remove from the frame the rows that the negated atom at body position i matches."""
        ops, atom = self.ops, self.rule.body[i].atom
        adf, _, exprs = atom_frame(ops, self.frames[i], atom, self.decls[atom.relation],
                                   self.types, i)
        cur = self.df
        if exprs:
            cur = ops.with_columns(cur, [(k, self._expr(t)) for k, t in exprs])
        on = [var_col(a.name) for a in atom.args if isinstance(a, Var)] + [k for k, _ in exprs]
        on = list(dict.fromkeys(on))
        cur = ops.anti(cur, adf, on) if on else ops.exists(cur, adf, False)
        self.df = ops.drop(cur, [k for k, _ in exprs])

    def apply_ready(self) -> None:
        """Apply every comparison or negation whose variables are bound; bind `x = expr`."""
        if self.df is None:  # nothing to filter yet: the first atom comes first
            return
        progress = True
        while progress:
            progress = self._match_waiting()
            for i in list(self.pending):
                lit = self.rule.body[i]
                if isinstance(lit, Negation):
                    if literal_vars(lit) <= set(self.types):
                        self.anti_join(i)
                        self.pending.remove(i)
                        progress = True
                elif self._comparison(lit):
                    self.pending.remove(i)
                    progress = True

    def _comparison(self, cmp: Comparison) -> bool:
        """Filter or bind by a comparison if its variables allow; return whether it was used."""
        known = set(self.types)
        for var, expr in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            if (isinstance(expr, Call) and expr.name == "range" and cmp.op == "="
                    and isinstance(var, Var) and term_vars(expr) <= known):
                self._generate(var, expr)
                return True
        if term_vars(cmp.left) | term_vars(cmp.right) <= known:
            left, right = self._expr(cmp.left), self._expr(cmp.right)
            if cmp.op.lstrip("!") in functors.CONSTRAINTS:
                cond = self.ops.test(cmp.op.lstrip("!"), left, right)
                cond = ~cond if cmp.op.startswith("!") else cond
            else:
                cond = compare(cmp.op, left, right)
            self.df = self.ops.filter(self.df, cond)
            return True
        if cmp.op != "=":
            return False
        for var, expr in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            if isinstance(var, Var) and var.name not in known and term_vars(expr) <= known:
                value, kind = term_expr(self.ops, expr, self.types)
                name = var_col(var.name)
                self.df = self.ops.not_null(self.ops.with_columns(self.df, [(name, value)]),
                                            [name])
                self.types[var.name] = kind
                return True
        return False

    def _generate(self, var: Var, call: Call) -> None:
        """Bind `var = range(...)`: a row per value; a bound var keeps the rows it is among."""
        exprs, _, kind = call_args(self.ops, call, self.types)
        name = var_col(var.name)
        if var.name not in self.types:
            self.df = self.ops.generate(self.df, name, exprs, kind)
            self.types[var.name] = kind
            return
        self.df = self.ops.generate(self.df, "_gen", exprs, kind)
        self.df = self.ops.drop(self.ops.filter(self.df, self.ops.col(name) ==
                                                self.ops.col("_gen")), ["_gen"])

    def next_atom(self, todo: list[int], first: int | None) -> int:
        """Return the body position of the atom to join next.

        Any atom can be joined: an expression argument whose variables are not bound yet waits
        as a filter. So the order only weighs cost: the recent delta first, then atoms that
        share a bound argument, atoms whose expressions can be matched now, the smaller.
        """
        known = set(self.types)
        best, best_key = todo[0], None
        for i in todo:
            atom = self.rule.body[i]
            own = {a.name for a in atom.args if isinstance(a, Var)}
            ready = all(term_vars(a) <= known | own for a in atom.args
                        if isinstance(a, BinOp | Call))
            bound_args = sum(1 for a in atom.args if isinstance(a, Const)
                             or (not isinstance(a, Wildcard) and term_vars(a) and
                                 term_vars(a) <= known))
            connected = self.df is None or bound_args > 0 or not own
            key = (i == first, connected, ready, bound_args, -self.ops.size(i), -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        return best


def body_rows(ops: Ops, rule: Rule, decls: Mapping[str, Decl], frames: Mapping,
              first: int | None = None) -> tuple[object, dict[str, str]]:
    """Return the rule body's rows (a column per bound variable) and the variable types.

    `frames` maps the body position of every atom (positive or negated) to the frame it reads;
    `first` is the atom to start from (the recent delta of a semi-naive variant).
    """
    body = Body(ops, rule, decls, frames)
    todo = [i for i, lit in enumerate(rule.body) if isinstance(lit, Atom)]
    if not todo:
        body.df = ops.unit()
    body.apply_ready()
    while todo:
        i = body.next_atom(todo, first)
        todo.remove(i)
        body.join_atom(i)
        body.apply_ready()
    if body.waiting:
        term = body.waiting[0][1]
        missing = sorted(term_vars(term) - set(body.types))
        raise CompileError(f"{where(term)}: error: variable {missing[0]} is not grounded")
    if body.pending:
        lit = rule.body[body.pending[0]]
        missing = sorted(literal_vars(lit) - set(body.types))
        what = f"variable {missing[0]}" if missing else "a variable"
        raise CompileError(f"{where(lit)}: error: {what} is not grounded")
    return body.df, body.types


def head_rows(ops: Ops, body, types: Mapping[str, str], head: Atom, decl: Decl):
    """Return the head's tuples (c0.. of the declared types) from a body's rows; may repeat."""
    if len(head.args) != decl.arity:
        raise CompileError(f"{where(head)}: error: {head.relation} has arity {decl.arity}, "
                           f"used with {len(head.args)} arguments")
    if decl.arity == 0:
        return ops.nullary_head(body)
    if any(isinstance(a, Aggregate) for a in head.args):
        return aggregate_rows(ops, body, types, head, decl)
    named, computed = [], []
    if functors.uses_autoinc([Rule((head,), ())]):
        body = ops.numbered(body, [var_col(v) for v in sorted(types)], AUTOINC)
    for i, (arg, primitive) in enumerate(zip(head.args, decl.types, strict=True)):
        if isinstance(arg, Wildcard):
            raise CompileError(f"{where(head)}: error: a wildcard in the head of a rule")
        named.append((f"c{i}", ops.cast(term_expr(ops, arg, types)[0], primitive)))
        if isinstance(arg, BinOp | Call):
            computed.append(f"c{i}")
    out = ops.select(body, named)
    # No value marks an overflow or a division by zero: drop the row.
    return ops.not_null(out, computed) if computed else out


VALUE = "_value"  # the column an aggregate reads


def aggregate_rows(ops: Ops, body, types: Mapping[str, str], head: Atom, decl: Decl):
    """Return a lowered aggregate's tuples (tasks/aggregates.py): the body's rows grouped by
    the head's other arguments (variables), one tuple per group that has a value."""
    keys, value, agg, pos = [], None, None, 0
    for i, (arg, primitive) in enumerate(zip(head.args, decl.types, strict=True)):
        if isinstance(arg, Aggregate):
            agg, pos = arg, i
            if arg.target is not None:
                value = ops.cast(term_expr(ops, arg.target, types)[0], primitive)
        else:
            keys.append((f"c{i}", ops.cast(term_expr(ops, arg, types)[0], primitive)))
    named = keys + [(VALUE, value if value is not None else ops.lit(1, "number"))]
    # Added, then selected: selecting only literals from no rows makes one row in Polars.
    rows = ops.select(ops.with_columns(body, named), [(k, ops.col(k)) for k, _ in named])
    if value is not None:  # a value that overflowed has none: that row is not aggregated
        rows = ops.not_null(rows, [VALUE])
    out = ops.aggregate(rows, [k for k, _ in keys], agg.kind, f"c{pos}", decl.types[pos])
    out = ops.select(out, [(f"c{i}", ops.col(f"c{i}")) for i in range(decl.arity)])
    return ops.not_null(out, [f"c{pos}"])


def rule_heads(rule: Rule, relations: Sequence[str]) -> list[Atom]:
    """Return the heads of a rule that derive into one of `relations`."""
    return [h for h in rule.heads if h.relation in relations]
