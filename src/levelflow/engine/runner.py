"""The dispatch loop: a scheduler decides which tasks are ready, worker threads evaluate them.

Constant: the program's tasks and graph; per edge, which relations of the parent the child reads;
the initial tasks.
Changes (main thread only): the relation store (name -> materialized DataFrame), the free worker
slots, the futures in flight, per-task wall times and who activated whom.

Policy (the order) is the scheduler's; evaluating one task is `evaluate_task`'s. This module only
moves tasks between them: get_ready(idle) -> submit; wait for the first finish -> done(v, changed).
A from-scratch run activates the tasks that have input of their own; a finished task activates
each child that reads one of its relations that came out non-empty ("changed" from empty).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from levelflow.engine.progress import Progress
from levelflow.errors import LevelflowError
from levelflow.tasks.ast import Atom, Negation, Program
from levelflow.tasks.tasks import ProgramTasks
from levelflow.traces.model import JobTrace

CHECKPOINTS = ("local", "reliable")


class RunError(LevelflowError):
    """A run cannot start or a task failed in Spark; str() is one line naming the task or flag."""


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

    def relation(self, name: str):
        """Return the DataFrame of relation `name` (columns c0..c{n-1})."""
        try:
            return self.relations[name]
        except KeyError:
            raise KeyError(f"no relation named {name!r}") from None

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

    task: int
    slot: int
    start: float
    end: float
    relations: dict
    counts: dict[str, int]  # tuples per relation of the task
    stats: object  # the evaluator's EvalStats (iterations, rows per round), or None


# ---------------------------------------------------------------------------------------------
# Static analysis of the program: which tasks start, which edge carries which relations.


def _body_relations(rules) -> set[str]:
    """Return the names of relations read (positively or negatively) by the rules' bodies."""
    names: set[str] = set()
    for rule in rules:
        for lit in rule.body:
            if isinstance(lit, Atom):
                names.add(lit.relation)
            elif isinstance(lit, Negation):
                names.add(lit.atom.relation)
    return names


def initial_tasks(program_tasks: ProgramTasks) -> list[int]:
    """Return the ids of tasks a from-scratch run activates: input, facts, or atom-free rules."""
    fact_heads = {h.relation for r in program_tasks.program.facts for h in r.heads}
    initial = []
    for task in program_tasks.tasks:
        # A rule with no positive body atom (a fact, `p(1) :- 1 < 2.`, `p() :- !q().`) derives
        # tuples without any input changing, so nothing upstream would ever activate its task.
        if (task.input or any(r in fact_heads for r in task.relations)
                or any(not any(isinstance(lit, Atom) for lit in rule.body) for rule in task.rules)):
            initial.append(task.id)
    return initial


def edge_reads(program_tasks: ProgramTasks) -> list[list[tuple[int, tuple[int, ...]]]]:
    """Return per task v a list of (child c, positions in v.relations that c's rules read)."""
    tasks = program_tasks.tasks
    reads = [_body_relations(t.rules) for t in tasks]
    out: list[list[tuple[int, tuple[int, ...]]]] = []
    for v, task in enumerate(tasks):
        row = []
        for c in program_tasks.graph.children[v]:
            pos = tuple(i for i, r in enumerate(task.relations) if r in reads[c])
            row.append((c, pos))
        out.append(row)
    return out


def check_fact_files(program: Program, factdir) -> None:
    """Return None if every `.input` fact file exists; else raise FactError naming the first."""
    from levelflow.engine.facts import FactError, input_path

    for io in program.inputs.values():
        path = input_path(io, Path(factdir))
        if not path.is_file():
            # Same shape as facts.read_facts' errors, checked before any Spark job starts.
            why = "a directory" if path.is_dir() else "not a regular file" if path.exists() \
                else "no such file"
            raise FactError(f"{path}:1:1: error: cannot read fact file for relation "
                            f"{io.relation} ({why})")


def check_run_args(jobs: int, checkpoint: str) -> None:
    """Return None if the run's flags are valid; else raise RunError naming the flag."""
    if not isinstance(jobs, int) or jobs < 1:
        raise RunError(f"jobs: must be a positive integer, got {jobs!r}")
    if checkpoint not in CHECKPOINTS:
        raise RunError(f"checkpoint: must be one of {', '.join(CHECKPOINTS)}, got {checkpoint!r}")


def _one_line(exc: BaseException) -> str:
    """Return the first non-empty line of an exception's message (a JVM error: its root cause)."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:  # py4j's own message is only "An error occurred while calling o42.count"
            while java.getCause() is not None:
                java = java.getCause()
            exc = Exception(f"{java.getClass().getSimpleName()}: {java.getMessage()}")
        except Exception:  # noqa: BLE001 - the gateway may be gone; fall back to the message
            pass
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def _spark_error_types() -> tuple[type, ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


# ---------------------------------------------------------------------------------------------
# The loop.


class _Run:
    """One run's state; `execute` is the loop, `_evaluate` what a worker thread does."""

    def __init__(self, spark, program_tasks: ProgramTasks, factdir, scheduler, jobs: int,
                 checkpoint: str, progress: Progress, plan: str = "auto",
                 plan_rows: int | None = None) -> None:
        from levelflow.scheduler import make_scheduler

        self.spark = spark
        self.pt = program_tasks
        self.program = program_tasks.program
        self.factdir = Path(factdir) if factdir is not None else None
        self.graph = program_tasks.graph
        self.sched = (make_scheduler(scheduler, self.graph) if isinstance(scheduler, str)
                      else scheduler)
        self.jobs = jobs
        self.checkpoint = checkpoint
        self.plan = plan
        self.plan_rows = plan_rows
        self.progress = progress
        self.cancel = threading.Event()
        self.tag = f"levelflow-{uuid.uuid4().hex[:12]}"
        n = len(program_tasks.tasks)
        self.reads_from = [sorted(_body_relations(t.rules) - set(t.relations))
                           for t in program_tasks.tasks]
        self.edges = edge_reads(program_tasks)
        self.store: dict = {}  # relation name -> DataFrame of a task that ran
        self.empties: dict = {}  # relation name -> empty DataFrame, made on demand
        self.counts: dict[str, int] = {}  # relation name -> tuples, for relations in store
        self.stats: list = [None] * n  # per task: the evaluator's EvalStats, if it ran
        self.seconds = [0.0] * n
        self.activations: dict[int, tuple[int, ...]] = {}
        self.schedule: list[tuple[int, int, float, float]] = []
        self.sched_seconds = 0.0
        self.t0 = 0.0
        self.failed: int | None = None  # the task whose result is being collected

    def _relation(self, name: str):
        """Return the computed DataFrame of `name`, or an empty one if its task did not run."""
        df = self.store.get(name)
        if df is None:
            df = self.empties.get(name)
            if df is None:
                from levelflow.engine.facts import empty_relation

                df = self.empties[name] = empty_relation(self.spark, self.program.decls[name])
        return df

    def _evaluate(self, v: int, slot: int, inputs: Mapping, counts: Mapping) -> _Outcome:
        """Evaluate task v in a worker thread, its Spark jobs in their own pool and tagged."""
        from levelflow.engine.plans import LOCAL_ROWS, choose_plan, evaluate_planned, input_rows

        task = self.pt.tasks[v]
        sc = self.spark.sparkContext
        # Local properties live on the JVM thread behind this Python thread, and pool threads
        # do not inherit them, so set them here, each time (threads are reused).
        sc.setLocalProperty("spark.scheduler.pool", f"levelflow-{slot}")
        sc.setLocalProperty("spark.job.description", f"levelflow task {task.name}")
        sc.addJobTag(self.tag)
        sc.setLocalProperty("spark.jobGroup.id", self.job_group(v))  # counts the task's jobs
        sc.setInterruptOnCancel(True)  # a cancelled run should not wait for long tasks
        start = time.perf_counter()
        try:
            rows = input_rows(self.program, task, counts, self.factdir)
            plan = choose_plan(task, self.program.decls, rows, self.plan,
                               self.plan_rows or LOCAL_ROWS)
            out = evaluate_planned(self.spark, self.program, task, inputs, self.factdir,
                                   plan=plan, checkpoint=self.checkpoint, cancel=self.cancel,
                                   counts=counts)
            stats = getattr(out, "stats", None)
            if stats is not None:
                stats.plan = plan.kind
            known = getattr(stats, "rows", {})
            # The evaluator counts what it materializes; count here only what it did not.
            rows = {r: known[r] if r in known else out[r].count() for r in task.relations}
        finally:
            sc.removeJobTag(self.tag)
            sc.setInterruptOnCancel(False)
            sc.setLocalProperty("spark.scheduler.pool", None)
            sc.setLocalProperty("spark.job.description", None)
            sc.setLocalProperty("spark.jobGroup.id", None)
        return _Outcome(v, slot, start, time.perf_counter(), dict(out), rows, stats)

    def job_group(self, v: int) -> str:
        """Return the Spark job group of task v's jobs in this run."""
        return f"{self.tag}-task-{v}"

    def spark_jobs(self) -> dict[int, int]:
        """Return the number of Spark jobs each task that ran started (Spark's status store)."""
        tracker = self.spark.sparkContext.statusTracker()
        return {v: len(tracker.getJobIdsForGroup(self.job_group(v))) for v in self.activations}

    def _finish(self, out: _Outcome) -> list[int]:
        """Store a finished task's relations; return the children it activates."""
        v = out.task
        task = self.pt.tasks[v]
        for r in task.relations:
            self.store[r] = out.relations[r]
        self.counts.update(out.counts)
        self.stats[v] = out.stats
        self.seconds[v] = out.end - out.start
        self.schedule.append((v, out.slot, out.start - self.t0, out.end - self.t0))
        # From scratch every relation starts empty, so "changed" means "came out non-empty".
        nonempty = [out.counts[r] > 0 for r in task.relations]
        activated = [c for c, pos in self.edges[v] if any(nonempty[i] for i in pos)]
        self.activations[v] = tuple(activated)
        return activated

    def _timed(self, fn, *args):
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.sched_seconds += time.perf_counter() - t

    def execute(self, initial: Sequence[int]) -> None:
        """Run the loop until the scheduler has nothing left; raise the first task failure."""
        sched, progress = self.sched, self.progress
        self.t0 = time.perf_counter()
        progress.activated(initial)
        self._timed(sched.activate, initial)
        free = list(range(self.jobs - 1, -1, -1))  # worker slots; pop() hands out slot 0 first
        inflight: dict[Future, tuple[int, int]] = {}  # future -> (task, slot)
        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="levelflow-worker")
        try:
            while self._timed(sched.is_active):
                if free:
                    for v in self._timed(sched.get_ready, len(free)):
                        inputs = {r: self._relation(r) for r in self.reads_from[v]}
                        counts = {r: self.counts.get(r, 0) for r in self.reads_from[v]}
                        slot = free.pop()
                        fut = pool.submit(self._evaluate, v, slot, inputs, counts)
                        inflight[fut] = (v, slot)
                        progress.started(v)
                if not inflight:
                    raise RuntimeError(f"scheduler {type(sched).__name__} stalled: tasks are "
                                       "activated but none is ready and none is running")
                finished, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in finished:
                    v, slot = inflight.pop(fut)
                    free.append(slot)
                    self.failed = v
                    out = fut.result()  # a failure raises here and cancels the rest below
                    self.failed = None
                    activated = self._finish(out)
                    progress.finished(out.task, out.end - out.start)
                    progress.activated(activated)
                    self._timed(sched.done, out.task, activated)
        except BaseException as exc:
            self._abort(inflight)
            error = self._user_error(exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _abort(self, inflight: dict[Future, tuple[int, int]]) -> None:
        """Cancel this run's Spark jobs and wait until no worker is still running."""
        self.cancel.set()
        pending = set(inflight)
        while pending:
            # Again and again: a worker may submit its next job after a cancel went out.
            try:
                self.spark.sparkContext.cancelJobsWithTag(self.tag)
            except Exception:  # noqa: BLE001 - the context may be gone; the first error matters
                pass
            pending = wait(pending, timeout=0.5).not_done

    def _user_error(self, exc: BaseException) -> BaseException:
        """Return the exception to raise: user errors as they are, Spark failures as RunError."""
        if isinstance(exc, LevelflowError) or not isinstance(exc, _spark_error_types()):
            return exc
        name = self.graph.names[self.failed] if self.failed is not None else "?"
        return RunError(f"{self.program.file}: task {name} failed in Spark: {_one_line(exc)}")


def run_program(spark, program_tasks: ProgramTasks, factdir=None, outdir=None, *,
                scheduler="hybrid", jobs: int = 2, trace_out=None, schedule_out=None,
                progress: Progress | None = None, checkpoint: str = "local", plan: str = "auto",
                plan_rows: int | None = None) -> RunResult:
    """Return the RunResult of evaluating the program from scratch, writing outputs to outdir.

    `plan` forces how tasks run (auto|local|partitioned|global; see engine/plans); `plan_rows`
    is the input size up to which `auto` runs a task inside Spark tasks.
    """
    from levelflow.engine.plans import check_plan

    check_run_args(jobs, checkpoint)
    check_plan(program_tasks, plan)
    progress = progress or Progress()
    program = program_tasks.program
    factdir = Path(factdir) if factdir is not None else Path.cwd()
    t_start = time.perf_counter()
    run = _Run(spark, program_tasks, factdir, scheduler, jobs, checkpoint, progress, plan,
               plan_rows)
    check_fact_files(program, factdir)
    initial = initial_tasks(program_tasks)
    progress.start(run.graph.names)
    try:
        run.execute(initial)
        relations = {name: run._relation(name) for name in program.decls}
        t_out = time.perf_counter()
        output_counts: dict[str, int] = {}
        if outdir is not None and program.outputs:
            progress.phase("writing outputs")
            output_counts = write_outputs(program, relations, outdir, jobs=jobs)
        output_seconds = time.perf_counter() - t_out
        known = {**run.counts, **output_counts}
        printsize = {name: (known[name] if name in known
                            else relations[name].count()) for name in program.printsize}
    finally:
        progress.stop()
    jobs_per_task = run.spark_jobs()
    extra = {v: {"plan": run.stats[v].plan, "spark_jobs": jobs_per_task[v]}
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
        task_stats=run.stats)


# ---------------------------------------------------------------------------------------------
# Outputs: all or nothing.


def write_outputs(program: Program, relations: Mapping, outdir, *, jobs: int = 1) -> dict:
    """Return tuple counts per output relation after writing them all, or raise leaving none.

    `IO=stdout` outputs are printed as Soufflé prints them, framed by their name, once every
    file is in place.
    """
    from levelflow.engine.facts import io_delimiter, io_headers, output_path, write_relation

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    # Each file goes to a hidden temp file beside its final path (same filesystem), and is
    # renamed into place only once every output has been written.
    plan = []
    for io in program.output_directives:
        name = io.relation
        stdout = io.option("IO") == "stdout"
        final = None if stdout else output_path(io, outdir)
        where = outdir if stdout else final.parent
        tmp = where / f".{name}.levelflow-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        plan.append((name, io, final, tmp))

    def write(item):
        name, io, final, tmp = item
        tmp.parent.mkdir(parents=True, exist_ok=True)
        return write_relation(relations[name], program.decls[name], tmp, io_delimiter(io),
                              headers=io_headers(io))

    try:
        if jobs > 1 and len(plan) > 1:
            with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="levelflow-out") as ex:
                counts = list(ex.map(write, plan))
        else:
            counts = [write(item) for item in plan]
        for name, _, final, tmp in plan:
            if final is None:
                sys.stdout.write(f"---------------\n{name}\n===============\n"
                                 f"{tmp.read_text(encoding='utf-8')}===============\n")
                tmp.unlink()
            else:
                os.replace(tmp, final)
    except BaseException:
        for _, _, _, tmp in plan:
            tmp.unlink(missing_ok=True)
        raise
    return {name: count for (name, *_), count in zip(plan, counts, strict=True)}
