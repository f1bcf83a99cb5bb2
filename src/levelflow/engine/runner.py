"""A from-scratch run: what a finished task stores and whom it activates; `run_program`.

Constant: the ProgramTasks (tasks, graph, initial tasks, which relations each edge carries).
Changes (main thread only): the relation store (engine/held.py: a Polars frame in the driver
or a materialized DataFrame), per-task wall times, row counts and who activated whom.

Policy (the order) is the scheduler's; a task's plan is the planner's (engine/plans: a task
whose inputs are small runs in the driver and needs no Spark); evaluating it under that plan
is `evaluate_planned`'s; the loop is
`levelflow.driver.drive` with `SparkWorkers`. This module is the run's side of the workers: a
run activates the tasks that have input of their own, and a finished task activates each child
that reads one of its relations that came out non-empty ("changed" from empty).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path

from levelflow.driver import drive, scheduler_name
from levelflow.engine.checks import RunError, check_fact_files, check_run_args
from levelflow.engine.guard import MAX_TUPLES, check_limit, from_failure
from levelflow.engine.held import HeldRelations
from levelflow.engine.limitsize import limit_relations
from levelflow.engine.outputs import write_outputs
from levelflow.engine.plans.driver import BY_MASTER, resolved_rows
from levelflow.engine.progress import Progress
from levelflow.engine.workers import (
    DeadlinePassed,
    SparkWorkers,
    in_driver,
    one_line,
    spark_error_types,
)
from levelflow.errors import LevelflowError
from levelflow.scheduler.metered import Metered
from levelflow.tasks.tasks import ProgramTasks
from levelflow.traces.model import JobTrace


@dataclass
class RunResult:
    """What a run produced: every declared relation, what ran, where the time went, the trace."""

    relations: dict  # relation name -> DataFrame (empty for relations of tasks that did not run)
    ran: int
    total: int
    task_names: tuple[str, ...]
    task_seconds: list[float]  # wall seconds per task id, 0.0 for tasks that did not run
    wall_seconds: float
    spark_seconds: float  # worker busy time: the sum of task_seconds
    scheduling_seconds: float  # time inside scheduler calls
    output_seconds: float  # time writing output files
    printsize: dict[str, int]
    output_counts: dict[str, int]
    trace: JobTrace
    schedule: list[tuple[int, int, float, float]] = field(default_factory=list)
    task_stats: list = field(default_factory=list)  # per task id: EvalStats, None if not run
    decls: dict = field(default_factory=dict)  # relation name -> Decl

    def relation(self, name: str):
        """Return the DataFrame of relation `name`, its columns named as its attributes
        (`relations[name]` holds the engine's c0..c{n-1})."""
        from levelflow.engine.spark_io import named

        try:
            df = self.relations[name]
        except KeyError:
            raise KeyError(f"no relation named {name!r}") from None
        return named(self.decls[name], df) if name in self.decls else df

    @property
    def ran_tasks(self) -> list[str]:
        """Return the names of the tasks that ran, in id order."""
        ran = self.trace.activations or {}
        return [n for v, n in enumerate(self.task_names) if v in ran]

    def summary(self) -> str:
        """Return the line 'ran k of N tasks in S s'."""
        return f"ran {self.ran} of {self.total} tasks in {self.wall_seconds:.2f} s"


@dataclass(frozen=True, slots=True)
class _Outcome:
    """A finished task as a worker hands it back."""

    relations: dict
    counts: dict[str, int]  # tuples per relation of the task
    stats: object  # the evaluator's EvalStats (iterations, rows per round), or None


# ---------------------------------------------------------------------------------------------
# The loop.


class _Run:
    """One run's state: the relation store and what ran; `_prepare`/`_finish` feed the workers."""

    def __init__(self, spark, program_tasks: ProgramTasks, factdir, scheduler, jobs: int,
                 checkpoint: str, progress: Progress, plan: str = "auto",
                 plan_rows: int | None = None, max_tuples: int | None = MAX_TUPLES,
                 driver_rows: int | None = None, timeout: float | None = None) -> None:
        from levelflow.scheduler import make_scheduler

        self.spark = spark
        self.pt = program_tasks
        self.program = program_tasks.program
        self.factdir = Path(factdir) if factdir is not None else None
        self.graph = program_tasks.graph
        self.sched = (make_scheduler(scheduler, self.graph) if isinstance(scheduler, str)
                      else scheduler)
        self.name = scheduler if isinstance(scheduler, str) else scheduler_name(scheduler)
        self.jobs = jobs
        self.checkpoint = checkpoint
        self.plan = plan
        self.plan_rows = plan_rows
        self.driver_rows = driver_rows
        self.max_tuples = max_tuples
        self.progress = progress
        self.timeout = timeout  # seconds the tasks may take before the run is cancelled
        self.cancel = threading.Event()
        n = len(program_tasks.tasks)
        self.store = HeldRelations(spark, self.program.decls)  # the relations of tasks that ran
        self.counts: dict[str, int] = {}  # relation name -> tuples, for relations in store
        self.stats: list = [None] * n  # per task: the evaluator's EvalStats, if it ran
        self.seconds = [0.0] * n
        self.activations: dict[int, tuple[int, ...]] = {}
        self.schedule: list[tuple[int, int, float, float]] = []
        self.sched_seconds = 0.0
        self.spark_jobs: dict[int, int] = {}  # per task that ran: the Spark jobs it started
        # Relations whose tuples are read: by a later task or as an output. A task with none
        # of them (say, `.printsize` only) brings back its counts, not its tuples.
        self.read = set(self.program.outputs).union(*(t.reads_from for t in program_tasks.tasks))

    def _prepare(self, v: int):
        """Return what a worker calls to evaluate task v under the plan its shape and input size
        give (a driver task's call is marked `in_driver`: it needs no Spark)."""
        from levelflow.engine.plans import LOCAL_ROWS, input_rows
        from levelflow.engine.plans.room import fitting_plan

        task = self.pt.tasks[v]
        counts = {r: self.counts.get(r, 0) for r in task.reads_from}
        rows = input_rows(self.program, task, counts, self.factdir)
        threshold = LOCAL_ROWS if self.plan_rows is None else self.plan_rows  # 0: never local
        driver = self.driver_rows
        # MemoryLimit here, before the task's job, where its inputs cannot fit its plan.
        plan = fitting_plan(self.spark, self.program.file, task, self.program.decls, rows,
                            self.plan, threshold=threshold, driver_rows=driver,
                            spread_rows=self._spread_rows(rows, driver))
        self.progress.started(v)
        call = partial(self._evaluate, v, plan, counts)
        return in_driver(call) if plan.kind == "driver" else call

    def _spread_rows(self, rows: int, driver: int | None) -> int | None:
        """Return the rows one Python worker holds on a cluster (None on a local master, whose
        driver plan already holds what fits in memory: auto never spreads a task there)."""
        from levelflow.engine.session import on_local_master

        if self.plan != "auto" or on_local_master(self.spark) or (
                driver is not None and rows <= driver):
            return None  # not asked for a driver task: reading the conf starts Spark
        return self._worker_rows

    @cached_property
    def _worker_rows(self) -> int:
        """The rows one Python worker holds, from the Spark conf: read once a run (py4j calls)."""
        from levelflow.engine.plans.planner import worker_rows

        return worker_rows(self.spark.sparkContext.getConf())

    def _evaluate(self, v: int, plan, counts: Mapping) -> _Outcome:
        """Return task v evaluated (in a worker thread) under `plan`."""
        from levelflow.engine.plans import evaluate_planned

        task = self.pt.tasks[v]
        read = self.store.polars if plan.kind == "driver" else self.store.frame
        inputs = {r: read(r) for r in task.reads_from}
        out = evaluate_planned(self.spark, self.program, task, inputs, self.factdir, plan=plan,
                               checkpoint=self.checkpoint, cancel=self.cancel, counts=counts,
                               store=not self.read.isdisjoint(task.relations),
                               max_tuples=self.max_tuples)
        stats = getattr(out, "stats", None)
        known = getattr(stats, "rows", {})
        # The evaluator counts what it materializes; count here only what it did not.
        rows = {r: known[r] if r in known else out[r].count() for r in task.relations}
        relations = dict(out)
        limit_relations(self.program, task.relations, relations, rows)
        return _Outcome(relations, rows, stats)

    def _finish(self, v: int, out: _Outcome, seconds: float) -> list[int]:
        """Store a finished task's relations; return the children it activates."""
        task = self.pt.tasks[v]
        for r in task.relations:
            self.store.put(r, out.relations[r])
        self.counts.update(out.counts)
        self.stats[v] = out.stats
        self.seconds[v] = seconds
        # From scratch every relation starts empty, so "changed" means "came out non-empty".
        nonempty = [out.counts[r] > 0 for r in task.relations]
        activated = [c for c, pos in self.pt.edge_reads[v] if any(nonempty[i] for i in pos)]
        self.activations[v] = tuple(activated)
        self.progress.finished(v, seconds)
        self.progress.activated(activated)
        return activated

    def execute(self, initial: Sequence[int]) -> None:
        """Run the tasks until the scheduler has nothing left; raise the first task failure."""
        sched = Metered(self.sched, time.perf_counter)
        self.progress.activated(initial)
        sched.activate(initial)
        workers = SparkWorkers(self.spark, self.jobs, self.graph.names, self._prepare,
                               self._finish, self.cancel, self.timeout)
        try:
            with workers:
                drive(sched, workers, name=self.name)
        except DeadlinePassed as e:
            raise RunTimeout(f"levelflow: error: the run {e}; no output was written") from None
        except BaseException as exc:
            error = self._user_error(exc, workers.failed)
            if error is exc:
                raise
            raise error from exc
        finally:
            self.sched_seconds = sched.total()
            self.schedule = workers.schedule
            self.spark_jobs = workers.spark_jobs(self.activations)

    def _user_error(self, exc: BaseException, failed: int | None) -> BaseException:
        """Return the exception to raise: user errors as they are, Spark failures as RunError."""
        if isinstance(exc, LevelflowError) or not isinstance(exc, spark_error_types()):
            return exc
        limit = from_failure(exc, self.program.file)  # raised in a Python worker
        if limit is not None:
            return limit
        name = self.graph.names[failed] if failed is not None else "?"
        return RunError(f"{self.program.file}: task {name} failed in Spark: {one_line(exc)}")


class RunTimeout(LevelflowError):
    """A run went past `--epoch-timeout` and was cancelled before writing anything."""


def run_program(spark, program_tasks: ProgramTasks, factdir=None, outdir=None, *,
                scheduler="hybrid", jobs: int = 2, trace_out=None, schedule_out=None,
                progress: Progress | None = None, checkpoint: str = "local", plan: str = "auto",
                plan_rows: int | None = None, max_tuples: int | None = MAX_TUPLES,
                driver_rows: int | None = BY_MASTER, timeout: float | None = None
                ) -> RunResult:
    """Return the RunResult of evaluating the program from scratch, writing outputs to outdir.

    `plan` forces how tasks run (auto|driver|local|partitioned|distributed|global, engine/plans);
    `plan_rows` is the input size up to which `auto` runs a task inside Spark tasks, and
    `driver_rows` (None: never; BY_MASTER: by the session's master, plans/driver.rows_on) the
    size up to which it runs one in the driver, which needs no
    Spark: `spark` may be a session.DeferredSession, asked for only by a task that needs it.
    A task that would make more than `max_tuples` tuples (None: no limit) stops the run with
    TupleLimit, before any output is written (engine/guard.py). Past `timeout` seconds (None:
    never) its tasks are cancelled and RunTimeout raised, nothing written.
    """
    from levelflow.engine.plans import check_plan

    check_run_args(jobs, checkpoint)
    check_limit(max_tuples)
    check_plan(program_tasks, plan)
    progress = progress or Progress()
    program = program_tasks.program
    factdir = Path(factdir) if factdir is not None else Path.cwd()
    t_start = time.perf_counter()
    run = _Run(spark, program_tasks, factdir, scheduler, jobs, checkpoint, progress, plan,
               plan_rows, max_tuples, resolved_rows(driver_rows, spark), timeout)
    check_fact_files(program, factdir)
    initial = program_tasks.initial
    progress.start(run.graph.names)
    try:
        run.execute(initial)
        relations = {name: run.store.result(name) for name in program.decls}
        t_out = time.perf_counter()
        output_counts: dict[str, int] = {}
        if outdir is not None and program.outputs:
            progress.phase("writing outputs")
            output_counts = write_outputs(program, relations, outdir, jobs=jobs)
        output_seconds = time.perf_counter() - t_out
        # A relation whose task did not run is empty.
        known = {**run.counts, **output_counts}
        printsize = {name: known.get(name, 0) for name in program.printsize}
    finally:
        progress.stop()
    extra = {v: {"plan": run.stats[v].plan, "spark_jobs": run.spark_jobs.get(v, 0)}
             for v in run.activations if run.stats[v] is not None}
    trace = JobTrace(graph=run.graph, durations=list(run.seconds), initial=tuple(initial),
                     activations=dict(run.activations), name=Path(program.file).stem,
                     processors=jobs, extra=extra)
    if trace_out is not None:
        from levelflow.traces import dump_trace

        dump_trace(trace, trace_out)
    if schedule_out is not None:
        from levelflow.traces import write_schedule

        write_schedule(sorted(run.schedule, key=lambda row: (row[2], row[1])), trace,
                       schedule_out)
    return RunResult(
        relations=relations, ran=len(run.activations), total=len(program_tasks.tasks),
        task_names=run.graph.names, task_seconds=run.seconds,
        wall_seconds=time.perf_counter() - t_start, spark_seconds=sum(run.seconds),
        scheduling_seconds=run.sched_seconds, output_seconds=output_seconds,
        printsize=printsize, output_counts=output_counts, trace=trace, schedule=run.schedule,
        task_stats=run.stats, decls=program.decls)
