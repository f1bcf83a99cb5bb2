"""A relation's change from the tuples added and removed that the driver holds.

Aggregate and subsumptive tasks compute their change in the driver (Polars); the Change they
pass on keeps those rows beside their DataFrames, so a counted task reading them may sum its
terms in the driver too (driver_rows.py).
"""

from __future__ import annotations

import polars as pl

from levelflow.engine.evaluate import MERGE_PIECES, RANK, merge_pieces
from levelflow.engine.incremental.backends.driver_rows import arrow_of, frame_of_table
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
            cols) -> Change:
    """Return the Change from the tuples added and removed, held in the driver: kept beside
    their DataFrames, so that a counted task reading them may sum its terms in the driver."""
    import pyspark.sql.functions as F

    if not plus.height and not minus.height:
        return Change(None, rows=old.old_rows, pieces=old.pieces, top=0)
    schema = relation_schema(ctx.decls[name])
    spark = ctx.spark
    plus_df = frame_of_table(spark, arrow_of(plus), schema) if plus.height else None
    minus_df = frame_of_table(spark, arrow_of(minus), schema) if minus.height else None
    ranked = ctx.old_ranked[name]
    if minus.height:  # a filter, not a join: no broadcast job
        ranked = ranked.filter(~among(cols, minus.rows()))
    rank = F.lit(0).cast(ranked.schema[RANK].dataType)
    added = plus_df.withColumn(RANK, rank) if plus_df is not None else None
    if added is not None:
        ranked = ranked.unionByName(added)
    pieces = old.pieces + 1
    if pieces > MERGE_PIECES:
        ranked, pieces = merge_pieces(ranked), 1
    return Change(ranked, plus_df, plus.height, minus_df, minus.height,
                  old.old_rows + plus.height - minus.height, pieces=pieces, top=0,
                  stored=(minus_df, added))
