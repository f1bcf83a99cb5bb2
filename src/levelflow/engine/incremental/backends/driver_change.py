"""A relation's change from the tuples added and removed that the driver holds.

Aggregate and subsumptive tasks compute their change in the driver (Polars); the Change they
pass on keeps those rows beside their DataFrames, so a counted task reading them may sum its
terms in the driver too (driver_rows.py).
"""

from __future__ import annotations

import polars as pl

from levelflow.engine.evaluate import MERGE_PIECES, RANK, merge_pieces
from levelflow.engine.incremental.backends.driver_rows import (
    LazyFrame,
    arrow_of,
    frame_of_table,
    spark_frame,
)
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.types import relation_schema


def among(cols: list[str], keys: list[tuple]):
    """Return the condition "the columns' values are one of `keys`" (a filter: no join, so
    no broadcast job)."""
    import pyspark.sql.functions as F

    if len(cols) == 1:
        return F.col(cols[0]).isin([k[0] for k in keys])
    return F.struct(*cols).isin([F.struct(*[F.lit(v).alias(c) for v, c in zip(k, cols,
                                                                            strict=True)])
                                 for k in keys])


def held_change(ctx: TaskContext, name: str, old, plus: pl.DataFrame, minus: pl.DataFrame,
                cols, tuples: pl.DataFrame | None = None) -> Change:
    """Return the Change from the tuples added and removed, held in the driver: kept beside
    their DataFrames, so that a counted task reading them may sum its terms in the driver.
    `tuples`: the relation's new tuples, when the driver holds them all (its state)."""
    from pyspark.sql.types import LongType, StructField, StructType

    if not plus.height and not minus.height:
        return Change(None, rows=old.old_rows, pieces=old.pieces, top=0)
    schema = relation_schema(ctx.decls[name])
    ranked_schema = StructType([*schema.fields, StructField(RANK, LongType())])
    spark = ctx.spark
    plus_df = frame_of_table(spark, arrow_of(plus), schema) if plus.height else None
    minus_df = frame_of_table(spark, arrow_of(minus), schema) if minus.height else None
    added = frame_of_table(spark, arrow_of(_ranked(plus)), ranked_schema) \
        if plus.height else None
    rows = old.old_rows + plus.height - minus.height
    stored = (minus_df, added)
    if tuples is not None:
        # Built from the driver's tuples on first use: no plan over the old version to grow,
        # no merge job, and no JVM call at all in an epoch that nobody reads it in.
        whole = LazyFrame(lambda: spark_frame(spark, arrow_of(_ranked(tuples)), ranked_schema))
        return Change(whole, plus_df, plus.height, minus_df, minus.height, rows, top=0,
                      stored=stored)
    ranked = ctx.old_ranked[name]
    if minus.height:  # a filter, not a join: no broadcast job
        ranked = ranked.filter(~among(cols, minus.rows()))
    if added is not None:
        ranked = ranked.unionByName(added)
    pieces = old.pieces + 1
    if pieces > MERGE_PIECES:
        ranked, pieces = merge_pieces(ranked), 1
    return Change(ranked, plus_df, plus.height, minus_df, minus.height, rows, pieces=pieces,
                  top=0, stored=stored)


def _ranked(tuples: pl.DataFrame) -> pl.DataFrame:
    """Return tuples with the rank every aggregate tuple has (0)."""
    return tuples.with_columns(pl.lit(0, pl.Int64).alias(RANK))
