"""One Datalog rule as a DataFrame plan: engine/rule_body.py's body over Spark DataFrames.

Spark 4 runs in ANSI mode, where overflow and division by zero raise; here they yield NULL
instead (try_add, try_mod, a guarded `div`) and the row is dropped. Float arithmetic is on
doubles. `^` and conversions from or to text run tasks/functors.py's Python functions in a
UDF, and `match` runs engine/regex_match.py in an Arrow UDF, as the Polars backend runs them,
so both answer alike. Known-small atoms are broadcast; so are the rows joined so far when the
first atom is a few rows (a delta) and the next one is big.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from levelflow.engine.guard import UPDATING, Limit, symbol_limit
from levelflow.engine.regex_match import match_arrays
from levelflow.engine.rule_body import body_rows
from levelflow.engine.rules import (
    VALUE,
    CompileError,
    Ops,
    head_rows,
    rule_heads,
    term_vars,
    var_col,
    where,
)
from levelflow.engine.types import SQL_TYPES
from levelflow.tasks import functors
from levelflow.tasks.ast import BinOp, Const, Decl, Rule, Term

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["BROADCAST_ROWS", "CompileError", "body_frame", "c_div", "c_mod", "ground_value",
           "head_frame", "rule_heads", "term_vars", "var_col"]

# Known-small relations are broadcast to the join instead of shuffling the (bigger) left side.
BROADCAST_ROWS = 20_000
# Row estimate for a relation whose size is unknown: it sorts after every known one.
_UNKNOWN_ROWS = 1 << 62
RANGE_BLOCK = 4096  # values of a range made per array (generate)


def c_div(a: int, b: int) -> int:
    """Return a / b truncated toward zero, as C does."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    """Return a % b with the sign of the dividend, as C does."""
    return a - b * c_div(a, b)


def ground_value(term: Term) -> int | float | str:
    """Return the value of a variable-free term (a fact argument); raise CompileError otherwise."""
    if isinstance(term, Const):
        return term.value
    if isinstance(term, BinOp):
        a, b = ground_value(term.left), ground_value(term.right)
        if isinstance(a, str) or isinstance(b, str):
            raise CompileError(f"{where(term)}: error: arithmetic on a symbol")
        if term.op == "+":
            return a + b
        if term.op == "-":
            return a - b
        if term.op == "*":
            return a * b
        if b == 0:
            raise CompileError(f"{where(term)}: error: division by zero in a fact")
        if isinstance(a, float) or isinstance(b, float):
            return a / b if term.op == "/" else a - b * int(a / b)
        return c_div(a, b) if term.op == "/" else c_mod(a, b)
    raise CompileError(f"{where(term)}: error: a fact must be ground")


class SparkOps(Ops):
    """rules.Ops over Spark DataFrames and Columns."""

    def __init__(self, spark: SparkSession, counts: Mapping[int, int], small_seed: bool,
                 limit: Limit | None = None) -> None:
        import pyspark.sql.functions as F

        from levelflow.engine.session import columns_ready

        columns_ready()  # its columns are built before any frame is touched
        self.F = F
        self.spark = spark
        self.counts = counts
        self.small_seed = small_seed  # the first atom is a few rows: ship them to a big atom
        self.limit = limit if limit is not None else UPDATING.get()

    def lit(self, value, kind):
        return self.F.lit(value).cast(SQL_TYPES.get(kind, "bigint"))

    def col(self, name):
        return self.F.col(name)

    def by_rows(self, fn: Callable, args: list, kind: str):
        """Return `fn` applied row by row in a Python UDF (null for a row with a null
        argument), as columnar.by_rows does in the workers."""
        def run(*row, fn=fn):
            return None if any(v is None for v in row) else fn(*row)

        udf = self.F.udf(run, SQL_TYPES.get(kind, kind), useArrow=True)
        return udf(*args)

    def arith(self, op, left, right, kind):
        F = self.F
        if op == "^":
            typed = [c.cast(SQL_TYPES[kind]) for c in (left, right)]
            return self.by_rows(partial(functors.power, kind=kind), typed, kind)
        if op in functors.INTEGRAL_OPS:
            return self._integral(op, left, right, kind)
        if kind == "unsigned":  # wraps modulo 2^64: Python's exact integers, row by row
            return self.by_rows(partial(functors.unsigned_arith, op), [left, right], kind)
        if op == "+":
            return F.try_add(left, right)
        if op == "-":
            return F.try_subtract(left, right)
        if op == "*":
            return F.try_multiply(left, right)
        if op == "/":
            if kind == "float":
                return F.when(right != 0, left / right)
            # `div` is Spark's integral division (truncating, like C); guarded against zero.
            return F.when(right != 0, F.call_function("div", left, right))
        return F.try_mod(left, right)

    def _integral(self, op, left, right, kind):
        """Return a bitwise, shift or logical operation on bigints (Java masks shifts by 63,
        as Soufflé does; logical ones give 0 or 1; an unsigned's `bshr` shifts zeros in)."""
        F = self.F
        if op == "band":
            return left.bitwiseAND(right)
        if op == "bor":
            return left.bitwiseOR(right)
        if op == "bxor":
            return left.bitwiseXOR(right)
        if op in ("land", "lor", "lxor"):
            x, y = left != 0, right != 0
            return (x & y if op == "land" else x | y if op == "lor" else x != y).cast("bigint")
        if op == "bshr" and kind == "unsigned":
            op = "bshru"
        name = {"bshl": "shiftleft", "bshr": "shiftright", "bshru": "shiftrightunsigned"}[op]
        return F.call_function(name, left, right.bitwiseAND(F.lit(63)).cast("int"))

    def _convert(self, x, source: str, kind: str):
        """Return a conversion functor (to_number, itof, to_string, ...) of x of type source."""
        F = self.F
        if kind == "symbol":
            if source in ("float", "unsigned"):
                return self.by_rows(partial(functors.number_to_text, kind=source), [x], kind)
            return x.cast("string")
        if source == "symbol":
            return self.by_rows(partial(functors.text_to_number, kind=kind), [x], kind)
        if kind == "float":
            if source == "unsigned":  # the bits read as unsigned: past 2^63 - 1, negative held
                return F.when(x < 0, x.cast("double") + 2.0**64).otherwise(x.cast("double"))
            return x.cast("double")
        if source != "float":
            return x
        if kind == "unsigned":  # (-1, 2^64): truncated, held as the int64 of its bits
            ok = ~F.isnan(x) & (x > -1.0) & (x < 2.0**64)
            return F.when(ok & (x < 2.0**63), x.cast("bigint")).when(
                ok, (x - 2.0**64).cast("bigint"))
        return F.when(~F.isnan(x) & (x >= -(2.0**63)) & (x < 2.0**63), x.cast("bigint"))

    def call(self, name, args, kinds, kind):
        F = self.F
        if name.startswith(("#", "@")):  # records, ADTs, user functors (tasks/functors.py)
            return self.by_rows(functors.apply_plain(name), args, kind)
        if name in functors.CASTS:
            return self._convert(args[0], kinds[0], kind)
        if name in ("min", "max"):
            if len(args) == 1:
                return args[0]
            known = args[0].isNotNull()
            for a in args[1:]:
                known = known & a.isNotNull()
            pick = F.least if name == "min" else F.greatest
            if kind == "unsigned":  # picked by the unsigned order of the bits
                return F.when(known, self.order_key(pick(*map(self.order_key, args))))
            return F.when(known, pick(*args))
        if name == "cat":
            return F.concat(*args)
        if name == "strlen":
            return F.char_length(args[0]).cast("bigint")
        if name == "substr":
            s, i, n = args
            size = F.char_length(s).cast("bigint")
            known = s.isNotNull() & i.isNotNull() & n.isNotNull()
            inside = (i >= 0) & (i <= size)
            length = F.when(n < 0, size).otherwise(F.least(n, size))
            cut = F.call_function("substr", s, (i + 1).cast("int"), length.cast("int"))
            return F.when(known & inside, cut).when(known, F.lit(""))
        if name == "bnot":
            return F.bitwise_not(args[0])
        if name == "lnot":
            return (args[0] == 0).cast("bigint")
        raise ValueError(f"unknown functor {name}")

    def bounded(self, value, call):
        F = self.F
        return F.when(F.char_length(value) > functors.MAX_SYMBOL,
                      F.raise_error(F.lit(f"SymbolLimit: {symbol_limit(call)}"))
                      ).otherwise(value)

    def test(self, op, left, right):
        if op == "contains":
            return right.contains(left)
        return self.F.arrow_udf(match_arrays, "boolean")(left, right)

    def _range_counts(self, args: list):
        """Return how many values range(from, to[, step]) makes per row, and its step."""
        F = self.F
        lo, hi = args[0], args[1]
        step = args[2] if len(args) == 3 else F.when(lo <= hi, 1).otherwise(-1).cast("bigint")
        count = (F.when(step > 0, F.call_function("div", hi - lo + step - 1, step))
                 .when(step < 0, F.call_function("div", lo - hi - step - 1, -step))
                 .otherwise((lo != hi).cast("bigint")))
        return count, step

    def generate(self, df, name, args, kind):
        F = self.F
        if kind == "float":  # accumulated rounding: tasks/functors.py's loop, as in Polars
            values = self.by_rows(functors.float_range, args, "array<double>")
            return df.withColumn(name, F.explode(values))
        count, step = self._range_counts(args)
        # In blocks of RANGE_BLOCK: no array holds more than that, or count / RANGE_BLOCK,
        # values (one array of a range's every value runs the JVM out of memory).
        block = F.lit(RANGE_BLOCK).cast("bigint")
        blocks = F.when(count > 0, F.sequence(F.lit(0).cast("bigint"),
                                               F.call_function("div", count - 1, block)))
        start = F.col("_b") * block
        ks = F.sequence(start, F.least(count, start + block) - 1)
        return (df.withColumn("_b", F.explode(blocks)).withColumn("_k", F.explode(ks))
                .withColumn(name, args[0] + F.col("_k") * step).drop("_b", "_k"))

    def values(self, df, args, kind):
        F = self.F
        counts = self.by_rows(functors.range_count, args, "bigint") if kind == "float" \
            else F.greatest(self._range_counts(args)[0], F.lit(0).cast("bigint"))
        return int(df.select(F.sum(counts)).first()[0] or 0)  # one job, before any value

    def numbered(self, df, cols, name):
        from pyspark.sql import Window

        F = self.F
        rows = df.dropDuplicates(cols) if cols else df.limit(1)
        order = Window.orderBy(*(cols or [F.lit(1)]))  # one partition: a number per row
        return rows.withColumn(name, (F.row_number().over(order) - 1).cast("bigint"))

    def order_key(self, value):
        return value.bitwiseXOR(self.F.lit(functors.INT64_MIN))

    def cast(self, expr, primitive):
        return expr.cast(SQL_TYPES[primitive])

    def unit(self):
        return self.spark.range(1).select(self.F.lit(True).alias("_unit"))

    def size(self, pos):
        return self.counts.get(pos, _UNKNOWN_ROWS)

    def filter(self, df, cond):
        return df.filter(cond)

    def select(self, df, named):
        return df.select(*[expr.alias(name) for name, expr in named])

    def with_columns(self, df, named):
        for name, expr in named:
            df = df.withColumn(name, expr)
        return df

    def drop(self, df, names):
        return df.drop(*names) if names else df

    def _hinted(self, cur, adf, pos):
        """Return (cur, adf) with a broadcast hint on the side known to be small."""
        if self.size(pos) <= BROADCAST_ROWS:
            return cur, self.F.broadcast(adf)
        if self.small_seed:  # only the first big atom: after it the rows may be many
            self.small_seed = False
            return self.F.broadcast(cur), adf
        return cur, adf

    def join(self, cur, adf, on, pos):
        cur, adf = self._hinted(cur, adf, pos)
        return cur.join(adf, on=on, how="inner")

    def cross(self, cur, adf, pos):
        cur, adf = self._hinted(cur, adf, pos)
        return cur.crossJoin(adf)

    def exists(self, cur, adf, present):
        return cur.join(adf, how="left_semi" if present else "left_anti")

    def anti(self, cur, adf, on):
        return cur.join(adf, on=on, how="left_anti")

    def not_null(self, df, names):
        for name in names:
            df = df.filter(self.F.col(name).isNotNull())
        return df

    def nullary_head(self, body):
        return body.select(self.F.lit(True).alias("c0")).limit(1)

    def aggregate(self, df, keys, kind, out, primitive):
        F = self.F
        v, rows = F.col(VALUE), F.count(F.lit(1))
        if kind == "count":
            agg = rows
        elif kind == "sum" and primitive == "unsigned":  # modulo 2^64, as Soufflé's sum wraps
            big = "decimal(38,0)"
            two64 = F.lit(str(2**64)).cast(big)  # past a long: a decimal from its digits
            value = F.when(v < 0, v.cast(big) + two64).otherwise(v.cast(big))
            total = F.pmod(F.sum(value), two64)
            agg = F.when(total >= F.lit(str(2**63)).cast(big), total - two64).otherwise(total)
        elif kind in ("min", "max") and primitive == "unsigned":
            key = self.order_key(v)
            agg = self.order_key(F.min(key) if kind == "min" else F.max(key))
        elif kind == "sum":  # try_sum: none on overflow, as an overflowing `+` has none
            total = F.sum(v) if primitive == "float" else F.try_sum(v)
            agg = F.when(rows == 0, F.lit(0).cast(total_type(primitive))).otherwise(total)
        elif kind == "mean":
            agg = F.avg(v.cast("double"))
        else:
            agg = F.min(v) if kind == "min" else F.max(v)
        agg = agg.cast(total_type(primitive)).alias(out)
        return df.groupBy(*keys).agg(agg) if keys else df.agg(agg)


def total_type(primitive: str) -> str:
    """Return the Spark type that stores a primitive's numbers."""
    return "double" if primitive == "float" else "long"


def body_frame(spark: SparkSession, rule: Rule, decls: Mapping[str, Decl],
               frames: Mapping[int, DataFrame], counts: Mapping[int, int] | None = None,
               first: int | None = None, small_seed: bool = False,
               limit: Limit | None = None) -> tuple[DataFrame, dict[str, str]]:
    """Return the rule body's plan (one column per bound variable) and the variable types.

    `frames` maps the body position of every atom (positive or negated) to the DataFrame it
    reads; `counts` maps positions to known row counts; `first` is the atom to start from
    (the recent delta of a semi-naive variant); `small_seed` says that atom has few rows, so the
    rows joined so far are broadcast to the first big atom instead of shuffling it. A range
    past `limit` raises TupleLimit before its values are made (a range over variables is
    counted in one job).
    """
    return body_rows(SparkOps(spark, counts or {}, small_seed, limit), rule, decls, frames,
                     first)


def head_frame(body: DataFrame, types: Mapping[str, str], head, decl: Decl) -> DataFrame:
    """Return the head's tuples (c0.. cast to the declared types) from a body plan; may repeat."""
    return head_rows(SparkOps(body.sparkSession, {}, False), body, types, head, decl)
