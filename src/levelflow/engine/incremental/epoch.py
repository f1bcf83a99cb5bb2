"""One epoch: the scheduler orders the tasks whose inputs changed; workers update each task.

Constant during an epoch: the program's tasks, which relations each edge carries, the old
snapshot. Changes (main thread only): each relation's Versions once its task finished, the
scheduler's state, the per-task strategies and times.

A task activates a child only when a relation the child reads has a non-empty net change, so
unaffected parts of the DAG never run. Per task the strategy is counting (non-recursive) or
DRed; under the elastic switch an update that runs longer than `switch` x the task's last
from-scratch time is stopped (cancel event + Spark job tag) and the task is recomputed from
scratch instead, then diffed against its old version. Past `timeout` seconds the whole epoch
is cancelled (engine/workers.py) and raises EpochTimeout before anything is committed.
"""

from __future__ import annotations

import threading
import time
from functools import partial

from levelflow.driver import drive
from levelflow.engine.choose import chosen
from levelflow.engine.evaluate import Cancelled, cut
from levelflow.engine.guard import (
    cancelled_by,
    check_products,
    check_ranges,
    from_failure,
    task_limit,
    updating,
)
from levelflow.engine.incremental.backends.driver_rows import (
    held_columns,
    with_constant,
    without,
)
from levelflow.engine.incremental.backends.worker.counting_job import (
    counted_update,
    scratch_in_driver,
)
from levelflow.engine.incremental.backends.worker.dist_job import distributed_update
from levelflow.engine.incremental.backends.worker.dred_job import (
    arranged_update,
    fresh_held,
    plan_for,
)
from levelflow.engine.incremental.elastic import (
    ARRANGED_LARGE_CHANGE,
    ARRANGED_SWITCH,
    BOOTSTRAP_COUNT_ROWS,
    LARGE_CHANGE,
    MODES,
    SWITCH,
    SWITCH_FLOOR_SECONDS,
    cancelled_after,
)
from levelflow.engine.incremental.outcome import apply_counts, apply_sets, epoch_result
from levelflow.engine.incremental.results import EpochError, EpochResult, EpochTimeout
from levelflow.engine.incremental.state.snapshot import COUNT, Snapshot, next_snapshot
from levelflow.engine.incremental.strategies import counting_polars, counting_spark
from levelflow.engine.incremental.strategies.aggregates import (
    aggregate_limits,
    aggregate_recompute,
    aggregate_task,
    aggregate_update,
)
from levelflow.engine.incremental.strategies.counting import versions_read
from levelflow.engine.incremental.strategies.counting_spark import count_scratch
from levelflow.engine.incremental.strategies.dred_spark import dred_update
from levelflow.engine.incremental.strategies.in_place import EVERY_SHARE, recompute_in_place
from levelflow.engine.incremental.strategies.recompute import diff, scratch_sets
from levelflow.engine.incremental.strategies.renaming import renamed_update, renaming
from levelflow.engine.incremental.strategies.subsumed import subsumed_update
from levelflow.engine.incremental.versions import Change, TaskContext, TaskUpdate, Versions
from levelflow.engine.limitsize import keep_smallest, limited
from levelflow.engine.memory import held_up_to
from levelflow.engine.plans.planner import LOCAL_ROWS
from levelflow.engine.types import column_names
from levelflow.engine.workers import DeadlinePassed, SparkWorkers, one_line
from levelflow.errors import LevelflowError
from levelflow.tasks.functors import uses_autoinc
from levelflow.tasks.tasks import ProgramTasks


class Epoch:
    """One epoch's state; `run` drives the scheduler, `_update` is what a worker thread does."""

    def __init__(self, spark, program_tasks: ProgramTasks, snap: Snapshot, base: dict, *,
                 mode: str = "elastic", switch: float = SWITCH,
                 switch_floor: float = SWITCH_FLOOR_SECONDS, bootstrap: bool = False,
                 large_change: float | None = LARGE_CHANGE, progress=None,
                 arranged: bool = True, change=None, max_tuples: int | None = None,
                 driver_rows: int | None = None, timeout: float | None = None,
                 plan: str = "auto") -> None:
        from levelflow.engine.progress import Progress

        if mode not in MODES:
            raise EpochError(f"strategy: must be one of {', '.join(MODES)}, got {mode!r}")
        self.spark = spark
        self.pt = program_tasks
        self.program = program_tasks.program
        self.snap = snap
        self.mode = "scratch" if bootstrap else mode
        self.switch = switch
        self.switch_floor = switch_floor
        self.large_change = large_change
        self.bootstrap = bootstrap
        self.arranged = arranged  # recursive tasks updated where their state lives (dred_job.py)
        self.max_tuples = max_tuples  # per task: engine/guard.py
        self.timeout = timeout  # seconds the epoch's tasks may take (None: no deadline)
        self.cancel = threading.Event()  # set once the deadline passed: driver work stops
        self.progress = progress or Progress()  # the live line `run` shows, or nothing
        self.versions = {n: Versions(d, snap.tuples(n), snap.rows[n], snap.pieces.get(n, 1))
                         for n, d in self.program.decls.items()}
        self.base = base  # input relation -> Versions of base facts (change already set)
        self.ctx = TaskContext(spark, self.program, self.versions,
                               {n: snap.rel[n] for n in snap.counted}, base,
                               {n: snap.rel[n] for n in self.program.decls
                                if n not in snap.counted}, snap.max_rank, driver_rows, plan)
        self.updates: dict[int, TaskUpdate] = {}
        self.activations: dict[int, tuple[int, ...]] = {}  # task -> children it activated
        self.schedule: list[tuple[int, int, float, float]] = []  # (task, slot, start, end)
        self.finished: list[int] = []  # task ids in finish order
        self.jobs = 1
        self.task_jobs: dict[int, int] = {}  # task -> Spark jobs it ran
        # A program_change.ProgramChange when this epoch also moves to a new program: which
        # tasks are recomputed, and the rule differences the updated ones maintain.
        self.change = change

    # -- one task ------------------------------------------------------------------------------

    def _update(self, v: int) -> TaskUpdate:
        """Return task v updated (in a worker thread, Spark jobs tagged for cancellation); a
        range its update evaluates is counted against its limit first (guard.UPDATING)."""
        with updating(task_limit(self.pt.tasks[v], self.max_tuples)), cancelled_by(self.cancel):
            return self._updated(v)

    def _updated(self, v: int) -> TaskUpdate:
        task = self.pt.tasks[v]
        t0 = time.perf_counter()
        self._check_cancel()
        counted = task.relations[0] in self.snap.counted
        last = self.snap.scratch_seconds.get(task.name)
        if task_limit(task, self.max_tuples) is not None:  # a product past it: before any job
            check_products(self.program.file, task,
                           {n: self.versions[n].new_rows for n in task.reads_from},
                           self.max_tuples)
            check_ranges(task, self.max_tuples)
        if self.change is not None and self.change.forced(v) or \
                limited(self.program, task.relations) or \
                chosen(self.program.decls, task.relations):  # or its N or choice kept anew
            return self._scratch(v, counted, "scratch", t0)
        if self.mode != "scratch" and uses_autoinc(task.rules):  # numbered anew each epoch
            return self._scratch(v, counted, "scratch", t0)
        if counted and not task.rules and all(n in self.base for n in task.relations):
            return self._copy_base(v, t0)
        if self.mode == "scratch":
            return self._from_scratch(v, counted, t0)
        if task.subsumes:  # repaired in the driver (strategies/subsumed.py)
            return self._apply_sets(v, subsumed_update(self.ctx, task, self._check_cancel),
                                    "subsume", t0, 0)
        copy = renaming(self.program, task, self.snap.counted) \
            if counted and self.change is None else None
        if copy is not None:  # the source's change, reordered: no job
            return renamed_update(self.spark, v, self.versions[task.relations[0]],
                                  self.versions[copy[0]], copy[1], t0)
        # Under a program change, a task whose rules changed is maintained with them gated
        # (on the Spark side: its executors' copy was derived by the old rules).
        gated, ctx = self.change.task_context(self, v) if self.change else (task, self.ctx)
        plan = plan_for(ctx, task) if self.arranged and not counted and ctx is self.ctx \
            else None
        if plan is None and self.snap.labels_any(task.relations) and \
                any(self.versions[n].minus_rows for n in task.reads_from):
            # Its stored ranks are labels (closure_labels.py): DRed on the Spark side would
            # keep tuples by them. Recomputed, it is ranked again.
            return self._scratch(v, counted, "scratch", t0)
        if plan is None and not counted and not aggregate_task(task) and ctx is self.ctx and \
                self.mode == "elastic" and self._in_driver(task):
            # Small, but its share cannot be updated where it lives (a negated relation that
            # changed, say): recomputed in the driver, not DRed's rounds of Spark jobs.
            return self._scratch(v, counted, "scratch", t0)
        large, switch = self._elastic_limits(task, ctx, plan, counted)
        recompute = None  # else where the state lives, the share recomputed (in_place.py)
        if self.mode == "elastic" and not counted and large is not None and \
                self.change_fraction(task) >= large:
            if not recompute_in_place(ctx, task, plan, self.snap.arranged.get(task.name)):
                return self._scratch(v, counted, "bootstrap", t0)
            recompute = EVERY_SHARE
        budget = max(switch * last, self.switch_floor) \
            if self.mode == "elastic" and last is not None and switch is not None else None
        with cancelled_after(self.spark, budget) as cancel:
            try:
                if counted:
                    upd = self._counting(v, gated, ctx, cancel, t0)
                elif aggregate_task(task):  # the touched groups anew
                    upd = self._aggregate(v, task, ctx, t0)
                else:
                    upd = self._dred(v, gated, ctx, plan, cancel, t0, recompute)
                if cancel.is_set():  # finished, but the timer fired during the last job
                    raise TimeoutError
                return upd
            except Exception:
                if not cancel.is_set():
                    raise
        self._check_cancel()  # the switch fired as the epoch's deadline passed: no recompute
        return self._scratch(v, counted, "switched", t0)

    def _check_cancel(self) -> None:
        """Raise Cancelled once the epoch's deadline passed (work in the driver checks it)."""
        if self.cancel.is_set():
            raise Cancelled("the epoch's deadline passed")

    def _elastic_limits(self, task, ctx, plan, counted: bool
                        ) -> tuple[float | None, float | None]:
        """Return the change fraction past which the task is recomputed and the multiple of
        its last from-scratch time past which its update is stopped, for this task's path."""
        large, switch = self.large_change, self.switch
        if plan is not None:
            large = None if large is None else large * ARRANGED_LARGE_CHANGE
            switch *= ARRANGED_SWITCH
        if aggregate_task(task):
            large, switch = aggregate_limits(ctx, task, self.snap.arranged.get(task.name),
                                             large, switch, ctx is self.ctx)
        if counted and self._counts_kept(task, ctx):
            # At most one job over at most LOCAL_ROWS rows: stopping it saves nothing, its
            # recompute is a job at least (a 1 s budget switched bench_aggregates' dist).
            switch = None
        return large, switch

    def _aggregate(self, v: int, task, ctx, t0: float) -> TaskUpdate:
        """Return aggregate task v updated, its state kept in the driver unless the task is
        gated by a program change (its kept bindings were the old rules')."""
        out, held = aggregate_update(ctx, task, self.snap.arranged.get(task.name),
                                     driver=ctx is self.ctx)
        upd = self._apply_sets(v, out, "aggregate", t0, 0)
        upd.held = held
        return upd

    def _from_scratch(self, v: int, counted: bool, t0: float) -> TaskUpdate:
        """Return task v recomputed from scratch: at a bootstrap, a small counted task is
        counted in the driver, which keeps its counts (from empty old versions its counting
        is a from-scratch count), so the first epoch need not bring them over."""
        task = self.pt.tasks[v]
        # Not autoinc(): counting's terms (one per changed atom, a negated one too) would each
        # number their own rows from 0
        if self.bootstrap and counted and not uses_autoinc(task.rules) and \
                self._counts_kept(task, self.ctx, BOOTSTRAP_COUNT_ROWS):
            upd = self._kept_counts(v, task, self.ctx, None, t0, "scratch")
            upd.scratch_seconds = upd.seconds
            return upd
        return self._scratch(v, counted, "scratch", t0)

    def _dred(self, v: int, task, ctx, plan, cancel, t0: float, recompute=None) -> TaskUpdate:
        """Return task v updated by DRed: where its state lives under a local or partitioned
        plan, else on the Spark side; `recompute`: recomputed there ("bootstrap")."""
        if plan is None:
            out, rounds = dred_update(ctx, task, cancel)
            return self._apply_sets(v, out, "dred", t0, rounds)
        # Under the distributed plan: one barrier job over its partitions (dist_job.py).
        update = distributed_update if plan.kind == "distributed" else arranged_update
        out, rounds, held, stored, labels = update(
            ctx, task, plan, self.snap.arranged.get(task.name), cancel, recompute_rows=recompute,
            relabel=self.snap.labels_any(task.relations))
        upd = self._apply_sets(v, out, "dred" if recompute is None else "bootstrap", t0, rounds)
        upd.held, upd.stored = held, stored
        if labels is not None:
            upd.labelled = dict.fromkeys(task.relations, labels)
        return upd

    def _counting(self, v: int, task, ctx, cancel, t0: float) -> TaskUpdate:
        """Return task v updated by counting: where the task's counts are kept (the driver:
        counting_job.py) when the task is small and not gated, unless the driver
        holds every row the terms read and they sum to nothing (no job at all); else summed
        in the driver or on the Spark side. The last two keep no counts (held None)."""
        kept = self._counts_kept(task, ctx)
        held = self.snap.arranged.get(task.name)
        # Counts the driver keeps are updated there, even when the sums are empty: no job,
        # and their lower relations' copies stay current. Their share sums the terms itself,
        # unless it keeps no copy that changed: sums of nothing then leave it as it is.
        if kept and getattr(held, "in_driver", False):
            read = versions_read(task.rules)
            if not any(self.versions[n].changed for n in task.reads_from if n in read):
                summed = counting_polars.summed_in_driver(ctx, task)
                if summed is not None and not any(df.height for df in summed.values()):
                    out = {n: Change(ctx.old_counts[n], rows=self.versions[n].old_rows)
                           for n in task.relations}
                    upd = self._apply_counts(v, out, "counting", t0)
                    upd.held = held
                    return upd
            return self._kept_counts(v, task, ctx, cancel, t0, "counting")
        summed = counting_polars.summed_in_driver(ctx, task)
        # Sums without kept counts take a job joining them to the old counts on Spark, and
        # one per broadcast in it (5 on views1).
        if kept and (summed is None or any(df.height for df in summed.values())):
            return self._kept_counts(v, task, ctx, cancel, t0, "counting")
        return self._apply_counts(v, counting_spark.count_update(ctx, task, summed), "counting", t0)

    def _in_driver(self, task) -> bool:
        """Return whether the task reads few enough rows to run in the driver."""
        limit = self.ctx.driver_rows
        return limit is not None and self._rows_read(task) <= limit

    def _rows_read(self, task) -> int:
        """Return the rows a task reads: its lower relations' new versions and base facts."""
        return sum(self.versions[n].new_rows for n in task.reads_from) + \
            sum(self.base[n].new_rows for n in task.relations if n in self.base)

    def _counts_kept(self, task, ctx, limit: int = LOCAL_ROWS) -> bool:
        """Return whether a counted task's counts can be kept (in the driver): it reads at most
        `limit` rows, or the session's driver rows where more (its lower relations' new
        versions and base facts), and is not gated by a program change."""
        if not self.arranged or ctx is not self.ctx:  # a gated task reads stand-ins too
            return False
        return self._rows_read(task) <= held_up_to(limit, ctx.driver_rows)

    def _kept_counts(self, v: int, task, ctx, cancel, t0: float, strategy: str
                       ) -> TaskUpdate:
        """Return task v updated by counting where its counts are kept (counting_job.py)."""
        out, held = counted_update(ctx, task, self.snap.arranged.get(task.name), cancel)
        upd = self._apply_counts(v, out, strategy, t0)
        upd.held = held
        return upd

    def change_fraction(self, task) -> float:
        """Return the changed share of the tuples a task reads (lower relations, base facts)."""
        own = set(task.relations)
        read = task.reads - own
        vers = [self.versions[n] for n in read] + [self.base[n] for n in own if n in self.base]
        changed = sum(v.plus_rows + v.minus_rows for v in vers)
        return changed / max(sum(v.old_rows for v in vers), 1)

    def _copy_base(self, v: int, t0: float) -> TaskUpdate:
        """Return the update of a task of input relations without rules: its base facts' change."""
        versions, counts, stored = {}, {}, {}
        for n in self.pt.tasks[v].relations:
            b = self.base[n]
            ver = Versions(b.decl, self.versions[n].old, self.versions[n].old_rows)
            if b.changed:
                ver.set_change(b.new, b.new_rows, b.plus, b.plus_rows, b.minus, b.minus_rows)
                counts[n] = with_constant(self.spark, b.new, b.decl, COUNT, 1)
                added = with_constant(self.spark, b.plus, b.decl, COUNT, 1)
                stored[n] = (b.minus if b.minus_rows else None, added if b.plus_rows else None)
            versions[n] = ver
        strategy = "scratch" if self.mode == "scratch" else "counting"
        return TaskUpdate(v, strategy, time.perf_counter() - t0, versions, counts,
                          stored=stored)

    def _scratch(self, v: int, counted: bool, strategy: str, t0: float) -> TaskUpdate:
        """Return task v recomputed from scratch and diffed against its old version.

        The task's from-scratch time (the elastic switch's reference) excludes the diff.
        """
        task = self.pt.tasks[v]
        t1 = time.perf_counter()
        # An aggregate task's recompute in the driver also builds the state its epochs update.
        got = aggregate_recompute(self.ctx, task) if not counted and self.change is None \
            else None
        if got is not None:
            upd = self._apply_sets(v, got[0], strategy, t0, 0)
            upd.scratch_seconds, upd.held = time.perf_counter() - t1, got[1]
            return upd
        if counted:
            # Small: counted in the driver, as a share counts, no Spark job (a program change's
            # new task reads only rows the driver holds, like a tiny epoch's).
            counts = scratch_in_driver(self.ctx, task) if self._in_driver(task) else None
            if counts is None:
                counts = {n: cut(df) for n, df in count_scratch(self.ctx, task).items()}
            fresh = {n: keep_smallest(self.program, n, *counts[n]) for n in task.relations}
        else:
            plan = plan_for(self.ctx, task) if self.arranged and \
                not limited(self.program, task.relations) and \
                not chosen(self.program.decls, task.relations) else None  # held: uncut
            held = fresh_held(self.ctx, task, plan) if plan is not None else None
            sets, rounds = scratch_sets(self.ctx, task, self.cancel, held=held and (plan, held),
                                        max_tuples=self.max_tuples)
        seconds = time.perf_counter() - t1
        out = {}
        for n in task.relations:
            ver = self.versions[n]
            cols = column_names(self.program.decls[n].arity)
            if counted:
                new_c, rows = fresh[n]
                out[n] = Change(new_c, *diff(ver.old, ver.old_rows, without(new_c, COUNT), rows,
                                             cols), rows, dirty=True)
            else:
                # one cut piece; its ranks are this evaluation's rounds
                ranked, rows = keep_smallest(self.program, n, *sets[n])
                out[n] = Change(ranked, *diff(ver.old, ver.old_rows, held_columns(ranked, cols),
                                              rows, cols), rows, pieces=1, top=rounds)
        upd = self._apply_counts(v, out, strategy, t0) if counted else \
            self._apply_sets(v, out, strategy, t0, rounds)
        upd.scratch_seconds = seconds
        upd.held = None if counted else held
        upd.labelled = dict.fromkeys(task.relations, False)  # ranked by this run's rounds
        return upd

    def _apply_counts(self, v, out, strategy, t0) -> TaskUpdate:
        """Return the TaskUpdate of a counted task from its relations' Changes (outcome.py)."""
        return apply_counts(self, v, out, strategy, t0)

    def _apply_sets(self, v, out, strategy, t0, rounds) -> TaskUpdate:
        """Return the TaskUpdate of a set-maintained (DRed, ranked) task (outcome.py)."""
        return apply_sets(self, v, out, strategy, t0, rounds)

    # -- the driver ----------------------------------------------------------------------------

    def initial(self) -> list[int]:
        """Return the tasks to activate: those with changed base facts (all inputs at bootstrap)."""
        first = set(self.pt.initial) if self.bootstrap else set()
        for task in self.pt.tasks:
            if any(n in self.base and self.base[n].changed for n in task.relations):
                first.add(task.id)
        if self.change is not None:
            first |= self.change.activated()
        return sorted(first)

    def run(self, scheduler="hybrid", jobs: int = 1) -> list[int]:
        """Run every activated task to completion; return the ids that ran, in finish order."""
        from levelflow.scheduler import make_scheduler

        sched = make_scheduler(scheduler, self.pt.graph) if isinstance(scheduler, str) \
            else scheduler
        self.jobs = jobs
        initial = self.initial()
        self.progress.activated(initial)
        sched.activate(initial)
        workers = SparkWorkers(self.spark, jobs, self.pt.graph.names, self._prepare, self._finish,
                               self.cancel, self.timeout)
        try:
            with workers:
                drive(sched, workers, name=scheduler if isinstance(scheduler, str) else None)
        except DeadlinePassed as e:
            n = self.snap.epoch + 1
            kept = "no state was written" if self.bootstrap else \
                f"the state stays at epoch {self.snap.epoch}"
            raise EpochTimeout(f"levelflow: error: epoch {n} {e}: {kept}") from None
        except Exception as e:
            if isinstance(e, LevelflowError) or workers.failed is None:
                raise
            limit = from_failure(e, self.program.file)  # raised in a Python worker
            if limit is not None:
                raise limit from e
            name = self.pt.tasks[workers.failed].name  # a task failed: name it, keep one line
            raise EpochError(f"{self.program.file}: task {name} failed: {one_line(e)}") from e
        finally:
            self.schedule = workers.schedule
            self.task_jobs = workers.spark_jobs(self.finished)
        return self.finished

    def _prepare(self, v: int):
        """Return what a worker calls to update task v (said on the live line)."""
        self.progress.started(v)
        return partial(self._update, v)

    def _finish(self, v: int, upd: TaskUpdate, seconds: float) -> list[int]:
        """Take in a finished task's update; return the children whose input it changed."""
        limit = task_limit(self.pt.tasks[v], self.max_tuples)
        if limit is not None:  # the epoch stops before its commit: no state changes
            limit.check(sum(ver.new_rows for ver in upd.versions.values()),
                        f"{self.program.file}: ")
        self.updates[v] = upd
        for n, ver in upd.versions.items():
            self.versions[n] = ver
        relations = self.pt.tasks[v].relations
        activated = [c for c, pos in self.pt.edge_reads[v]
                     if any(self.versions[relations[i]].changed for i in pos)]
        self.finished.append(v)
        self.activations[v] = tuple(activated)
        self.progress.finished(v, seconds)
        self.progress.activated(activated)
        return activated

    def snapshot(self) -> tuple[Snapshot, set[str], set[str]]:
        """Return the new snapshot (not yet on disk), the relations and base facts it changed."""
        return next_snapshot(self.snap, self.pt.tasks, self.updates, self.base)

    def result(self, seconds: float) -> EpochResult:
        """Return the EpochResult of the finished epoch (outcome.py)."""
        return epoch_result(self, seconds)
