"""One Spark job over a task's shares kept on the executors, whatever the strategy: packed
inputs through `mapInArrow`, or a direct job (an RDD job carrying rows the driver holds in its
closure and bringing the output back as Arrow); run again with the state shipped when a share
missed it. Also what both strategies' jobs share: where a task's state lives (`Held`), the
packed sources and the `Spec` every share is told (`share_spec`). dred_job.py and
counting_job.py say what goes in and what comes back."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

from levelflow.engine.evaluate import cast_fact, cut_observed, fact_rows
from levelflow.engine.incremental.backends.driver_rows import (
    rows_of,
)
from levelflow.engine.incremental.backends.spark_joins import check_cancel
from levelflow.engine.incremental.backends.worker.dred_share import Spec
from levelflow.engine.incremental.strategies.dred_polars import RECOMPUTE_ROWS
from levelflow.engine.incremental.versions import TaskContext
from levelflow.engine.plans import resident
from levelflow.engine.plans.in_spark import pack_inputs
from levelflow.engine.sql_text import col as sql_col
from levelflow.engine.sql_text import count_where, exprs, quoted

if TYPE_CHECKING:
    from levelflow.tasks.tasks import Task

# Input rows a direct epoch carries in its job at most (beyond, they are read from Spark).
DIRECT_ROWS = 50_000

def run_job(ctx: TaskContext, spec, frames, partition, schema, observed):
    """Return (checkpointed output, observed counts) after one Spark job: the packed
    `frames` through `partition(spec, batches)`, observed as `observed(sql_text.col)` says."""

    def run(batches):
        return partition(spec, batches)

    out = pack_inputs(ctx.spark, spec, frames).mapInArrow(run, schema)
    return cut_observed(out, exprs(*[  # SQL text: one JVM call per aggregate
        count_where(cond, name) if kind == "rows" else
        f"max(CASE WHEN {cond} THEN _it END) AS {quoted(name)}"
        for name, cond, kind in observed(sql_col)]))


def metrics(observed) -> list:
    """Return the aggregates of `observed(pl.col)` in Polars (run_job has Spark's)."""
    col = pl.col
    return [(cond.sum() if kind == "rows" else col("_it").filter(cond).max()).alias(name)
            for name, cond, kind in observed(col)]


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
    return _packed(tables).write_ipc_stream(None).getvalue()


def driver_input(spark, spec, frames) -> pl.DataFrame:
    """Return the packed input of direct_input as a frame, the frames' rows brought to the
    driver in one Spark job when it does not hold them all."""
    tables = [rows_of(df) for df in frames]
    if all(t is not None for t in tables):
        return _packed(tables)
    return pl.from_arrow(pack_inputs(spark, spec, frames).toArrow())


def _packed(tables: list) -> pl.DataFrame:
    """Return Arrow tables packed as one frame (`_src`, `s<src>_<c>`)."""
    sources = [pl.from_arrow(t).select(pl.lit(s, pl.Int32).alias("_src"),
                                       *[pl.col(c).alias(f"s{s}_{c}") for c in t.column_names])
               for s, t in enumerate(tables)]
    packed = pl.concat(sources, how="diagonal") if sources else \
        pl.DataFrame(schema={"_src": pl.Int32})
    return packed


def run_direct(ctx: TaskContext, spec, packed: bytes, share_rows, observed):
    """Return (every share's output rows, observed counts) after one Spark job running
    `share_rows(spec, packed, share)` per share, input and output carried with the job."""
    sc = ctx.spark.sparkContext
    # On one machine a task claims a share its Python worker holds (resident.claim); on a
    # cluster the executors share no directory to claim in: task i works on share i.
    job = f"{spec.new_token[:10]}-{uuid.uuid4().hex[:8]}" \
        if spec.parts > 1 and sc.master.startswith("local") else None

    def run(task, empty):
        from pyspark import TaskContext as SparkTask

        for _ in empty:  # read to its end, or the Python worker is not reused (SPARK-26549)
            pass
        share = task if job is None else resident.claim(
            spec.lineage, spec.old_token, job, spec.parts, task, SparkTask.get().attemptNumber())
        yield share_rows(spec, packed, share)

    shares = empty_partitions(sc, spec.parts).mapPartitionsWithIndex(run).collect()
    out = pl.concat([pl.read_ipc_stream(b) for b in shares])
    return out, out.select(metrics(observed)).row(0, named=True)


_empty: tuple = (None, {})  # (SparkContext, parts -> an RDD of that many empty partitions)


def empty_partitions(sc, parts: int):
    """Return an RDD of `parts` empty partitions, made once per SparkContext: making one
    writes a file that the JVM reads (three py4j calls and a few ms, every direct epoch)."""
    global _empty
    if _empty[0] is not sc:
        _empty = (sc, {})
    rdds = _empty[1]
    if parts not in rdds:
        rdds[parts] = sc.parallelize([], parts)
    return rdds[parts]


def run_in_driver(spec, packed: pl.DataFrame, share_frame, observed):
    """Return (the one share's output rows, observed counts) of `share_frame(spec, packed)`
    run here, in the driver's process: no Spark job, nothing serialized. The share's state
    stays in this process's memory (resident.held_here)."""
    with resident.held_here():
        out = share_frame(spec, packed)
    return out, out.select(metrics(observed)).row(0, named=True)


@dataclass(frozen=True, slots=True)
class Held:
    """Where a task's state lives on the executors or in the driver (lineage, version token,
    shares), and its Spark-side copy per relation."""

    lineage: str
    token: str
    parts: int
    logs: dict = field(default_factory=dict)  # relation -> Log
    in_driver: bool = False  # the one share lives in the driver's process, not an executor


def packed_sources(ctx: TaskContext, task: Task, lower: tuple[str, str] | None,
                   facts: tuple[str, str] | None) -> tuple[list, list]:
    """Return the (relation, kind) of each packed source and its frame: each lower
    relation's `lower` (kind, "old" or "new": which version) and net change
    (plus, minus), each own relation's base facts' `facts` version and change (fplus, fminus)."""
    specs, frames = [], []

    def add(ver, n: str, picked, kinds, whole: bool) -> None:
        version = [] if picked is None else [
            (picked[0], getattr(ver, picked[1]), whole or getattr(ver, f"{picked[1]}_rows"))]
        for kind, df, rows in (*version, (kinds[0], ver.plus, ver.plus_rows),
                               (kinds[1], ver.minus, ver.minus_rows)):
            if rows:
                specs.append((n, kind))
                frames.append(df)

    for n in task.reads_from:  # a worker reads every lower relation: shipped even empty
        add(ctx.versions[n], n, lower, ("plus", "minus"), True)
    for n in task.relations:  # shipped even empty too: a task reading no lower relation
        if n in ctx.base:      # is told its state was shipped by them (counting_share._entry)
            add(ctx.base[n], n, facts, ("fplus", "fminus"), True)
    return specs, frames


def share_spec(ctx: TaskContext, task: Task, plan, held: Held | None, parts: int, sources
               ) -> Spec:
    """Return what every share of a task's epoch is told: its rules, relations, packed
    sources, facts, key and the version tokens (the lineage kept when the shares are)."""
    decls = {n: ctx.decls[n] for n in set(task.relations) | set(task.reads_from)}
    facts = {}
    for n in task.relations:
        rows = fact_rows(task.rules, n)
        if rows:
            facts[n] = [cast_fact(r, decls[n].types) for r in rows]
    same = held is not None and held.parts == parts
    return Spec(rules=tuple(r for r in task.rules if r.body), names=task.relations,
                decls=decls, sources=tuple(sources), facts=facts,
                key=plan.key if parts > 1 else None, parts=parts,
                lineage=held.lineage if same else uuid.uuid4().hex[:16],
                old_token=held.token if same else None,
                new_token=next_token(held.token if same else None),
                recompute_rows=RECOMPUTE_ROWS)


def next_token(token: str | None) -> str:
    """Return the next version token: a sequence number (which file is newer), then noise."""
    seq = int(token[:10]) + 1 if token else 0
    return f"{seq:010d}{uuid.uuid4().hex[:6]}"
