"""One Spark job over a task's shares kept on the executors, whatever the strategy: packed
inputs through `mapInArrow`, or a direct job (an RDD job carrying rows the driver holds in its
closure and bringing the output back as Arrow); run again with the state shipped when a share
missed it. dred_job.py and counting_job.py say what goes in and what comes back."""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING

import polars as pl

from levelflow.engine.evaluate import cut_observed
from levelflow.engine.incremental.backends.driver_rows import (
    rows_of,
)
from levelflow.engine.incremental.backends.spark_joins import check_cancel
from levelflow.engine.incremental.versions import TaskContext
from levelflow.engine.plans import resident
from levelflow.engine.plans.in_spark import pack_inputs

if TYPE_CHECKING:
    from levelflow.tasks.tasks import Task

# Input rows a direct epoch carries in its job at most (beyond, they are read from Spark).
DIRECT_ROWS = 50_000

def run_job(ctx: TaskContext, spec, frames, partition, schema, observed):
    """Return (checkpointed output, observed counts) after one Spark job: the packed
    `frames` through `partition(spec, batches)`, observed as `observed(F.col)` says."""
    import pyspark.sql.functions as F

    def run(batches):
        return partition(spec, batches)

    out = pack_inputs(ctx.spark, spec, frames).mapInArrow(run, schema)
    return cut_observed(out, metrics(F, F.col, observed))


def metrics(lib, col, observed) -> list:
    """Return the aggregates of `observed(col)` in Spark (lib F) or Polars (lib pl)."""
    out = []
    for name, cond, kind in observed(col):
        if lib is pl:
            out.append((cond.sum() if kind == "rows" else col("_it").filter(cond).max())
                       .alias(name))
        else:
            out.append((lib.sum(lib.when(cond, 1).otherwise(0)) if kind == "rows"
                        else lib.max(lib.when(cond, col("_it")))).alias(name))
    return out


def run_or_ship(ctx: TaskContext, task: Task, spec, frames, sources, runs, cancel):
    """Return (the epoch's Spec, output, observed counts): run by `runs[0]` where the state
    lives, then by `runs[1]` with the state shipped (`sources(ctx, task, ship=True)`) when a
    share missed it (or no executor has a new lineage's)."""
    if spec.old_token is None:
        out, seen = None, {"misses": 1}
    else:
        out, seen = runs[0](ctx, spec, frames)
    if seen["misses"]:
        check_cancel(cancel)
        specs, frames = sources(ctx, task, ship=True)
        spec = dataclasses.replace(spec, sources=tuple(specs))
        out, seen = runs[1](ctx, spec, frames)
    return spec, out, seen


def direct_input(frames) -> bytes | None:
    """Return the packed input (`_src`, `s<src>_<c>`) as an Arrow IPC stream when every frame
    is rows the driver holds and they are few, else None."""
    tables = [rows_of(df) for df in frames]
    if any(t is None for t in tables) or sum(t.num_rows for t in tables) > DIRECT_ROWS:
        return None
    sources = [pl.from_arrow(t).select(pl.lit(s, pl.Int32).alias("_src"),
                                       *[pl.col(c).alias(f"s{s}_{c}") for c in t.column_names])
               for s, t in enumerate(tables)]
    packed = pl.concat(sources, how="diagonal") if sources else \
        pl.DataFrame(schema={"_src": pl.Int32})
    return packed.write_ipc_stream(None).getvalue()


def run_direct(ctx: TaskContext, spec, packed: bytes, share_rows, observed):
    """Return (every share's output rows, observed counts) after one Spark job running
    `share_rows(spec, packed, share)` per share, input and output carried with the job."""
    sc = ctx.spark.sparkContext
    # On one machine a task claims a share its Python worker holds (resident.claim); on a
    # cluster the executors share no directory to claim in: task i works on share i.
    job = f"{spec.new_token[:10]}-{uuid.uuid4().hex[:8]}" \
        if spec.parts > 1 and sc.master.startswith("local") else None

    def run(task, _):
        from pyspark import TaskContext as SparkTask

        share = task if job is None else resident.claim(
            spec.lineage, spec.old_token, job, spec.parts, task, SparkTask.get().attemptNumber())
        yield share_rows(spec, packed, share)

    shares = sc.parallelize(range(spec.parts), spec.parts).mapPartitionsWithIndex(run).collect()
    out = pl.concat([pl.read_ipc_stream(b) for b in shares])
    return out, out.select(metrics(pl, pl.col, observed)).row(0, named=True)
