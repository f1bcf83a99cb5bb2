"""Joins of Spark DataFrames that broadcast the small side instead of shuffling the big one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.compile import BROADCAST_ROWS
from levelflow.engine.evaluate import cut

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def bcast_small(df: DataFrame, rows: int) -> DataFrame:
    """Return df with a broadcast hint when it is small enough to ship to every task.

    On a delta atom the hint survives the atom's filter/select, so the join with a big
    relation ships the delta instead of shuffling the big side.
    """
    import pyspark.sql.functions as F

    return F.broadcast(df) if rows <= BROADCAST_ROWS else df


def semi_join_small(cand: DataFrame, other: DataFrame, other_rows: int, cols) -> DataFrame:
    """Return the (distinct) candidates that are in `other`, without shuffling a big `other`."""
    import pyspark.sql.functions as F

    if other_rows <= BROADCAST_ROWS:
        return cand.join(F.broadcast(other), cols, "left_semi")
    cand, rows = cut(cand)
    if rows <= BROADCAST_ROWS:  # scan the big side once against the few candidates
        return other.join(F.broadcast(cand), cols, "left_semi")
    return cand.join(other, cols, "left_semi")


def anti_join_small(cand: DataFrame, other: DataFrame, other_rows: int, cols) -> DataFrame:
    """Return the (distinct) candidates not in `other`, without shuffling a big `other`."""
    import pyspark.sql.functions as F

    if other_rows <= BROADCAST_ROWS:
        return cand.join(F.broadcast(other), cols, "left_anti")
    cand, rows = cut(cand)
    if rows <= BROADCAST_ROWS:
        hits = other.join(F.broadcast(cand), cols, "left_semi")
        return cand.join(F.broadcast(hits), cols, "left_anti")
    return cand.join(other, cols, "left_anti")
