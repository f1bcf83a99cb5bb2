"""One Datalog rule over Polars frames: the in-partition twin of engine/compile.py.

The semantics are compile.py's, so every plan gives the same tuples: a relation is a frame with
positional columns c0..; inside a body every bound variable x is the column `v_x`; 64-bit
integer arithmetic where an overflow or a division by zero yields null and drops the row; `/`
truncates and `%` takes the dividend's sign (C, as Spark's `div` and `try_mod`); an unsigned
result below zero is an overflow; an integer literal takes its unsigned operand's type.
Polars wraps integers around on overflow, so each operation checks for it explicitly.
Join order follows compile.py's rule, with exact row counts instead of estimates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from levelflow.engine.compile import CompileError, _literal_vars, _where, term_vars
from levelflow.tasks.ast import (
    Atom,
    BinOp,
    Comparison,
    Const,
    Decl,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)

POLARS_TYPES = {"number": pl.Int64, "unsigned": pl.Int64, "float": pl.Float64,
                "symbol": pl.String}
_INT_MIN = -(2**63)


def frame_schema(decl: Decl) -> dict[str, pl.DataType]:
    """Return the Polars schema of a relation: c0..c{n-1}, or one Boolean c0 if nullary."""
    if decl.arity == 0:
        return {"c0": pl.Boolean}
    return {f"c{i}": POLARS_TYPES[t] for i, t in enumerate(decl.types)}


def empty_frame(decl: Decl) -> pl.DataFrame:
    """Return an empty frame with the relation's schema."""
    return pl.DataFrame(schema=frame_schema(decl))


def literal(value: int | float | str, kind: str) -> pl.Expr:
    """Return a literal expression of the Polars type that stores `kind`."""
    return pl.lit(value, dtype=POLARS_TYPES.get(kind, pl.Int64))


def _checked_int(op: str, a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """Return `a op b` on Int64, null where it overflows or divides by zero."""
    if op == "+":
        r = a + b
        bad = ((a > 0) & (b > 0) & (r < 0)) | ((a < 0) & (b < 0) & (r >= 0))
        return pl.when(~bad).then(r)
    if op == "-":
        r = a - b
        bad = ((a >= 0) & (b < 0) & (r < 0)) | ((a < 0) & (b > 0) & (r >= 0))
        return pl.when(~bad).then(r)
    if op == "*":
        r = a * b
        # Exact products divide back to b; -1 is kept out of the division (MIN // -1 wraps).
        safe_a = pl.when((a == 0) | (a == -1)).then(1).otherwise(a)
        ok = (a == 0) | ((a == -1) & (b != _INT_MIN)) | ((a != -1) & (r // safe_a == b))
        return pl.when(ok).then(r)
    # `/` and `%` truncate toward zero: floor division corrected where the signs differ.
    safe_b = pl.when((b == 0) | (b == -1)).then(1).otherwise(b)
    floor = a // safe_b
    rem = a - floor * safe_b
    trunc = floor + pl.when((rem != 0) & ((a < 0) != (safe_b < 0))).then(1).otherwise(0)
    if op == "/":
        negated = pl.when(a != _INT_MIN).then(-a)
        return pl.when(b == -1).then(negated).when(b != 0).then(trunc)
    if op == "%":
        return pl.when(b == -1).then(pl.lit(0, pl.Int64)).when(b != 0).then(a - trunc * safe_b)
    raise ValueError(f"unknown operator {op}")


def _float_op(op: str, a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """Return `a op b` on doubles; division (and `%`) by zero is null, `%` is C's fmod."""
    a, b = a.cast(pl.Float64), b.cast(pl.Float64)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return pl.when(b != 0).then(a / b)
    fmod = pl.struct(a.alias("a"), b.alias("b")).map_batches(
        lambda s: pl.Series(np.fmod(s.struct.field("a").to_numpy(),
                                    s.struct.field("b").to_numpy())),
        return_dtype=pl.Float64)
    return pl.when(b != 0).then(fmod)


def term_expr(term: Term, types: Mapping[str, str]) -> tuple[pl.Expr, str]:
    """Return a term as an expression over `v_*` columns and its primitive type (float wins)."""
    if isinstance(term, Var):
        if term.name not in types:
            raise CompileError(f"{_where(term)}: error: variable {term.name} is not grounded")
        return pl.col(f"v_{term.name}"), types[term.name]
    if isinstance(term, Const):
        return literal(term.value, term.kind), term.kind
    if isinstance(term, Wildcard):
        raise CompileError(f"{_where(term)}: error: a wildcard has no value here")
    left, lt = term_expr(term.left, types)
    right, rt = term_expr(term.right, types)
    if "symbol" in (lt, rt):
        raise CompileError(f"{_where(term)}: error: arithmetic on a symbol")
    if isinstance(term.left, Const) and lt == "number" and rt == "unsigned":
        lt = "unsigned"
    if isinstance(term.right, Const) and rt == "number" and lt == "unsigned":
        rt = "unsigned"
    kind = "float" if "float" in (lt, rt) else ("unsigned" if lt == rt == "unsigned" else "number")
    if term.op not in "+-*/%":
        raise CompileError(f"{_where(term)}: error: unknown operator {term.op}")
    if kind == "float":
        return _float_op(term.op, left, right), kind
    value = _checked_int(term.op, left, right)
    if kind == "unsigned":
        value = pl.when(value >= 0).then(value)  # below zero: an overflow, the row is dropped
    return value, kind


def _compare(op: str, left: pl.Expr, right: pl.Expr) -> pl.Expr:
    """Return the boolean expression `left op right`."""
    ops = {"=": left.__eq__, "!=": left.__ne__, "<": left.__lt__, "<=": left.__le__,
           ">": left.__gt__, ">=": left.__ge__}
    if op not in ops:
        raise ValueError(f"unknown comparison {op}")
    return ops[op](right)


def atom_frame(df: pl.DataFrame, atom: Atom, decl: Decl, bound: Mapping[str, str]
               ) -> tuple[pl.DataFrame, dict[str, str], list[tuple[str, Term]]]:
    """Return the atom's tuples filtered (constants, repeats) and renamed to `v_*` columns.

    Also returns the new variables with their types, and the expression arguments, each kept as
    a column `k_<pos>` to be matched against the expression's value.
    """
    if len(atom.args) != decl.arity:
        raise CompileError(f"{_where(atom)}: error: {atom.relation} has arity {decl.arity}, "
                           f"used with {len(atom.args)} arguments")
    conds: list[pl.Expr] = []
    first: dict[str, str] = {}
    exprs: list[tuple[str, Term]] = []
    for i, arg in enumerate(atom.args):
        col = f"c{i}"
        if isinstance(arg, Const):
            conds.append(pl.col(col) == literal(arg.value, decl.types[i]))
        elif isinstance(arg, Var):
            if arg.name in first:
                conds.append(pl.col(col) == pl.col(first[arg.name]))
            else:
                first[arg.name] = col
        elif isinstance(arg, BinOp):
            exprs.append((f"k_{i}", arg))
    if conds:
        df = df.filter(*conds)
    cols = [pl.col(col).alias(f"v_{name}") for name, col in first.items()]
    cols += [pl.col(f"c{name[2:]}").alias(name) for name, _ in exprs]
    new = {name: decl.types[int(col[1:])] for name, col in first.items() if name not in bound}
    return (df.select(cols) if cols else df), new, exprs  # no columns would lose the height


def _exists(cur: pl.DataFrame, other: pl.DataFrame, present: bool) -> pl.DataFrame:
    """Return cur if `other` is non-empty (present) or empty (not present), else no rows."""
    return cur if (other.height > 0) == present else cur.clear()


class Body:
    """The plan of one rule body being run: the frame so far and its bound variables."""

    __slots__ = ("rule", "decls", "frames", "df", "types", "pending")

    def __init__(self, rule: Rule, decls: Mapping[str, Decl],
                 frames: Mapping[int, pl.DataFrame]) -> None:
        self.rule = rule
        self.decls = decls
        self.frames = frames
        self.df: pl.DataFrame | None = None
        self.types: dict[str, str] = {}
        self.pending = [i for i, lit in enumerate(rule.body) if not isinstance(lit, Atom)]

    def join_atom(self, i: int) -> None:
        """Join the positive atom at body position i into the frame."""
        atom = self.rule.body[i]
        adf, new, exprs = atom_frame(self.frames[i], atom, self.decls[atom.relation], self.types)
        names = [c for c in adf.columns if c.startswith("v_")]
        ks = [k for k, _ in exprs]
        if self.df is None:
            self.types.update(new)
            for k, t in exprs:  # only this atom's variables or constants: a filter
                adf = adf.filter(pl.col(k) == term_expr(t, self.types)[0])
            self.df = adf.drop(ks) if names else _exists(_unit(), adf, True)
            return
        known = set(self.types)
        keyed = [(k, t) for k, t in exprs if term_vars(t) <= known]
        later = [(k, t) for k, t in exprs if not term_vars(t) <= known]
        cur = self.df
        if keyed:
            cur = cur.with_columns([term_expr(t, self.types)[0].alias(k) for k, t in keyed])
        on = [c for c in names if c[2:] in known] + [k for k, _ in keyed]
        if on:
            cur = cur.join(adf, on=on, how="inner")
        elif names or later:
            cur = cur.join(adf, how="cross")
        else:  # no variables at all: the atom only says "some such tuple exists"
            cur = _exists(cur, adf, True)
        self.types.update(new)
        for k, t in later:
            cur = cur.filter(pl.col(k) == term_expr(t, self.types)[0])
        self.df = cur.drop([k for k in ks if k in cur.columns])

    def anti_join(self, i: int) -> None:
        """Remove the rows that the negated atom at body position i matches."""
        atom = self.rule.body[i].atom
        adf, _, exprs = atom_frame(self.frames[i], atom, self.decls[atom.relation], self.types)
        cur = self.df
        if exprs:
            cur = cur.with_columns([term_expr(t, self.types)[0].alias(k) for k, t in exprs])
        on = [c for c in adf.columns if c.startswith(("v_", "k_"))]
        cur = cur.join(adf, on=on, how="anti") if on else _exists(cur, adf, False)
        self.df = cur.drop([k for k, _ in exprs])

    def apply_ready(self) -> None:
        """Apply every comparison or negation whose variables are bound; bind `x = expr`."""
        if self.df is None:
            return
        progress = True
        while progress:
            progress = False
            for i in list(self.pending):
                lit = self.rule.body[i]
                if isinstance(lit, Negation):
                    if _literal_vars(lit) <= set(self.types):
                        self.anti_join(i)
                        self.pending.remove(i)
                        progress = True
                elif self._comparison(lit):
                    self.pending.remove(i)
                    progress = True

    def _comparison(self, cmp: Comparison) -> bool:
        """Filter or bind by a comparison if its variables allow; return whether it was used."""
        known = set(self.types)
        if term_vars(cmp.left) | term_vars(cmp.right) <= known:
            left, _ = term_expr(cmp.left, self.types)
            right, _ = term_expr(cmp.right, self.types)
            self.df = self.df.filter(_compare(cmp.op, left, right))
            return True
        if cmp.op != "=":
            return False
        for var, expr in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            if isinstance(var, Var) and var.name not in known and term_vars(expr) <= known:
                value, kind = term_expr(expr, self.types)
                self.df = self.df.with_columns(value.alias(f"v_{var.name}")).filter(
                    pl.col(f"v_{var.name}").is_not_null())
                self.types[var.name] = kind
                return True
        return False

    def next_atom(self, todo: list[int], first: int | None) -> int | None:
        """Return the body position of the atom to join next, or None if none can be joined."""
        known = set(self.types)
        best, best_key = None, None
        for i in todo:
            atom = self.rule.body[i]
            own = {a.name for a in atom.args if isinstance(a, Var)}
            if any(not term_vars(a) <= known | own for a in atom.args if isinstance(a, BinOp)):
                continue
            bound_args = sum(1 for a in atom.args if isinstance(a, Const)
                             or (not isinstance(a, Wildcard) and term_vars(a) and
                                 term_vars(a) <= known))
            connected = self.df is None or bound_args > 0 or not own
            key = (i == first, connected, bound_args, -self.frames[i].height, -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        return best


def _unit() -> pl.DataFrame:
    """Return the one-row frame that stands for the empty conjunction."""
    return pl.DataFrame({"_unit": [True]})


def body_rows(rule: Rule, decls: Mapping[str, Decl], frames: Mapping[int, pl.DataFrame],
              first: int | None = None) -> tuple[pl.DataFrame, dict[str, str]]:
    """Return the rows of a rule body (one `v_x` column per variable) and the variable types.

    `frames` maps the body position of every atom (positive or negated) to the frame it reads;
    `first` is the atom to start from (the recent delta of a semi-naive variant).
    """
    body = Body(rule, decls, frames)
    todo = [i for i, lit in enumerate(rule.body) if isinstance(lit, Atom)]
    if not todo:
        body.df = _unit()
    body.apply_ready()
    while todo:
        i = body.next_atom(todo, first)
        if i is None:
            lit = rule.body[todo[0]]
            raise CompileError(f"{_where(lit)}: error: an argument of {lit.relation} is not "
                               f"grounded")
        todo.remove(i)
        body.join_atom(i)
        body.apply_ready()
        if body.df.height == 0:  # nothing left to join: skip the remaining atoms' work
            break
    if body.pending and body.df.height:
        lit = rule.body[body.pending[0]]
        missing = sorted(_literal_vars(lit) - set(body.types))
        what = f"variable {missing[0]}" if missing else "a variable"
        raise CompileError(f"{_where(lit)}: error: {what} is not grounded")
    return body.df, body.types


def head_rows(body: pl.DataFrame, types: Mapping[str, str], head: Atom,
              decl: Decl) -> pl.DataFrame:
    """Return the head's tuples (c0.. of the declared types) from a body's rows; may repeat."""
    if len(head.args) != decl.arity:
        raise CompileError(f"{_where(head)}: error: {head.relation} has arity {decl.arity}, "
                           f"used with {len(head.args)} arguments")
    if decl.arity == 0:
        return pl.DataFrame({"c0": [True] if body.height else []}, schema={"c0": pl.Boolean})
    if body.height == 0:
        return empty_frame(decl)
    cols, computed = [], []
    for i, (arg, primitive) in enumerate(zip(head.args, decl.types, strict=True)):
        if isinstance(arg, Wildcard):
            raise CompileError(f"{_where(head)}: error: a wildcard in the head of a rule")
        expr, _ = term_expr(arg, types)
        cols.append(expr.cast(POLARS_TYPES[primitive]).alias(f"c{i}"))
        if isinstance(arg, BinOp):
            computed.append(f"c{i}")
    out = body.select(cols)
    return out.drop_nulls(computed) if computed else out


def heads_of(rule: Rule, relations: Sequence[str]) -> list[Atom]:
    """Return the heads of a rule that derive into one of `relations`."""
    return [h for h in rule.heads if h.relation in relations]
