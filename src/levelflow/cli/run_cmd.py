"""CLI commands: run (evaluate a Datalog program on Spark, Soufflé-style -F/-D directories)."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli import defaults, options
from levelflow.cli.app import app
from levelflow.engine.paths import CONFINE_DEFAULT
from levelflow.errors import LevelflowError

CONFINE_HELP = ("Refuse an .input file outside -F and an .output file outside -D (off by "
                "default, as in Soufflé, where filename= may name any path).")


def scheduler_from_flag(spec: str, graph):
    """Return the scheduler `--scheduler spec` names; a bad spec is one line, exit 1."""
    from levelflow.engine.runner import RunError
    from levelflow.scheduler import make_scheduler

    try:
        return make_scheduler(spec, graph)
    except LevelflowError as e:
        raise RunError(f"--scheduler: {e}") from None  # a bad flag: exit 1 like the others


def _prepare(program: Path, factdir: Path, outdir: Path, scheduler: str, jobs: int,
             checkpoint: str, out_files: dict[str, Path | None], confine: bool = False,
             preprocess: tuple = ((), True)):
    """Return (ProgramTasks, scheduler) after every check that needs no Spark; raise one line.

    `out_files` maps a flag to the file it writes: its directory is made now, not after the run.
    """
    from levelflow.engine.paths import check_io_paths
    from levelflow.engine.runner import RunError, check_fact_files, check_run_args
    from levelflow.tasks import build_tasks, load_program

    check_run_args(jobs, checkpoint)
    program_tasks = build_tasks(load_program(program, preprocess[0], preprocessor=preprocess[1]))
    sched = scheduler_from_flag(scheduler, program_tasks.graph)
    if not factdir.is_dir():
        why = "is not a directory" if factdir.exists() else "does not exist"
        raise RunError(f"{factdir}: error: fact directory {why}")
    check_io_paths(program_tasks.program, factdir, outdir, confine)
    check_fact_files(program_tasks.program, factdir)
    check_fact_contents(program_tasks.program, factdir)
    for flag, path in out_files.items():
        make_parent(path, flag, RunError)
    make_outdir(outdir, RunError)
    return program_tasks, sched


def check_fact_contents(program, factdir: Path) -> None:
    """Check every line of every `.input` fact file now, before Spark: one line, file:line."""
    from levelflow.engine.facts import input_path, io_delimiter, io_headers, validate_facts

    for name, io in program.inputs.items():
        validate_facts(input_path(io, factdir), program.decls[name], io_delimiter(io),
                       io_headers(io))


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

    files = [(output_path(io, outdir), counts.get(io.relation)) for io in program.output_directives
             if io.option("IO") != "stdout"]
    if not files:
        return ""
    named = [f"{os.path.relpath(f, outdir)}" + (f" ({n:,})" if n is not None else "")
             for f, n in files[:most]]
    more = f" and {len(files) - most} more" if len(files) > most else ""
    return f"; outputs in {outdir}{os.sep}: {', '.join(named)}{more}"


def _check_state(state: Path | None, trace_out, schedule_out, checkpoint: str,
                 plan: str = "auto") -> None:
    """Return None if `--state` can be honoured with the other flags; else raise one line."""
    from levelflow.engine.incremental.state import StateDir, StateError
    from levelflow.engine.runner import RunError

    if state is None:
        return
    flags = (("--trace-out", trace_out), ("--schedule", schedule_out),
             ("--checkpoint reliable", checkpoint == "reliable"),
             (f"--plan {plan}", plan != "auto"))  # epoch 0 runs as the state's updates will
    unsupported = [flag for flag, value in flags if value]
    if unsupported:  # refused rather than silently ignored
        raise RunError(f"--state: cannot be combined with {', '.join(unsupported)}")
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


def _evaluate(spark, program_tasks, sched, factdir, outdir, opts: dict, progress) -> None:
    """Run the program on `spark` and print the summary with where the outputs went."""
    from levelflow.engine.runner import run_program

    if opts["state"] is not None:  # the run is the maintained state's epoch 0
        from levelflow.engine.incremental.session_api import run_with_state

        progress.stop()
        run_with_state(spark, program_tasks, factdir, outdir, opts["state"], sched, opts["jobs"])
        return
    result = run_program(spark, program_tasks, factdir, outdir, scheduler=sched,
                         jobs=opts["jobs"], trace_out=opts["trace_out"],
                         schedule_out=opts["schedule_out"], progress=progress,
                         checkpoint=opts["checkpoint"], plan=opts["plan"],
                         plan_rows=opts["plan_rows"])
    print(result.summary() + outputs_note(program_tasks.program, outdir, result.output_counts))
    for name, count in result.printsize.items():
        print(f"{name}\t{count}")


@app.command("run")
def run_command(
    program: Annotated[Path, typer.Argument(help="The Datalog program (.dl, Soufflé syntax).")],
    factdir: Annotated[Path, typer.Option(
        "-F", "--fact-dir", help="Directory of the .input fact files.")] = Path("."),
    outdir: Annotated[Path, typer.Option(
        "-D", "--output-dir", help="Directory for the .output files.")] = Path("."),
    scheduler: Annotated[str, typer.Option(
        "--scheduler", "-s", help=defaults.SCHEDULER_HELP)] = defaults.SCHEDULER,
    jobs: Annotated[int, typer.Option("-j", "--jobs", help=defaults.JOBS_HELP)] = defaults.JOBS,
    master: Annotated[str, typer.Option("--master", help=defaults.MASTER_HELP)
                      ] = defaults.MASTER,
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
    state: Annotated[Path | None, typer.Option(
        "--state", help="Keep the maintained state here (epoch 0) for `levelflow update`.")
    ] = None,
    plan: Annotated[str, typer.Option("--plan", help=defaults.PLAN_HELP)] = defaults.PLAN,
    local_rows: Annotated[int, typer.Option("--local-rows", help=defaults.LOCAL_ROWS_HELP)
                          ] = defaults.LOCAL_ROWS,
    confine: Annotated[bool, typer.Option("--confine", help=CONFINE_HELP)] = CONFINE_DEFAULT,
    include: options.IncludeDirs = None,
    no_preprocessor: options.NoPreprocessor = False,
) -> None:
    """Evaluate PROGRAM from scratch on Spark; print 'ran k of N', outputs, .printsize counts."""
    from levelflow.cli.spark import spark_session
    from levelflow.engine.plans import check_plan
    from levelflow.engine.progress import make_progress
    from levelflow.engine.runner import RunError

    program_tasks, sched = _prepare(program, factdir, outdir, scheduler, jobs, checkpoint,
                                    {"--trace-out": trace_out, "--schedule": schedule_out},
                                    confine, (include or (), not no_preprocessor))
    _check_state(state, trace_out, schedule_out, checkpoint, plan)
    check_plan(program_tasks, plan)  # a forced plan that does not apply: before Spark starts
    log = spark_log or Path(tempfile.mkstemp(prefix="levelflow-spark-", suffix=".log")[1])
    keep_log, progress = spark_log is not None, make_progress(quiet)
    opts = {"state": state, "jobs": jobs, "trace_out": trace_out, "schedule_out": schedule_out,
            "checkpoint": checkpoint, "plan": plan, "plan_rows": local_rows}
    try:
        progress.start(program_tasks.graph.names)
        progress.phase(f"starting Spark ({master})")
        with spark_session(master, driver_memory, log) as spark, _checkpoints(spark, checkpoint):
            progress.phase("")
            _evaluate(spark, program_tasks, sched, factdir, outdir, opts, progress)
    except RunError as e:
        keep_log = True  # a Spark failure: its log says why
        raise RunError(f"{e} (Spark log: {log})") from None
    finally:
        progress.stop()
        if not keep_log:
            log.unlink(missing_ok=True)
