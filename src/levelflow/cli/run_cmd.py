"""CLI commands: run (evaluate a Datalog program on Spark, Soufflé-style -F/-D directories)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli import defaults, options
from levelflow.cli.app import app
from levelflow.cli.options import MaxTuples
from levelflow.engine import io_meter
from levelflow.engine.paths import CONFINE_DEFAULT
from levelflow.errors import LevelflowError, UsageError

CONFINE_HELP = ("Refuse an .input file outside -F and an .output file outside -D (off by "
                "default, as in Soufflé, where filename= may name any path).")
MASTER_RUN_HELP = ("Given, every task runs on Spark (else a task with small inputs runs in the "
                   "driver).")
STATE_HELP = ("Keep the maintained state here (epoch 0) for `levelflow update`. Takes "
              "--trace-out, --schedule and --plan distributed (its recursive tasks kept "
              "partitioned, epoch after epoch); not another --plan or --checkpoint reliable: "
              "a state's epochs choose each task's plan as its updates need.")


def scheduler_from_flag(spec: str, graph):
    """Return the scheduler `--scheduler spec` names; a bad spec is one line, exit 2."""
    from levelflow.scheduler import make_scheduler

    try:
        return make_scheduler(spec, graph)
    except LevelflowError as e:
        raise UsageError(f"--scheduler: {e}") from None


def check_run_flags(jobs: int, checkpoint: str, plan: str, local_rows: int, master: str) -> None:
    """Return None if run's flag values are well formed; else raise a UsageError naming one."""
    from levelflow.cli.spark import check_master_url
    from levelflow.engine.checks import CHECKPOINTS
    from levelflow.engine.plans.planner import PLANS

    if jobs < 1:
        raise UsageError(f"--jobs: must be a positive integer, got {jobs}")
    if checkpoint not in CHECKPOINTS:
        raise UsageError(f"--checkpoint: must be one of {', '.join(CHECKPOINTS)}, "
                         f"got {checkpoint!r}")
    if plan not in PLANS:
        raise UsageError(f"--plan: must be one of {', '.join(PLANS)}, got {plan!r}")
    if local_rows < 0:
        raise UsageError(f"--local-rows: must be a number of rows >= 0, got {local_rows}")
    check_master_url(master)


def master_given(ctx: typer.Context) -> bool:
    """Return whether the command line names `--master` (its default is not asked for)."""
    source = ctx.get_parameter_source("master")
    return source is not None and source.name != "DEFAULT"


def missing_dirs(paths) -> list[Path]:
    """Return the directories in and above `paths` that do not exist yet, deepest first."""
    missing: list[Path] = []
    for path in paths:
        for d in (path, *path.parents):
            if d.exists() or d in missing:
                break
            missing.append(d)
    return sorted(missing, key=lambda d: len(d.parts), reverse=True)


def remove_empty(dirs: list[Path]) -> None:
    """Remove those of `dirs` (deepest first) that are still empty: a failed run leaves none."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:  # not empty (something was written) or already gone
            pass


def _prepare(program: Path, factdir: Path, outdir: Path, scheduler: str, jobs: int,
             checkpoint: str, out_files: dict[str, Path | None], confine: bool = False,
             preprocess: tuple = ((), True)):
    """Return (ProgramTasks, scheduler) after every check that needs no Spark; raise one line.

    `out_files` maps a flag to the file it writes: its directory is made now, not after the run.
    """
    from levelflow.engine.paths import check_io_paths, confined_includes
    from levelflow.engine.runner import RunError, check_fact_files
    from levelflow.tasks import build_tasks, load_program

    confined = confined_includes(confine, (factdir, *preprocess[0]))
    program_tasks = build_tasks(load_program(program, preprocess[0], preprocessor=preprocess[1],
                                             confined=confined))
    sched = scheduler_from_flag(scheduler, program_tasks.graph)
    if not factdir.is_dir():
        why = "is not a directory" if factdir.exists() else "does not exist"
        raise RunError(f"{factdir}: error: fact directory {why}")
    check_io_paths(program_tasks.program, factdir, outdir, confine)
    for warning in check_fact_files(program_tasks.program, factdir):
        print(warning, file=sys.stderr)
    check_fact_contents(program_tasks.program, factdir)
    for flag, path in out_files.items():
        make_parent(path, flag, RunError)
    make_outdir(outdir, RunError)
    return program_tasks, sched


def check_fact_contents(program, factdir: Path) -> None:
    """Check every line of every `.input` fact file now, before Spark: one line, file:line."""
    from levelflow.engine.facts import (
        input_missing,
        input_path,
        io_delimiter,
        io_headers,
        validate_facts,
    )
    from levelflow.engine.spark_io import frame_kind

    for name, io in program.inputs.items():
        if frame_kind(io) is not None:  # Parquet or a table: checked by Spark as it is read
            continue
        path = input_path(io, factdir)
        if not input_missing(path):  # a missing file is read as empty (warned already)
            validate_facts(path, program.decls[name], io_delimiter(io), io_headers(io))


def make_parent(path: Path | None, flag: str, error: type[LevelflowError]) -> None:
    """Create the directory a file flag writes into now, before Spark; refuse one that can't be."""
    if path is None:
        return
    if path.is_dir():
        raise error(f"{path}: error: {flag} names a directory, not a file")
    make_outdir(path.parent, error, f"directory of {flag}")


def make_outdir(outdir: Path, error: type[LevelflowError], what: str = "output directory"
                ) -> None:
    """Create the output directory now, before Spark: a path that cannot be one is one line."""
    if outdir.exists() and not outdir.is_dir():
        raise error(f"{outdir}: error: {what} is not a directory")
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise error(f"{outdir}: error: cannot create the {what} ({e.strerror})") from None
    if not os.access(outdir, os.W_OK | os.X_OK):
        raise error(f"{outdir}: error: {what} is not writable")


def outputs_note(program, outdir: Path, counts: dict[str, int], most: int = 6) -> str:
    """Return '; outputs in DIR: R.csv (n), ...' naming the files the run wrote ('' if none)."""
    from levelflow.engine.facts import output_path

    files = [(output_path(io, outdir), counts.get(io.relation),
              f" {io.relation}" if io.option("IO") == "sqlite" else "")  # a database's table
             for io in program.output_directives if io.option("IO") not in ("stdout", "spark")]
    if not files:
        return ""
    named = [f"{os.path.relpath(f, outdir)}{table}" + (f" ({n:,})" if n is not None else "")
             for f, n, table in files[:most]]
    more = f" and {len(files) - most} more" if len(files) > most else ""
    return f"; outputs in {outdir}{os.sep}: {', '.join(named)}{more}"


def _check_state(state: Path | None, trace_out, schedule_out, checkpoint: str,
                 plan: str = "auto") -> None:
    """Return None if `--state` can be honoured with the other flags; else raise one line."""
    if state is None:
        return
    from levelflow.engine.incremental.state.directory import StateDir, StateError

    # Epoch 0 runs as the state's updates will: each task's plan follows what its updates
    # need (a state held where it lives, a counted task's counts), so no plan is forced but
    # distributed, which the state keeps its recursive tasks under (its epochs too).
    flags = (("--checkpoint reliable", checkpoint == "reliable"),
             (f"--plan {plan}", plan not in ("auto", "distributed")))
    unsupported = [flag for flag, value in flags if value]
    if unsupported:  # refused rather than silently ignored
        raise UsageError(f"--state: cannot be combined with {', '.join(unsupported)} (a "
                         f"state's epochs choose each task's plan as its updates need)")
    StateDir(state).check_usable()
    if StateDir(state).exists():
        raise StateError(f"{state}: error: already holds a state; use `levelflow update`")


@contextmanager
def _checkpoints(spark, checkpoint: str):
    """Give `--checkpoint reliable` a temporary checkpoint directory; remove it afterwards."""
    if checkpoint != "reliable":
        yield
        return
    ckdir = tempfile.mkdtemp(prefix="levelflow-checkpoints-")
    spark.sparkContext.setCheckpointDir(ckdir)
    try:
        yield
    finally:
        shutil.rmtree(ckdir, ignore_errors=True)


def write_trace_files(trace, schedule, trace_out: Path | None, schedule_out: Path | None
                      ) -> list[str]:
    """Write the jobtrace/1 and schedule/1 files asked for; return a note per file written."""
    notes = []
    if trace_out is not None:
        from levelflow.traces import dump_trace

        dump_trace(trace, trace_out)
        notes.append(f"trace written to {trace_out}")
    if schedule_out is not None:
        from levelflow.traces import write_schedule

        write_schedule(schedule, trace, schedule_out)
        notes.append(f"schedule written to {schedule_out}")
    return notes


def _evaluate_into_state(spark, program_tasks, sched, factdir, outdir, opts: dict, progress,
                         clock) -> None:
    """Evaluate the program as the state's epoch 0, write the outputs, print the summary."""
    from levelflow.engine.incremental.session import IncrementalSession

    before, t0 = io_meter.snapshot(), time.perf_counter()
    session = IncrementalSession.bootstrap(spark, program_tasks, factdir, opts["state"],
                                           scheduler=sched, jobs=opts["jobs"],
                                           progress=progress, max_tuples=opts["max_tuples"],
                                           driver_rows=opts["driver_rows"],
                                           epoch_timeout=opts["epoch_timeout"],
                                           plan="distributed" if opts["plan"] == "distributed"
                                           else "auto")
    last = session.last
    io = io_meter.snapshot().since(opts["io_before"])
    clock.add("reading", io.reading)
    # Besides shipping, what the bootstrap spent outside its epoch: cutting the shipped
    # frames on the executors and indexing the base facts.
    clock.add("shipping", io.shipping + time.perf_counter() - t0 - last.seconds
              - io_meter.snapshot().since(before).total())
    clock.add("evaluating", last.seconds - last.write_seconds)
    clock.add("state", last.write_seconds)
    counts: dict[str, int] = {}
    if outdir is not None and program_tasks.program.outputs:
        progress.phase("writing outputs")
        with clock.part("writing"):
            counts = session.write_outputs(outdir, jobs=opts["jobs"])
    notes = write_trace_files(last.trace, last.schedule, opts["trace_out"], opts["schedule_out"])
    progress.stop()
    print(clock.line(last.ran, last.total) + outputs_note(program_tasks.program, outdir, counts))
    for note in notes:
        print(note)
    for name in program_tasks.program.printsize:
        print(f"{name}\t{session.size(name)}")


def _evaluate(spark, program_tasks, sched, factdir, outdir, opts: dict, progress,
              clock) -> None:
    """Run the program on `spark` and print the summary with where the outputs went."""
    from levelflow.engine.runner import run_program

    if opts["state"] is not None:  # the run is the maintained state's epoch 0
        _evaluate_into_state(spark, program_tasks, sched, factdir, outdir, opts, progress, clock)
        return
    before = io_meter.snapshot()
    result = run_program(spark, program_tasks, factdir, outdir, scheduler=sched,
                         jobs=opts["jobs"], progress=progress,
                         checkpoint=opts["checkpoint"], plan=opts["plan"],
                         plan_rows=opts["plan_rows"], max_tuples=opts["max_tuples"],
                         driver_rows=opts["driver_rows"], timeout=opts["epoch_timeout"])
    io = io_meter.snapshot().since(opts["io_before"])  # with the check before Spark started
    clock.add("reading", io.reading)
    clock.add("shipping", io.shipping)
    # The tasks read and ship their inputs: that part of their time is counted above, and what
    # they waited for Spark to start is its part "Spark start" already.
    clock.add("evaluating", result.wall_seconds - result.output_seconds
              - io_meter.snapshot().since(before).total() - getattr(spark, "waited", 0.0))
    clock.add("writing", result.output_seconds)
    notes = write_trace_files(result.trace, sorted(result.schedule,
                                                   key=lambda row: (row[2], row[1])),
                              opts["trace_out"], opts["schedule_out"])
    print(clock.line(result.ran, result.total)
          + outputs_note(program_tasks.program, outdir, result.output_counts))
    for note in notes:
        print(note)
    for name, count in result.printsize.items():
        print(f"{name}\t{count}")


@app.command("run")
@options.binds_functors
def run_command(
    ctx: typer.Context,
    program: Annotated[Path, typer.Argument(help="The Datalog program (.dl, Soufflé syntax).")],
    factdir: Annotated[Path, typer.Option(
        "-F", "--fact-dir", help="Directory of the .input fact files.")] = Path("."),
    outdir: Annotated[Path, typer.Option(
        "-D", "--output-dir", help="Directory for the .output files.")] = Path("."),
    scheduler: Annotated[str, typer.Option(
        "--scheduler", "-s", help=defaults.SCHEDULER_HELP)] = defaults.SCHEDULER,
    jobs: Annotated[int, typer.Option("-j", "--jobs", help=defaults.JOBS_HELP)] = defaults.JOBS,
    master: Annotated[str, typer.Option("--master", help=defaults.MASTER_HELP + " "
                                        + MASTER_RUN_HELP)] = defaults.MASTER,
    trace_out: Annotated[Path | None, typer.Option(
        "--trace-out", help="Write the run as a jobtrace/1 file.")] = None,
    schedule_out: Annotated[Path | None, typer.Option(
        "--schedule", help="Write the run's schedule/1 CSV (wall time, slot = worker).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
    checkpoint: Annotated[str, typer.Option(
        "--checkpoint", help="How fixpoint deltas cut their plans: local or reliable.")
    ] = defaults.CHECKPOINT,
    driver_memory: Annotated[str, typer.Option(
        "--driver-memory", help=defaults.DRIVER_MEMORY_HELP)] = defaults.DRIVER_MEMORY,
    spark_log: Annotated[Path | None, typer.Option(
        "--spark-log", help="Keep Spark's own log in this file (default: a temp file, "
        "removed unless Spark failed).")] = None,
    state: Annotated[Path | None, typer.Option("--state", help=STATE_HELP)] = None,
    plan: Annotated[str, typer.Option("--plan", help=defaults.PLAN_HELP)] = defaults.PLAN,
    local_rows: Annotated[int, typer.Option("--local-rows", help=defaults.LOCAL_ROWS_HELP)
                          ] = defaults.LOCAL_ROWS,
    confine: Annotated[bool, typer.Option("--confine", help=CONFINE_HELP)] = CONFINE_DEFAULT,
    max_tuples: MaxTuples = defaults.MAX_TUPLES,
    include: options.IncludeDirs = None,
    no_preprocessor: options.NoPreprocessor = False,
    functors: options.Functors = None,
    epoch_timeout: options.EpochTimeout = None,
) -> None:
    """Evaluate PROGRAM from scratch on Spark; print 'ran k of N' with the wall time and its
    parts (Spark start, reading, shipping, evaluating, writing), the outputs and .printsize
    counts."""
    from levelflow.cli.spark import inputs_are_large
    from levelflow.cli.timing import WallClock

    clock, io_before = WallClock(), io_meter.snapshot()
    check_run_flags(jobs, checkpoint, plan, local_rows, master)
    deadline = options.epoch_deadline(epoch_timeout)
    _check_state(state, trace_out, schedule_out, checkpoint, plan)
    files = [p.parent for p in (trace_out, schedule_out) if p is not None]
    made = missing_dirs([outdir, *files])  # removed again if the run fails before writing
    opts = {"state": state, "jobs": jobs, "trace_out": trace_out,
            "schedule_out": schedule_out, "checkpoint": checkpoint, "plan": plan,
            "plan_rows": local_rows, "master": master,
            # A master asked for is where every task runs: no task in the driver.
            "driver_rows": None if master_given(ctx) else defaults.BY_MASTER,
            "driver_memory": driver_memory, "spark_log": spark_log, "quiet": quiet,
            "max_tuples": max_tuples, "epoch_timeout": deadline, "io_before": io_before,
            # Spark starts with the command where it will likely be needed, else on first use.
            "eager": master_given(ctx) or plan not in ("auto", "driver")
            or inputs_are_large([factdir])}
    try:
        with _spark(opts, clock) as (spark, progress):
            # Spark starts meanwhile, on its own thread: a task that needs it does not wait
            # for the program to be read.
            program_tasks, sched = _prepare(program, factdir, outdir, scheduler, jobs,
                                            checkpoint,
                                            {"--trace-out": trace_out, "--schedule": schedule_out},
                                            confine, (include or (), not no_preprocessor))
            _run_on_spark(spark, progress, program_tasks, sched, factdir, outdir, opts, clock)
    except BaseException:
        remove_empty(made)
        raise


@contextmanager
def _spark(opts: dict, clock):
    """Yield (the command's SparkSession, starting in the background; the live line); a Spark
    failure names Spark's log."""
    from levelflow.cli.spark import spark_session
    from levelflow.engine.progress import make_progress
    from levelflow.engine.runner import RunError
    from levelflow.engine.session import spark_in_use

    spark_log, master = opts["spark_log"], opts["master"]
    log = spark_log or Path(tempfile.mkstemp(prefix="levelflow-spark-", suffix=".log")[1])
    keep_log, progress = spark_log is not None, make_progress(opts["quiet"])
    spark = None
    try:
        with spark_session(master, opts["driver_memory"], log, clock, opts["eager"]) as spark, \
                _checkpoints(spark, opts["checkpoint"]):
            yield spark, progress
    except RunError as e:
        if spark is None or not spark_in_use(spark):  # refused before Spark was used
            raise
        keep_log = True  # a Spark failure: its log says why
        raise RunError(f"{e} (Spark log: {log})") from None
    finally:
        progress.stop()
        if not keep_log:
            log.unlink(missing_ok=True)


def _run_on_spark(spark, progress, program_tasks, sched, factdir, outdir, opts: dict,
                  clock) -> None:
    """Evaluate on `spark`, with the live line."""
    from levelflow.engine.plans import check_plan

    check_plan(program_tasks, opts["plan"])  # a forced plan that does not apply: before Spark
    progress.start(program_tasks.graph.names)
    progress.watch(spark)
    _evaluate(spark, program_tasks, sched, factdir, outdir, opts, progress, clock)
