"""A recursive task's epoch as one Spark job, over its state kept on the executors.

Under the local and partitioned plans a task's state lives where it is updated: share p of the
task (all of it under local) keeps its ranked tuples on the executor that ran it, under a token
naming the epoch, with the lower relations it was derived from (dred_share.py). An epoch
ships only the lower relations' change and the base facts' change to every share, runs
dred_polars.update there, and brings back the removed and added ranked tuples: one job, cut by
one eager localCheckpoint, with the row counts observed on the JVM side. When a share's state is
missing (first epoch of a session, another executor, a cleaned directory), the job is run again
with the state and the lower relations shipped from the Spark-side copy: a Log of the old
version plus the added rows minus the removed ones, compacted when it grows long.
"""

from __future__ import annotations

import dataclasses
import uuid
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from levelflow.engine.evaluate import RANK, cut
from levelflow.engine.incremental.backends.driver_rows import (
    LazyFrame,
    arrow_of,
    frame_of_table,
    held_rows,
    rows_minus,
    rows_of,
    rows_then,
    union_of_rows,
)
from levelflow.engine.incremental.backends.spark_broadcast import bcast_small
from levelflow.engine.incremental.backends.worker.dred_share import (
    LABELS_REL,
    MISS_REL,
    STATS_REL,
    TOP_REL,
    Spec,
    direct_share,
    driver_share,
    update_partition,
)
from levelflow.engine.incremental.backends.worker.share_job import (
    Held,
    direct_input,
    driver_input,
    next_token,
    packed_sources,
    run_direct,
    run_in_driver,
    run_job,
    run_or_ship,
    share_spec,
)
from levelflow.engine.incremental.strategies.closure_labels import labelled
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.memory import held_up_to
from levelflow.engine.plans.in_spark import packed_schema
from levelflow.engine.plans.plan_error import PlanError
from levelflow.engine.plans.planner import distributed_routing
from levelflow.engine.plans.room import fitting_plan
from levelflow.engine.types import column_names, relation_schema
from levelflow.tasks.ast import Negation

if TYPE_CHECKING:
    from levelflow.tasks.tasks import Task

PLANS = ("driver", "local", "partitioned", "distributed")
_WORKER_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Pieces of a Spark-side copy's log before it is compacted into a new base (one job).
LOG_PIECES = 32
# Rows of a log's added (or removed) pieces kept as one driver-side table at most (or the
# session's driver rows, where more: the driver holds the relation anyway).
DRIVER_LOG_ROWS = 200_000


@dataclass(frozen=True, slots=True)
class Log:
    """A relation's Spark-side copy: a base and the ranked rows added and removed since.

    The copy is (base + added) - removed, however the epochs interleave: a (tuple, rank) row
    is in base + added at most once. DRed ranks new rows above every rank before; an in-share
    recompute ranks by its own rounds, so a row removed earlier can come back: it then cancels
    its removal instead of being added.
    """

    base: object  # DataFrame: c0.., _it
    added: object = None  # the union of the cut pieces added (a DataFrame), or None
    removed: object = None
    removed_rows: int = 0
    pieces: int = 0  # pieces in added and removed

    def adding(self, piece, rows: int, removing: bool = False, most: int = DRIVER_LOG_ROWS
               ) -> Log:
        """Return the log with one more piece of added (or removed) ranked rows: merged into
        the last piece where both are rows the driver holds (`most` at most), else one more
        union."""
        def union(pieces, piece):
            if pieces is None:
                return piece, 1
            merged = union_of_rows(pieces, piece, most)
            if merged is not None:
                return merged, 0
            return LazyFrame(lambda: pieces.union(piece)), 1

        if removing:
            gone, more = union(self.removed, piece)
            return Log(self.base, self.added, gone, self.removed_rows + rows, self.pieces + more)
        removed, cancelled = self.removed, 0
        if removed is not None:
            piece, removed, cancelled = _cancelled(piece, removed)
        new, more = union(self.added, piece)
        return Log(self.base, new, removed, self.removed_rows, self.pieces + more + cancelled)

    def held(self, most: int = DRIVER_LOG_ROWS) -> Log:
        """Return the log as one base the driver holds, when it holds every piece (and the
        base and added rows are at most `most`); else itself."""
        if self.pieces == 0:
            return self
        rows = held_rows(self.base)
        added = rows_of(self.added) if self.added is not None else None
        gone = rows_of(self.removed) if self.removed is not None else None
        if rows is None or (self.added is not None and added is None) or \
                (self.removed is not None and gone is None) or \
                rows + (added.num_rows if added is not None else 0) > most:
            return self
        base = rows_then(self.base, added, gone)  # copied when read (a ship, a query)
        return self if base is None else Log(base)

    def frame(self, cols):
        """Return the relation's ranked tuples."""
        out = self.base if self.added is None else self.base.unionByName(self.added)
        if self.removed is not None:
            gone = bcast_small(self.removed, self.removed_rows)
            out = out.join(gone, [*cols, RANK], "left_anti")
        return out


def _cancelled(added, removed):
    """Return (added, removed, pieces more) without the rows in both: in the driver where both
    are rows it holds, else as two anti joins of the plans (one more piece)."""
    kept, gone = rows_minus(added, removed), rows_minus(removed, added)
    if kept is not None and gone is not None:
        return kept, gone, 0

    def minus(a, b):
        return LazyFrame(lambda: a.join(b, a.columns, "left_anti"))
    return minus(added, removed), minus(removed, added), 1


def plan_for(ctx: TaskContext, task: Task):
    """Return the task's plan if its epochs can run arranged, else None."""
    decls = ctx.decls
    if task.subsumes or any(decls[n].arity == 0 for n in task.relations):
        return None  # pruned tuples: strategies/subsumed.py, in the driver
    for rule in task.rules:
        if len(rule.heads) != 1:
            return None
        for lit in rule.body:
            # A negated lower relation that changed would need the projection logic of
            # Versions.delta; such epochs keep the Spark-side DRed.
            if isinstance(lit, Negation) and ctx.versions[lit.atom.relation].changed:
                return None
    rows = sum(ctx.versions[n].new_rows for n in task.reads_from if n in ctx.versions)
    rows += sum(ctx.base[n].new_rows for n in task.relations if n in ctx.base)
    forced = "auto"
    if ctx.plan == "distributed" and task.recursive:  # where the routing applies
        try:
            distributed_routing(task, decls)
            forced = "distributed"
        except PlanError:
            pass
    plan = fitting_plan(ctx.spark, ctx.program.file, task, decls, rows, forced,
                        driver_rows=ctx.driver_rows, spread_rows=_spread_rows(ctx, rows))
    if plan.kind not in PLANS:
        return None
    return plan


def _spread_rows(ctx: TaskContext, rows: int) -> int | None:
    """Return the rows one Python worker holds on a cluster, past which auto distributes a
    recursive task as `run` does (None on a local master, or for a task the driver runs)."""
    from levelflow.engine.plans.planner import worker_rows
    from levelflow.engine.session import on_local_master

    if on_local_master(ctx.spark) or (ctx.driver_rows is not None and rows <= ctx.driver_rows):
        return None
    context = ctx.spark.sparkContext
    if context not in _WORKER_ROWS:  # read once per context: py4j calls
        _WORKER_ROWS[context] = worker_rows(context.getConf())
    return _WORKER_ROWS[context]


def _parts(ctx: TaskContext, task: Task, plan) -> int:
    """Return the shares: partitioned by a number-typed carried key, else one; under the
    distributed plan, as many as the session runs tasks at once (a barrier stage's)."""
    if plan.kind == "distributed":
        from levelflow.engine.plans.run import task_slots

        return task_slots(ctx.spark)
    if plan.kind != "partitioned":
        return 1
    # Symbol codes change as the dictionary grows, so a share of symbols would not stay put.
    if any(ctx.decls[n].types[plan.key[n]] == "symbol" for n in task.relations):
        return 1
    return max(ctx.spark.sparkContext.defaultParallelism, 2)


def _sources(ctx: TaskContext, task: Task, ship: bool) -> tuple[list, list]:
    """Return the (relation, kind) of each packed source and its frame."""
    # Without `ship` the executors keep each lower relation's version with the state.
    specs, frames = packed_sources(ctx, task, ("new", "new") if ship else None, ("fnew", "new"))
    if ship:
        for n in task.relations:
            specs.append((n, "state"))
            frames.append(ctx.old_ranked[n])
    return specs, frames


def fresh_held(ctx: TaskContext, task: Task, plan) -> Held:
    """Return where a from-scratch run under `plan` leaves the task's state (a new lineage):
    under the driver plan, in the driver's memory."""
    return Held(uuid.uuid4().hex[:16], next_token(None), _parts(ctx, task, plan),
                in_driver=plan.kind == "driver")


def change_schema(spec: Spec):
    """Return the Spark schema of an epoch's output (dred_share's Arrow schema)."""
    from pyspark.sql.types import BooleanType, IntegerType, StructField

    return packed_schema(spec.names, spec.decls, (StructField("_op", IntegerType()),
                                                  StructField("_net", BooleanType())))


def observed(col, relations: int):
    """Yield what an epoch's output is observed by, for Spark's or Polars' `col`: (name, the
    condition on a row, "rows" to count the rows meeting it or "max" for their highest `_it`)."""
    rel, op, net = col("_rel"), col("_op"), col("_net")
    for r in range(relations):
        for name, cond in (("removed", op == -1), ("added", op == 1),
                           ("minus", (op == -1) & net), ("plus", (op == 1) & net)):
            yield f"{name}{r}", (rel == r) & cond, "rows"
    yield "rounds", rel == STATS_REL, "max"
    yield "top", rel == TOP_REL, "max"
    yield "labelled", rel == LABELS_REL, "max"
    yield "misses", rel == MISS_REL, "rows"


def _run(ctx: TaskContext, spec: Spec, frames):
    """Return (checkpointed output, observed counts) after one Spark job."""
    return run_job(ctx, spec, frames, update_partition, change_schema(spec),
                   lambda col: observed(col, len(spec.names)))


def arranged_update(ctx: TaskContext, task: Task, plan, held: Held | None, cancel=None,
                    recompute_rows: int | None = None, relabel: bool = False
                    ) -> tuple[dict[str, Change], int, Held, dict, bool | None]:
    """Return per relation its Change, the rounds, where the state now lives, per relation
    the (removed, added) ranked rows, and whether the stored ranks are now labels (None: the
    task's never are): the task's epoch run where its state lives (`recompute_rows`:
    local_dred.update's share limit, if not its own; `relabel`: the stored ranks are labels
    now, closure_labels.py)."""
    parts = _parts(ctx, task, plan)
    specs, frames = _sources(ctx, task, ship=False)
    spec = share_spec(ctx, task, plan, held, parts, specs)
    labels = labelled(spec.rules, spec.names, spec.decls, spec.facts, ctx.program.inputs)
    spec = dataclasses.replace(spec, labels=labels, relabel=labels and relabel)
    if recompute_rows is not None:
        spec = dataclasses.replace(spec, recompute_rows=recompute_rows)

    def first(ctx, spec, frames):
        packed = direct_input(frames)
        return _run(ctx, spec, frames) if packed is None else _run_direct(ctx, spec, packed)

    here = plan.kind == "driver"  # the one share lives in the driver's process: no job
    runs = (_run_here, _run_here) if here else (first, _run)
    spec, out, seen = run_or_ship(ctx, task, spec, frames, _sources, runs, cancel)
    top = max(int(seen["top"] or 0), max((ctx.max_rank.get(n, 0) for n in task.relations),
                                         default=0))
    changes, stored, logs = {}, {}, {}
    for r, n in enumerate(task.relations):
        log = held.logs.get(n) if held is not None else None
        pick = picked_rows(ctx, n, out, r)
        changes[n], stored[n], logs[n] = relation_change(ctx, n, pick, r, seen, top,
                                                 log or Log(ctx.old_ranked[n]))
    held = Held(spec.lineage, spec.new_token, parts, logs, in_driver=here)
    return changes, int(seen["rounds"] or 0), held, stored, \
        bool(seen["labelled"]) if labels else None


def _run_here(ctx: TaskContext, spec: Spec, frames):
    """Return (the share's output rows, the counts) of the epoch run in the driver's process:
    no job when every input is rows the driver holds, else one bringing them over."""
    return run_in_driver(spec, driver_input(ctx.spark, spec, frames), driver_share,
                         lambda col: observed(col, len(spec.names)))


def _run_direct(ctx: TaskContext, spec: Spec, packed: bytes):
    """Return (every share's output rows, the counts) after one Spark job that carries the
    input in its closure and brings the output back to the driver."""
    return run_direct(ctx, spec, packed, direct_share,
                      lambda col: observed(col, len(spec.names)))


def picked_rows(ctx: TaskContext, n: str, out, r: int):
    """Return pick(op, net): relation n's removed (op -1) or added (+1) rows of an epoch's
    output, ranked (c0.., _it) or only the net ones (c0..); from a direct epoch's rows in the
    driver, or from the Spark-side output."""
    import pyspark.sql.functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    cols = column_names(ctx.decls[n].arity)
    if isinstance(out, pl.DataFrame):
        mine = out.filter(pl.col("_rel") == r)
        fields = relation_schema(ctx.decls[n]).fields

        def local(op: int, net: bool):
            rows = mine.filter(pl.col("_op") == op)
            rows = rows.filter(pl.col("_net")) if net else rows
            picked = [pl.col(f"o{r}_{c}").alias(c) for c in cols]
            if net:
                return frame_of_table(ctx.spark, arrow_of(rows.select(picked)), StructType(fields))
            table = arrow_of(rows.select(*picked, pl.col(RANK)))
            return frame_of_table(ctx.spark, table,
                                  StructType([*fields, StructField(RANK, LongType())]))
        return local

    mine = out.filter(F.col("_rel") == r)
    picked = [F.col(f"o{r}_{c}").alias(c) for c in cols]

    def spark_side(op: int, net: bool):
        rows = mine.filter(F.col("_op") == op)
        return rows.filter(F.col("_net")).select(*picked) if net else \
            rows.select(*picked, F.col(RANK))
    return spark_side


def relation_change(ctx: TaskContext, n: str, pick, r: int, seen, top: int, log: Log
            ) -> tuple[Change, tuple, Log]:
    """Return relation n's Change, its (removed, added) ranked rows and its Spark-side log."""
    cols = column_names(ctx.decls[n].arity)
    counts = {k: int(seen[f"{k}{r}"] or 0) for k in ("removed", "added", "plus", "minus")}
    old = ctx.versions[n]
    if not counts["removed"] and not counts["added"]:
        return Change(None, rows=old.old_rows, pieces=old.pieces, top=top), (None, None), log
    removed_rows = pick(-1, False) if counts["removed"] else None
    added_rows = pick(1, False) if counts["added"] else None
    most = held_up_to(DRIVER_LOG_ROWS, ctx.driver_rows)
    if counts["added"]:
        log = log.adding(added_rows, counts["added"], most=most)
    if counts["removed"]:
        log = log.adding(removed_rows, counts["removed"], removing=True, most=most)
    log = log.held(most)
    if log.pieces > LOG_PIECES:
        parts = max(ctx.spark.sparkContext.defaultParallelism, 1)
        log = Log(cut(log.frame(cols).coalesce(parts))[0])
    plus = pick(1, True) if counts["plus"] else None
    minus = pick(-1, True) if counts["minus"] else None
    rows = old.old_rows - counts["minus"] + counts["plus"]
    new = log.base if log.pieces == 0 else LazyFrame(lambda: log.frame(cols))
    change = Change(new, plus, counts["plus"], minus, counts["minus"], rows, pieces=old.pieces,
                    top=top)
    return change, (removed_rows, added_rows), log
