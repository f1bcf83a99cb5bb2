"""Distinct rows the driver holds, shipped to Spark as Arrow, and known distinct.

createDataFrame of an Arrow table streams its batches to the JVM once, no row passing through
Python objects; but every scan of such a frame converts its rows anew on the JVM side (a 3M-row
table: 4.7-6 s a scan, where Spark's Parquet reader takes 0.3 s). So the frame is built only
where a plan reads it in Spark (the global plan's SQL), and then cut once; a task run in Python
workers gets the table itself (driver_rows.driver_table; in_spark.united_sources ships it as
Arrow IPC pieces). Spark makes one partition of every 10,000 rows (its Arrow batch size), so a
built frame is coalesced to the session's parallelism: a 10M-row input would otherwise cost
every later job a thousand tasks. Spark keeps no note that rows are distinct; this module does,
so that a plan about to dedup such a frame alone skips the shuffle (`needs_distinct`).
Changes: the weak set of frames known distinct.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from levelflow.engine import io_meter
from levelflow.engine.types import empty_relation, relation_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from levelflow.tasks.ast import Decl

_distinct: weakref.WeakSet = weakref.WeakSet()


def distinct_frame(spark: SparkSession, decl: Decl, table: pa.Table) -> DataFrame:
    """Return a DataFrame (c0..) of an Arrow table of distinct rows with the relation's columns,
    built (shipped) on first use and marked distinct; the table kept beside it."""
    from levelflow.engine.incremental.backends.driver_rows import shipped_later

    if table.num_rows == 0:
        return empty_relation(spark, decl)
    table = table.combine_chunks()  # one chunk: PySpark drops every batch after an empty one

    def ship():
        from levelflow.engine.cut import cut

        with io_meter.timed("shipping"):
            df = spark.createDataFrame(table, relation_schema(decl))
            # Cut once: every scan of the created frame would convert its rows again.
            df = cut(df.coalesce(max(spark.sparkContext.defaultParallelism, 1)))[0]
        _distinct.add(df)
        return df

    lazy = shipped_later(table, ship)
    _distinct.add(lazy)
    return lazy


def needs_distinct(frames: list) -> bool:
    """Return whether the union of `frames` may hold a row twice (False for one frame shipped
    by distinct_frame)."""
    return not (len(frames) == 1 and frames[0] in _distinct)
