"""A distributed task's epoch as one barrier Spark job over its partitions kept on the executors.

A task the state keeps under the distributed plan (plans/distributed.py; bootstrapped with
`Layout.keep`, so each partition stays on its executor) is updated by one barrier job whose
partitions run dred.py's phases together, exchanging only delta tuples (dist_share.py). The
job carries the lower relations' change in its closure when the driver holds it (few rows),
else reads it from Spark in the barrier stage; either way only the removed and added ranked
tuples come back to the driver. When a partition's copies are missing (the first epoch after
an `open`, a lost worker), the job runs again with the state's tuples and the lower relations
shipped from their Spark-side copies: one more job, which leaves the partitions in place.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TYPE_CHECKING

import polars as pl

from levelflow.engine.evaluate import cast_fact, fact_rows
from levelflow.engine.incremental.backends.spark_joins import check_cancel
from levelflow.engine.incremental.backends.worker.dist_share import (
    DistSpec,
    epoch_direct,
    epoch_partition,
)
from levelflow.engine.incremental.backends.worker.dred_job import (
    Log,
    change_schema,
    observed,
    picked_rows,
    relation_change,
)
from levelflow.engine.incremental.backends.worker.share_job import (
    Held,
    direct_input,
    empty_partitions,
    metrics,
    next_token,
)
from levelflow.engine.incremental.strategies.recompute import with_base_facts
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.plans import exchange
from levelflow.engine.plans.in_spark import united_sources
from levelflow.engine.plans.layout import BASE_FACTS
from levelflow.engine.plans.planner import distributed_routing

if TYPE_CHECKING:
    from levelflow.tasks.tasks import Task

# Every epoch ships the state (the fallback's cost, measured by bench_distributed_epochs).
SHIP_ALWAYS = False


def _sources(ctx: TaskContext, task: Task, ship: bool) -> tuple[list, list]:
    """Return the (relation, kind) of each packed source and its frame: every lower
    relation's change (a stand-in `@base:r`'s: r's base facts'), and with `ship` its new
    version and the task's old ranked tuples."""
    specs, frames = [], []
    lower = [(n, ctx.versions[n]) for n in task.reads_from] + \
        [(BASE_FACTS + n, ctx.base[n]) for n in task.relations if n in ctx.base]
    for name, ver in lower:
        for kind, df, rows in (("plus", ver.plus, ver.plus_rows),
                               ("minus", ver.minus, ver.minus_rows),
                               ("new", ver.new, ship and ver.new_rows)):
            if rows:
                specs.append((name, kind))
                frames.append(df)
    if ship:
        for n in task.relations:
            specs.append((n, "state"))
            frames.append(ctx.old_ranked[n])
    return specs, frames


def _run(ctx: TaskContext, spec: DistSpec, frames) -> pl.DataFrame:
    """Return every partition's output rows after one barrier Spark job, the partitions'
    addresses swapped through a rendezvous in the driver (exchange.Rendezvous)."""
    where = exchange.meeting(ctx.spark, spec.token, spec.parts)
    return _barrier_job(ctx, dataclasses.replace(spec, rendezvous=where), frames)


def _barrier_job(ctx: TaskContext, spec: DistSpec, frames) -> pl.DataFrame:
    """Return every partition's output rows after one barrier Spark job."""
    packed = direct_input(frames)
    sc = ctx.spark.sparkContext
    if packed is not None:  # the change travels in the job's closure: no stage reads it
        def run(_, empty):
            for _ in empty:  # read to its end (share_job.run_direct says why)
                pass
            yield epoch_direct(spec, packed)

        got = empty_partitions(sc, spec.parts).barrier().mapPartitionsWithIndex(run).collect()
        return pl.concat([pl.read_ipc_stream(b) for b in got])
    schema = change_schema(spec)
    # A barrier stage may not coalesce its input: each partition reads a slice and routes it.
    out = united_sources(ctx.spark, frames).repartition(spec.parts).mapInArrow(
        lambda batches: epoch_partition(spec, batches), schema, barrier=True)
    return pl.from_arrow(out.toArrow())


def distributed_update(ctx: TaskContext, task: Task, plan, held: Held | None, cancel=None,
                       recompute_rows: int | None = None, relabel: bool = False
                       ) -> tuple[dict[str, Change], int, Held, dict, None]:
    """Return what dred_job.arranged_update returns (per relation its Change, the rounds,
    where the state now lives, the (removed, added) ranked rows, None: no labels) for a task
    under the distributed plan: one barrier job where its partitions live, one more (the
    state shipped) when a partition missed its copies."""
    from levelflow.engine.plans.run import task_slots

    program, run_task, _, _ = with_base_facts(ctx, task)
    parts = held.parts if held is not None else task_slots(ctx.spark)
    same = held is not None and not SHIP_ALWAYS
    rules = tuple(r for r in run_task.rules if r.body)
    decls = {n: program.decls[n] for n in set(run_task.relations) | set(run_task.reads_from)}
    facts = {}
    for n in task.relations:
        rows = fact_rows(task.rules, n)
        if rows:
            facts[n] = [cast_fact(r, decls[n].types) for r in rows]
    specs, frames = _sources(ctx, task, ship=not same)
    spec = DistSpec(rules=rules, names=task.relations, decls=decls, sources=tuple(specs),
                    facts=facts, routing=distributed_routing(run_task, program.decls),
                    parts=parts, lineage=held.lineage if held is not None else
                    uuid.uuid4().hex[:16], old_token=held.token if same else None,
                    new_token=next_token(held.token if held is not None else None),
                    token=uuid.uuid4().hex, timeout=exchange.TIMEOUT_SECONDS)
    out = _run(ctx, spec, frames)
    seen = out.select(metrics(lambda col: observed(col, len(spec.names)))).row(0, named=True)
    if seen["misses"]:
        check_cancel(cancel)
        specs, frames = _sources(ctx, task, ship=True)
        spec = dataclasses.replace(spec, sources=tuple(specs), old_token=None,
                                   token=uuid.uuid4().hex)
        out = _run(ctx, spec, frames)
        seen = out.select(metrics(lambda col: observed(col, len(spec.names)))).row(0,
                                                                                  named=True)
    top = max(int(seen["top"] or 0), max((ctx.max_rank.get(n, 0) for n in task.relations),
                                         default=0))
    changes, stored, logs = {}, {}, {}
    for r, n in enumerate(task.relations):
        log = held.logs.get(n) if held is not None else None
        pick = picked_rows(ctx, n, out, r)
        changes[n], stored[n], logs[n] = relation_change(ctx, n, pick, r, seen, top,
                                                         log or Log(ctx.old_ranked[n]))
    return changes, int(seen["rounds"] or 0), Held(spec.lineage, spec.new_token, parts, logs), \
        stored, None
