"""What a rule is made of, whatever holds the rows: the backend's operations and the terms,
functors and heads built over them.

A backend (`Ops`) supplies the frame and expression operations: Spark DataFrames in
engine/compile.py, Polars frames in engine/plans/columnar.py; both therefore give the same
tuples. Inside a body every bound variable x is the column `var_col(x)`; the order of its joins,
filters and bindings is engine/rule_body.py's. Arithmetic follows Soufflé on 64-bit integers
(`/` truncates, `%` takes the dividend's sign); an overflow or a division by zero has no value
and drops the row; an unsigned is held as the int64 of its bits and wraps modulo 2^64
(tasks/functors.py), compared through `Ops.order_key`; an integer literal takes its unsigned
operand's type, as Soufflé infers it. Functors (`Call`, tasks/functors.py) are
operations of the backend too; `x = range(a, b)` binds x to one row per value (`generate`);
`contains` and `match` filter (`test`). A head's tuples come from the body's rows
(`head_rows`), an aggregate's by one group-by (`aggregate_rows`).
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

    limit = None  # the task's guard.Limit, if any: a range's values are counted against it

    def lit(self, value, kind: str): ...
    def col(self, name: str): ...
    def arith(self, op: str, left, right, kind: str): ...  # no value on overflow or x / 0
    # + - * / % ^ and the bitwise, shift and logical operators of tasks/functors.py.
    def call(self, name: str, args: list, kinds: list[str], kind: str): ...  # a functor's value
    def bounded(self, value, call): ...  # the symbol `value`, SymbolLimit (guard.py) where
    # one is longer than MAX_SYMBOL: the check `call` (cat, a record, a user functor) needs
    def test(self, op: str, left, right): ...  # `contains` / `match` as a condition
    def generate(self, df, name: str, args: list, kind: str): ...  # a row per `range` value
    def values(self, df, args: list, kind: str) -> int: ...  # how many rows generate() makes
    def numbered(self, df, cols: list[str], name: str): ...  # distinct rows numbered 0.. in
    # the order of `cols` (the variables by name): autoinc()'s numbers, the same in every plan
    def order_key(self, value): ...  # an unsigned's int64 whose signed order is its order
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
    return ops.arith(term.op, left, right, kind), kind


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
    if kind == "symbol" and functors.grows_symbols(call.name):
        value = ops.bounded(value, call)
    return value, kind


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
                value, vt = term_expr(ops, arg.target, types)
                if vt == "unsigned" and primitive == "float":  # mean: the unsigned's value
                    value = ops.call("utof", [value], ["unsigned"], "float")
                value = ops.cast(value, primitive)
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
