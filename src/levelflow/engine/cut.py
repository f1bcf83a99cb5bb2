"""Spark frames materialized: a plan cut by one eager checkpoint, its row count (or other
metrics) observed in that same job; unions of cut pieces, merged when there are many."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# Merge the stable pieces of a relation once there are this many (bounds the union's width).
MERGE_PIECES = 8


def cut(df: DataFrame, checkpoint: str = "local") -> tuple[DataFrame, int]:
    """Return df materialized with its plan cut (local or reliable checkpoint) and its row count.

    The count is observed while the checkpoint job runs, which saves a job per delta.
    """
    from levelflow.engine.sql_text import exprs

    df, seen = cut_observed(df, exprs("count(1) AS `rows`"), checkpoint)
    return df, int(seen["rows"])


def cut_observed(df: DataFrame, metrics: list, checkpoint: str = "local") -> tuple[DataFrame, dict]:
    """Return df materialized with its plan cut, and the aggregate `metrics` (named Columns)
    observed on the JVM side while the one checkpoint job ran."""
    from pyspark.sql import Observation

    seen = Observation()
    df = df.observe(seen, *metrics)
    df = df.checkpoint(eager=True) if checkpoint == "reliable" else df.localCheckpoint(eager=True)
    return _forget_stats(df), seen.get


def _forget_stats(df: DataFrame) -> DataFrame:
    """Return a checkpointed frame re-rooted on its RDD, without the cut plan's size estimate.

    A checkpoint keeps the optimizer's size estimate of the plan it cut, and an inner join's
    estimate is the product of its sides'. A delta derived by joining two recursive relations
    would inherit the product of their estimates, so the estimate's digits doubled every round;
    Spark computes on those BigInts and rounds grew ~2.5x slower each (mutual recursion,
    ~25 rounds). Re-rooted, the frame has Spark's default estimate; broadcasts come from the
    known row counts (compile.py hints) and AQE's runtime sizes. Left as is where the JVM
    call is unavailable (e.g. Spark Connect).
    """
    from pyspark.sql import DataFrame as _DataFrame

    try:
        jdf = df._jdf
        jspark = df.sparkSession._jsparkSession
        rdd = jdf.queryExecution().toRdd()
        return _DataFrame(jspark.internalCreateDataFrame(rdd, jdf.schema(), False),
                          df.sparkSession)
    except Exception:  # noqa: BLE001 - an optimization only: keep the checkpointed frame
        return df


def union_all(frames: list[DataFrame]) -> DataFrame:
    """Return the union (bag) of a non-empty list of frames with the same columns."""
    out = frames[0]
    for df in frames[1:]:
        out = out.union(df)
    return out


def merge_pieces(df: DataFrame) -> DataFrame:
    """Return a union of cut pieces copied into one cut piece of a few partitions.

    Many small pieces cost a task each in every later scan or join; one merged piece does not.
    """
    parts = max(int(df.sparkSession.conf.get("spark.sql.shuffle.partitions", "2")), 1)
    return cut(df.coalesce(parts))[0]
