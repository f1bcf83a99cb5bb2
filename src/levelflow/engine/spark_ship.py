"""Distinct rows the driver holds, shipped to Spark as Arrow record batches, and known distinct.

createDataFrame of an Arrow table streams its batches to the JVM once, no row passing through
Python objects. Spark makes one partition of every 10,000 rows (its Arrow batch size), so the
frame is coalesced to the session's parallelism: a 10M-row input would otherwise cost every
later job a thousand tasks. Spark keeps no note that rows are distinct; this module does, so
that a plan about to dedup such a frame alone skips the shuffle (`needs_distinct`).
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
    shipped now and marked distinct."""
    if table.num_rows == 0:
        return empty_relation(spark, decl)
    with io_meter.timed("shipping"):
        # One chunk: PySpark drops every batch after an empty one (driver_rows.spark_frame).
        df = spark.createDataFrame(table.combine_chunks(), relation_schema(decl))
        df = df.coalesce(max(spark.sparkContext.defaultParallelism, 1))
    _distinct.add(df)
    return df


def needs_distinct(frames: list) -> bool:
    """Return whether the union of `frames` may hold a row twice (False for one frame shipped
    by distinct_frame)."""
    return not (len(frames) == 1 and frames[0] in _distinct)
