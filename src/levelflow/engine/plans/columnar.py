"""One Datalog rule over Polars frames: engine/rule_body.py's body (over rules.Ops) in a worker.

A relation is a frame with positional columns c0..; the semantics are those of rules.py, as
under Spark (compile.py), so every plan gives the same tuples. Polars wraps integers around on
overflow, so each integer operation checks for it and yields null (the row is dropped); `/`
and `%` truncate as C (Spark's `div`, `try_mod`); float `%` is C's fmod. `^`, shifts and
conversions from or to text run tasks/functors.py's Python functions row by row, and `match`
runs engine/regex_match.py over the column, as under Spark, so both answer alike. Join order uses
exact row counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

import numpy as np
import polars as pl

from levelflow.engine import rule_body, rules
from levelflow.engine.guard import UPDATING, Limit, SymbolLimit, symbol_limit
from levelflow.engine.plans.few_rows import near
from levelflow.engine.regex_match import match_series
from levelflow.engine.rules import Ops
from levelflow.tasks import functors
from levelflow.tasks.ast import Atom, Decl, Rule

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


def distinct(df: pl.DataFrame, maintain_order: bool = False) -> pl.DataFrame:
    """Return the rows each once (`df` itself if none repeats).

    Rows whose hashes all differ are distinct, and most inputs (fact files, a task's base
    tuples) repeat no row: on 10M rows of two numbers, hashing took 0.10 s and counting the
    distinct hashes 0.21 s (sorting them with numpy 0.68-0.75 s; counting the rows distinct
    takes 0.37 s at 3M, unique() 4 s, unique(maintain_order=True) 6 s). Any repeated hash
    takes the full unique."""
    if df.height < 2:
        return df
    if df.hash_rows().n_unique() == df.height:
        return df
    return df.unique(maintain_order=maintain_order)


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


def _unsigned(x: pl.Expr) -> pl.Expr:
    """Return a held unsigned (an Int64 of its bits) as the UInt64 it is."""
    return x.cast(pl.Int64).reinterpret(signed=False)


def _held(x: pl.Expr) -> pl.Expr:
    """Return a UInt64 as levelflow holds an unsigned: the Int64 of its bits."""
    return x.reinterpret(signed=True)


def _unsigned_op(op: str, a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """Return `a op b` on held unsigned values: + - * wrap modulo 2^64 (Polars' UInt64 does),
    `/` and `%` by zero are null."""
    ua, ub = _unsigned(a), _unsigned(b)
    if op == "+":
        return _held(ua + ub)
    if op == "-":
        return _held(ua - ub)
    if op == "*":
        return _held(ua * ub)
    return _held(ua // ub if op == "/" else ua % ub)


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


def by_rows(fn: Callable, args: list[pl.Expr], dtype: pl.DataType) -> pl.Expr:
    """Return `fn` applied row by row in Python (a row with a null argument gets null): the
    way both backends evaluate what one of them cannot express exactly."""
    names = [f"a{i}" for i in range(len(args))]

    def run(s: pl.Series) -> pl.Series:
        cols = [s.struct.field(n).to_list() for n in names]
        return pl.Series([None if any(v is None for v in row) else fn(*row)
                          for row in zip(*cols, strict=True)], dtype=dtype)

    # The row index gives the struct the frame's height when every argument is a literal.
    rows = pl.int_range(pl.len()).alias("_row")
    return pl.struct([rows, *(a.alias(n) for a, n in zip(args, names, strict=True))]
                     ).map_batches(run, return_dtype=dtype)


def _matched(pattern: pl.Expr, text: pl.Expr) -> pl.Expr:
    """Return `match(pattern, text)` over the whole column at once (engine/regex_match.py)."""
    rows = pl.int_range(pl.len()).alias("_row")  # the frame's height when both are literals
    return pl.struct([rows, pattern.alias("p"), text.alias("t")]).map_batches(
        lambda s: match_series(s.struct.field("p"), s.struct.field("t")),
        return_dtype=pl.Boolean)


def _integral_op(op: str, a: pl.Expr, b: pl.Expr, kind: str) -> pl.Expr:
    """Return a bitwise, shift or logical operation on Int64 (logical ones give 0 or 1)."""
    if op == "band":
        return a & b
    if op == "bor":
        return a | b
    if op == "bxor":
        return a ^ b
    if op in ("land", "lor", "lxor"):
        x, y = a != 0, b != 0
        return (x & y if op == "land" else x | y if op == "lor" else x ^ y).cast(pl.Int64)
    return by_rows(partial(functors.binary, op, kind=kind), [a, b], pl.Int64)  # shifts


def _float_to_int(x: pl.Expr, kind: str) -> pl.Expr:
    """Return a float truncated toward zero; null outside the integers of `kind` (UB in C)."""
    if kind == "unsigned":
        ok = x.is_finite() & (x > -1.0) & (x < 2.0**64)
        return _held(pl.when(ok).then(pl.max_horizontal(x, pl.lit(0.0))).cast(pl.UInt64))
    ok = x.is_finite() & (x >= -(2.0**63)) & (x < 2.0**63)
    return pl.when(ok).then(x).otherwise(None).cast(pl.Int64)


def _convert(name: str, x: pl.Expr, source: str, kind: str) -> pl.Expr:
    """Return a conversion functor (to_number, itof, to_string, ...) of x of type `source`."""
    if kind == "symbol":
        if source == "float":
            return by_rows(partial(functors.number_to_text, kind="float"), [x], pl.String)
        return (_unsigned(x) if source == "unsigned" else x).cast(pl.String)
    if source == "symbol":
        return by_rows(partial(functors.text_to_number, kind=kind), [x], POLARS_TYPES[kind])
    if kind == "float":
        return (_unsigned(x) if source == "unsigned" else x).cast(pl.Float64)
    return _float_to_int(x, kind) if source == "float" else x


def _substr(s: pl.Expr, i: pl.Expr, n: pl.Expr) -> pl.Expr:
    """Return C++'s s.substr(i, n) in characters: "" when i is outside s."""
    size = s.str.len_chars().cast(pl.Int64)
    known = s.is_not_null() & i.is_not_null() & n.is_not_null()
    inside = (i >= 0) & (i <= size)
    cut = s.str.slice(pl.when(inside).then(i).otherwise(0),
                      pl.when(n < 0).then(size).otherwise(n))
    return pl.when(known & inside).then(cut).when(known).then(pl.lit(""))


def functor(name: str, args: list[pl.Expr], kinds: list[str], kind: str) -> pl.Expr:
    """Return the value of an intrinsic functor over Polars expressions (null: no value)."""
    if name.startswith(("#", "@")):  # records, ADTs, user functors (tasks/functors.py)
        return by_rows(functors.apply_plain(name), args, POLARS_TYPES[kind])
    if name in functors.CASTS:
        return _convert(name, args[0], kinds[0], kind)
    if name in ("min", "max"):
        known = pl.all_horizontal([a.is_not_null() for a in args])
        pick = pl.min_horizontal if name == "min" else pl.max_horizontal
        if kind == "unsigned":
            return _held(pl.when(known).then(pick([_unsigned(a) for a in args])))
        return pl.when(known).then(pick(args))
    if name == "cat":
        return pl.concat_str(args)
    if name == "strlen":
        return args[0].str.len_chars().cast(pl.Int64)
    if name == "substr":
        return _substr(*args)
    if name == "bnot":
        return ~args[0]
    if name == "lnot":
        return (args[0] == 0).cast(pl.Int64)
    raise ValueError(f"unknown functor {name}")


def _range_step(args: list[pl.Expr]) -> pl.Expr:
    lo, hi = args[0], args[1]
    return args[2] if len(args) == 3 else pl.when(lo <= hi).then(1).otherwise(-1)


def range_counts(args: list[pl.Expr]) -> pl.Expr:
    """Return how many values range(from, to[, step]) makes per row (Soufflé: `to` is
    excluded, the step is 1 or -1 by direction, a zero step gives `from` once)."""
    lo, hi, step = args[0], args[1], _range_step(args)
    return (pl.when(step > 0).then((hi - lo + step - 1) // step)
            .when(step < 0).then((lo - hi - step - 1) // -step)
            .otherwise((lo != hi).cast(pl.Int64))).clip(lower_bound=0)


def range_rows(df: pl.DataFrame, name: str, args: list[pl.Expr]) -> pl.DataFrame:
    """Return df with a row per value of range(from, to[, step]) in column `name`."""
    lo, step = args[0], _range_step(args)
    return (df.with_columns(pl.int_ranges(0, range_counts(args)).alias("_k"))
            .explode("_k")
            .with_columns((lo + pl.col("_k") * step).alias(name))
            .drop("_k").drop_nulls(name))


def _within_max_symbol(symbols: pl.Series, line: str) -> pl.Series:
    """Return the symbols; SymbolLimit(line) if one is longer than MAX_SYMBOL characters
    (its bytes, known without a scan, bound its characters from above)."""
    if (symbols.str.len_bytes().max() or 0) > functors.MAX_SYMBOL and \
            (symbols.str.len_chars().max() or 0) > functors.MAX_SYMBOL:
        raise SymbolLimit(line)
    return symbols


class PolarsOps(Ops):
    """rules.Ops over Polars frames and expressions, with exact row counts for join order."""

    __slots__ = ("frames", "limit")

    def __init__(self, frames: Mapping[int, pl.DataFrame], limit: Limit | None = None) -> None:
        self.frames = frames
        self.limit = limit if limit is not None else UPDATING.get()

    def lit(self, value, kind):
        return literal(value, kind)

    def col(self, name):
        return pl.col(name)

    def arith(self, op, left, right, kind):
        if op == "^":
            dtype = POLARS_TYPES[kind]
            return by_rows(partial(functors.power, kind=kind), [left.cast(dtype),
                                                                right.cast(dtype)], dtype)
        if op in functors.INTEGRAL_OPS:
            return _integral_op(op, left, right, kind)
        if kind == "unsigned":
            return _unsigned_op(op, left, right)
        return _float_op(op, left, right) if kind == "float" else _checked_int(op, left, right)

    def call(self, name, args, kinds, kind):
        return functor(name, args, kinds, kind)

    def bounded(self, value, call):
        return value.map_batches(partial(_within_max_symbol, line=symbol_limit(call)),
                                 return_dtype=pl.String)

    def test(self, op, left, right):
        if op == "contains":
            return right.str.contains(left, literal=True)
        return _matched(left, right)

    def generate(self, df, name, args, kind):
        if kind == "float":  # accumulated rounding: tasks/functors.py's loop, as in Spark
            values = by_rows(functors.float_range, args, pl.List(pl.Float64))
            return df.with_columns(values.alias(name)).explode(name).drop_nulls(name)
        return range_rows(df, name, args)

    def values(self, df, args, kind):
        counts = by_rows(functors.range_count, args, pl.Int64) if kind == "float" \
            else range_counts(args)
        return int(df.select(counts.sum()).item() or 0)

    def numbered(self, df, cols, name):
        rows = df.unique(subset=cols).sort(cols) if cols else df.head(1)
        return rows.with_row_index(name).with_columns(pl.col(name).cast(pl.Int64))

    def order_key(self, value):
        return value ^ pl.lit(_INT_MIN, pl.Int64)

    def cast(self, expr, primitive):
        return expr.cast(POLARS_TYPES[primitive])

    def unit(self):
        return pl.DataFrame({"_unit": [True]})

    def size(self, pos):
        return self.frames[pos].height

    def filter(self, df, cond):
        return df.filter(cond)

    def select(self, df, named):
        # with_columns gives a constant one value per row; select alone would give one row
        # whatever the body's height (p(1) :- b(x). derived from an empty b).
        return df.with_columns([expr.alias(name) for name, expr in named]).select(
            [name for name, _ in named])

    def with_columns(self, df, named):
        return df.with_columns([expr.alias(name) for name, expr in named])

    def drop(self, df, names):
        return df.drop(names) if names else df

    def join(self, cur, adf, on, pos):
        return cur.join(near(adf, cur, on), on=on, how="inner")

    def cross(self, cur, adf, pos):
        return cur.join(adf, how="cross")

    def exists(self, cur, adf, present):
        return cur if (adf.height > 0) == present else cur.clear()

    def anti(self, cur, adf, on):
        return cur.join(near(adf, cur, on), on=on, how="anti")

    def not_null(self, df, names):
        return df.drop_nulls(names)

    def nullary_head(self, body):
        return pl.DataFrame({"c0": [True] if body.height else []}, schema={"c0": pl.Boolean})

    def aggregate(self, df, keys, kind, out, primitive):
        v = pl.col(rules.VALUE)
        if kind == "count":
            aggs = [pl.len().cast(pl.Int64).alias(out)]
        elif kind == "sum" and primitive == "unsigned":  # wraps modulo 2^64, as Soufflé's
            aggs = [v.sum().alias(out)]
        elif kind in ("min", "max") and primitive == "unsigned":
            aggs = [_held(_unsigned(v).min() if kind == "min" else _unsigned(v).max()).alias(out)]
        elif kind == "sum" and primitive != "float":
            # Polars wraps an Int64 sum around; a float sum tells a wrapped one (off by a
            # multiple of 2^64) from the exact one, whose error is far below 2^62.
            aggs = [v.sum().alias(out), v.cast(pl.Float64).sum().alias("_approx")]
        elif kind == "sum":
            aggs = [v.sum().alias(out)]
        elif kind == "mean":
            aggs = [v.cast(pl.Float64).mean().alias(out)]
        else:
            aggs = [(v.min() if kind == "min" else v.max()).alias(out)]
        res = df.group_by(keys, maintain_order=True).agg(aggs) if keys else df.select(aggs)
        if "_approx" in res.columns:
            wrapped = (pl.col("_approx") - pl.col(out).cast(pl.Float64)).abs() > 2.0**62
            res = res.with_columns(pl.when(~wrapped).then(pl.col(out)).alias(out)) \
                .drop("_approx")
        return res.with_columns(pl.col(out).cast(POLARS_TYPES[primitive]))


def body_rows(rule: Rule, decls: Mapping[str, Decl], frames: Mapping[int, pl.DataFrame],
              first: int | None = None, limit: Limit | None = None
              ) -> tuple[pl.DataFrame, dict[str, str]]:
    """Return the rows of a rule body (a column per variable) and the variable types; a
    range past `limit` raises TupleLimit before its values are made."""
    return rule_body.body_rows(PolarsOps(frames, limit), rule, decls, frames, first)


def head_rows(body: pl.DataFrame, types: Mapping[str, str], head: Atom,
              decl: Decl) -> pl.DataFrame:
    """Return the head's tuples (c0.. of the declared types) from a body's rows; may repeat."""
    return rules.head_rows(PolarsOps({}), body, types, head, decl)
