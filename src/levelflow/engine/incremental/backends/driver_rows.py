"""DataFrames of rows the driver holds, with those rows kept beside them.

An epoch's small changes start in the driver (the facts inserted and removed) and can come back
to it (an arranged task's direct epoch: dred_job.py). A task whose every input is such rows
ships them to its Spark task inside the job itself: no input plan is built, analysed or read.
The rows are Arrow tables with the relation's columns (c0.., and `_it` where ranked).

Building a DataFrame costs a few JVM round trips and an analysis (5-15 ms each, an epoch asks
for dozens); a LazyFrame builds it when first used, so what no task or query reads is never
built.
"""

from __future__ import annotations

import weakref

import numpy as np
import polars as pl
import pyarrow as pa

from levelflow.engine.plans.columnar import frame_schema
from levelflow.engine.types import relation_rows, relation_schema, rows_frame
from levelflow.tasks.ast import Decl


class _Rows:
    """What a frame was made from in the driver; frame_of_table's also how to make it again.
    `read`: the table is made on first use (`file`: read from a file, frame_of_file)."""

    __slots__ = ("_table", "_read", "file", "schema", "spark")

    def __init__(self, table: pa.Table | None = None, schema=None, spark=None, read=None,
                 file: bool = False):
        self._table, self._read, self.file = table, read, file
        self.schema = schema  # Spark StructType
        self.spark = spark

    @property
    def table(self) -> pa.Table:
        if self._table is None:
            self._table, self._read = self._read(), None
        return self._table


_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # frame -> _Rows
# frame -> the Arrow table of a fact file's distinct rows it ships (spark_ship.distinct_frame)
_SHIPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class LazyFrame:
    """A DataFrame built on first use: attribute access goes to the built frame."""

    __slots__ = ("_make", "_df", "__weakref__")

    def __init__(self, make) -> None:
        self._make, self._df = make, None

    def force(self):
        """Return the DataFrame, built now if it was not yet."""
        if self._df is None:
            self._df = self._make()
            self._make = None
        return self._df

    def __getattr__(self, name: str):
        return getattr(self.force(), name)

    def collect(self) -> list:
        """Return the frame's rows as Spark Rows: those the driver holds, with no Spark job
        (nor a frame built), else the built frame's."""
        made = _ROWS.get(self)
        if made is None or self._df is not None:
            return self.force().collect()
        return _spark_rows(made)

    def count(self) -> int:
        """Return the frame's row count: the driver's rows', else the built frame's."""
        made = _ROWS.get(self)
        if made is None or self._df is not None:
            return self.force().count()
        return held_rows(self)


def _spark_rows(made: _Rows) -> list:
    """Return held rows as DataFrame.collect() returns them: Rows named as the schema's
    columns, values converted as Spark converts its types (an int64 to int, ...)."""
    from pyspark.sql.types import _create_row  # what collect() makes its Rows with

    from levelflow.engine.types import arrow_schema_of_spark

    table = made.table
    if made.schema is not None:
        table = table.select(made.schema.fieldNames()).cast(arrow_schema_of_spark(made.schema))
    names = table.column_names
    columns = (c.to_pylist() for c in table.columns)
    return [_create_row(names, values) for values in zip(*columns, strict=True)]


def shipped_later(table: pa.Table, ship) -> LazyFrame:
    """Return a frame `ship()` builds on first use, `table` kept beside it (driver_table)."""
    df = LazyFrame(ship)
    _SHIPPED[df] = table
    return df


def driver_table(df) -> pa.Table | None:
    """Return the Arrow table a shipped_later frame stands for, or None for any other frame."""
    return _SHIPPED.get(df)


def rows_of(df) -> pa.Table | None:
    """Return the rows a frame was made from in the driver, or None (a Spark-side frame)."""
    made = None if df is None else _ROWS.get(df)
    return None if made is None else made.table


def held_table(df) -> pa.Table | None:
    """Return the rows the driver holds behind a frame (rows_of's, else a shipped fact file's
    table), or None for a Spark-side frame."""
    table = rows_of(df)
    return table if table is not None else driver_table(df)


def arrow_rows(df) -> pa.Table:
    """Return a frame's rows as Arrow: those the driver holds, else one Spark job's."""
    table = held_table(df)
    return table if table is not None else df.toArrow()


def union_of_rows(a, b, limit: int):
    """Return the union of two frames made by frame_of_table with one schema, as one such frame
    (one table, not a union plan), or None: not both such frames, or over `limit` rows."""
    made_a, made_b = _ROWS.get(a), _ROWS.get(b)
    if made_a is None or made_b is None or made_a.spark is None or \
            (made_a.schema, made_a.spark) != (made_b.schema, made_b.spark) or \
            made_a.table.num_rows + made_b.table.num_rows > limit:
        return None
    return frame_of_table(made_a.spark, pa.concat_tables([made_a.table, made_b.table]),
                          made_a.schema)


class _Then:
    """A table read later: a held table with (added, removed) steps applied in order."""

    __slots__ = ("base", "steps", "rows")

    def __init__(self, base: _Rows, steps: tuple, rows: int) -> None:
        self.base, self.steps, self.rows = base, steps, rows

    def __call__(self) -> pa.Table:
        """Return the base with the steps' net change: the steps folded over their few rows
        first (a row removed, then added again, cancels), then one append and one removal."""
        from levelflow.engine.plans.few_rows import without

        out = pl.from_arrow(self.base.table)
        cols = out.columns
        added = gone = out.clear()  # rows not in the base, base rows removed
        for step_added, step_gone in self.steps:
            if step_added is not None:
                new = pl.from_arrow(step_added).select(cols)
                back = new.join(gone, on=cols, how="semi", nulls_equal=True)
                gone, new = without(gone, back), without(new, back)
                added = pl.concat([added, new])
            if step_gone is not None:
                new = pl.from_arrow(step_gone).select(cols)
                mine = new.join(added, on=cols, how="semi", nulls_equal=True)
                added, new = without(added, mine), without(new, mine)
                gone = pl.concat([gone, new])
        return arrow_of(without(pl.concat([out, added]), gone))


def held_rows(df) -> int | None:
    """Return how many rows the driver holds behind a frame, not reading what is read later
    when the count is known (rows_then's); None for a Spark-side frame."""
    made = None if df is None else _ROWS.get(df)
    if made is None:
        return None
    if made._table is None and isinstance(made._read, _Then):
        return made._read.rows
    return made.table.num_rows


def rows_then(df, added: pa.Table | None, gone: pa.Table | None):
    """Return a frame like `df` (frame_of_table's) of its rows with `added` appended and
    `gone` (rows it holds) taken out, computed when first read: a Spark-side copy that only a
    shipped state or a query reads is not copied each epoch (10-20 ms at 1M rows). None if
    `df`'s rows are not held with a schema."""
    made = _ROWS.get(df)
    if made is None or made.schema is None:
        return None
    steps = ((added, gone),)
    if made._table is None and isinstance(made._read, _Then):  # unread: one more step
        made, steps = made._read.base, made._read.steps + steps
    rows = held_rows(df) + (added.num_rows if added is not None else 0) - \
        (gone.num_rows if gone is not None else 0)
    return _made_later(_Rows(schema=made.schema, spark=made.spark,
                             read=_Then(made, steps, rows)))


def rows_minus(a, b):
    """Return frame a without the rows of frame b, both made by frame_of_table with one schema,
    as such a frame (a itself when they share no row); None where either is not such a frame."""
    made_a, made_b = _ROWS.get(a), _ROWS.get(b)
    if made_a is None or made_b is None or made_a.spark is None or \
            made_a.schema != made_b.schema:
        return None
    left, right = pl.from_arrow(made_a.table), pl.from_arrow(made_b.table)
    kept = left.join(right, on=left.columns, how="anti")
    if kept.height == left.height:
        return a
    return frame_of_table(made_a.spark, arrow_of(kept), made_a.schema)


def arrow_of(df: pl.DataFrame) -> pa.Table:
    """Return a Polars frame as Arrow with the plain types Spark reads (string, not
    large_string)."""
    return df.to_arrow(compat_level=pl.CompatLevel.oldest())


def polars_of(table: pa.Table, decl: Decl) -> pl.DataFrame:
    """Return a relation's driver-held rows as a Polars frame of its columns (c0..) and types."""
    schema = frame_schema(decl)
    return pl.from_arrow(table).select([pl.col(c).cast(t) for c, t in schema.items()])


def frame_of_rows(spark, decl: Decl, rows: list[tuple]):
    """Return rows_frame(rows) built on first use, the rows kept beside it."""
    df = LazyFrame(lambda: rows_frame(spark, decl, rows))
    held = relation_rows(decl, rows)
    _ROWS[df] = _Rows(arrow_of(pl.DataFrame(held, schema=frame_schema(decl), orient="row")),
                      relation_schema(decl), spark)
    return df


def spark_frame(spark, table: pa.Table, schema):
    """Return a DataFrame of an Arrow table's rows, built now.

    PySpark (4.0-4.3 here) drops every record batch after an empty one, so those go first:
    a table concatenated from pieces, or read back from Spark's partitions, may hold one.
    """
    batches = [b for b in table.to_batches() if b.num_rows]
    return spark.createDataFrame(pa.Table.from_batches(batches, table.schema), schema)


def frame_of_table(spark, table: pa.Table, schema):
    """Return a DataFrame of an Arrow table (Spark `schema`) built on first use, the table
    kept beside it."""
    df = LazyFrame(lambda: spark_frame(spark, table, schema))
    _ROWS[df] = _Rows(table, schema, spark)
    return df


def frame_of_file(spark, read, schema):
    """Return frame_of_table of the Arrow table `read()` returns, read only when the rows or
    the frame are first asked for (a stored relation the driver holds, read by pyarrow)."""
    return _made_later(_Rows(schema=schema, spark=spark, read=read, file=True))


def _made_later(rows: _Rows):
    """Return a frame of `rows` (a schema, a table made on first use), built on first use."""
    df = LazyFrame(lambda: spark_frame(rows.spark, rows.table, rows.schema))
    _ROWS[df] = rows
    return df


def held_renamed(df, names: list[str], build):
    """Return `build()`, df with its columns renamed `names`, built on first use, df's rows
    kept beside it under the new names; None where the driver does not hold df's rows."""
    from pyspark.sql.types import StructField, StructType

    made = _ROWS.get(df)
    if made is None:
        return None
    fields = [] if made.schema is None else made.schema.fields[:len(names)]
    schema = None if made.schema is None else StructType(
        [StructField(n, f.dataType, f.nullable) for n, f in zip(names, fields, strict=True)])
    renamed = LazyFrame(build)
    _ROWS[renamed] = _Rows(schema=schema, spark=made.spark, read=lambda: made.table.select(
        list(range(len(names)))).rename_columns(names))
    return renamed


def unread_file(df) -> bool:
    """Return whether `df` is a frame_of_file whose rows were not read yet."""
    made = None if df is None else _ROWS.get(df)
    return made is not None and made._table is None and made.file


def frame_of_held(spark, table: pa.Table, decl: Decl):
    """Return a DataFrame of a relation's rows the driver holds (c0..), built on first use,
    the table kept beside it; nothing of Spark is touched, nor imported, until then."""
    df = LazyFrame(lambda: spark_frame(spark, table, relation_schema(decl)))
    _ROWS[df] = _Rows(table)
    return df


def rows_like(df, table: pa.Table):
    """Return a frame of `table`'s rows with the schema of `df`, a frame over rows the driver
    holds (frame_of_table), kept beside it; None if `df` is not such a frame."""
    made = _ROWS.get(df)
    if made is None or made.schema is None:
        return None
    return frame_of_table(made.spark, table.select(made.schema.fieldNames()), made.schema)


def held_empty(spark, decl: Decl, extra: str | None = None):
    """Return an empty relation (c0.., then a bigint column `extra` if given) as rows the
    driver holds: no JVM call until something reads it on Spark."""
    from pyspark.sql.types import LongType, StructField, StructType

    schema, frame = relation_schema(decl), pl.DataFrame(schema=frame_schema(decl))
    if extra is not None:
        schema = StructType([*schema.fields, StructField(extra, LongType())])
        frame = frame.with_columns(pl.lit(None, pl.Int64).alias(extra))
    return frame_of_table(spark, arrow_of(frame), schema)


def held_columns(df, columns: list[str]):
    """Return a frame's `columns` only: rows the driver holds stay held (no plan), else a
    select built on first use."""
    from pyspark.sql.types import StructType

    made = _ROWS.get(df)
    if made is None or made.schema is None:
        return LazyFrame(lambda: df.select(*columns))
    fields = {f.name: f for f in made.schema.fields}
    schema = StructType([fields[c] for c in columns])
    if made._table is None and not made.file:  # made on first use: selected then too
        return _made_later(_Rows(schema=schema, spark=made.spark,
                                 read=lambda: made.table.select(columns)))
    return frame_of_table(made.spark, made.table.select(columns), schema)


def without(df, column: str):
    """Return a frame without `column`: rows the driver holds stay held, else a drop built on
    first use."""
    made = _ROWS.get(df)
    if made is None:
        return LazyFrame(lambda: df.drop(column))
    names = made.schema.fieldNames() if made.schema is not None else made.table.column_names
    return held_columns(df, [c for c in names if c != column])


def with_constant(spark, df, decl: Decl, name: str, value: int):
    """Return a relation's frame (c0..) with a bigint column `name` holding `value`, built on
    first use; rows the driver holds stay held beside it."""
    import pyspark.sql.functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    table = rows_of(df)
    if table is None:
        return LazyFrame(lambda: df.withColumn(name, F.lit(value).cast("bigint")))
    schema = StructType([*relation_schema(decl).fields, StructField(name, LongType())])
    column = pa.array(np.full(table.num_rows, value, np.int64))  # no Python list of n values
    return frame_of_table(spark, table.append_column(name, column), schema)
