"""Record and ADT columns of DataFrames and Arrow tables, checked against their types.

A DataFrame holds a record or ADT value as levelflow gives it out (relations, `IO=parquet`,
tables): its JSON text, `[1,"a"]`, `null`, `["Num",1]` (tasks/record_values.py). Each
distinct value of a column is checked once, field by field and nested, and written
canonically (`[1, "a"]` becomes `[1,"a"]`, 2 in a float field 2.0) so that equal values are
equal symbols; the first bad one is one InputError line naming the relation and the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.record_facts import field_error
from levelflow.tasks.record_values import Types

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from levelflow.tasks.ast import Decl


def record_positions(decl: Decl) -> list[int]:
    """Return the attribute positions holding records or ADTs."""
    return [i for i, shape in enumerate(decl.shapes) if shape]


def canonical_values(decl: Decl, i: int, texts: list[str], what: str, error) -> list[str]:
    """Return the canonical text of each of attribute i's distinct `texts`; `error` (the
    caller's exception class) naming `what` and the field at the first bad one."""
    types = Types(decl.record_types)
    out = []
    for text in texts:
        try:
            out.append(types.canonical(text, decl.shapes[i]))
        except ValueError as e:
            raise error(f"{what}: error: {field_error(decl, i, text, e.args[0])}") from None
    return out


def arrow_records(decl: Decl, table, what: str, error):
    """Return an Arrow table (columns c0..) with its record columns checked and canonical."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for i in record_positions(decl):
        name = f"c{i}"
        col = table.column(name)
        distinct = pc.unique(col)
        # In order, as frame_records checks them: the same value is the first bad one.
        distinct = distinct.take(pc.sort_indices(distinct))
        texts = distinct.to_pylist()
        canon = canonical_values(decl, i, texts, what, error)
        if canon != texts:
            fixed = pc.take(pa.array(canon, pa.string()), pc.index_in(col, value_set=distinct))
            table = table.set_column(table.schema.get_field_index(name), name, fixed)
    return table


def frame_records(decl: Decl, df: DataFrame, what: str, error) -> DataFrame:
    """Return a conformed DataFrame (c0..) with its record columns checked and canonical: one
    job fetches the distinct values of every record column; only a column holding a value
    not written canonically is rewritten, joined with the values it changes."""
    import pyspark.sql.functions as F

    positions = record_positions(decl)
    if not positions:
        return df
    pairs = F.array(*[F.struct(F.lit(i).alias("i"), F.col(f"c{i}").alias("v"))
                      for i in positions])
    found = df.select(F.explode(pairs).alias("p")).select("p.i", "p.v").distinct().toArrow()
    columns = found.column("i").to_pylist()
    values = found.column("v").to_pylist()
    spark = df.sparkSession
    for i in positions:
        texts = sorted(v for c, v in zip(columns, values, strict=True) if c == i)
        canon = canonical_values(decl, i, texts, what, error)
        changed = [(t, c) for t, c in zip(texts, canon, strict=True) if t != c]
        if not changed:
            continue
        table = spark.createDataFrame(changed, "raw string, canon string")
        col = f"c{i}"
        df = df.join(F.broadcast(table), df[col] == table["raw"], "left") \
            .withColumn(col, F.coalesce(F.col("canon"), F.col(col))).drop("raw", "canon")
    return df
