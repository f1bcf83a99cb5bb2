"""CLI commands: update (apply inserted / removed input facts to a maintained state, one epoch)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli import defaults, options
from levelflow.cli.app import app
from levelflow.cli.defaults import BY_MASTER
from levelflow.cli.run_cmd import master_given
from levelflow.engine.paths import CONFINE_DEFAULT
from levelflow.errors import LevelflowError, UsageError

CONFINE_HELP = ("Refuse an .output file outside -D, symbolic links followed (off by default, "
                "as in Soufflé; the facts to insert or remove are the files you name).")
NOTHING = "nothing to do: no fact to insert or remove; the state is unchanged"


class UpdateArgsError(LevelflowError):
    """A bad flag or directory given to `levelflow update`."""


def print_epoch(result, program, out=None, summary: str | None = None) -> None:
    """Print per output relation the tuples added and removed, the strategies and the summary
    (`summary`, else the epoch's own 'ran k of N tasks in S s')."""
    out = out or sys.stdout  # looked up now: a caller (or a test) may have replaced it
    for name in program.outputs:
        d = result.deltas.get(name)
        added, removed = (d.added_rows, d.removed_rows) if d is not None else (0, 0)
        print(f"{name}\t+{added}\t-{removed}", file=out)
    for note in result.notes:
        print(note, file=out)
    if result.status:  # a program change: what became of each task
        from levelflow.engine.incremental.program_change import status_lines

        for line in status_lines(result):
            print(line, file=out)
    if result.strategies:
        print("strategies: " + ", ".join(f"{t}={s}" for t, s in result.strategies.items()),
              file=out)
    print(summary or result.summary(), file=out)


def check_switch(switch: float, strategy: str, large_change: float) -> None:
    """Return None if the elastic flags are valid; else raise a UsageError naming the flag."""
    from levelflow.engine.incremental.elastic import MODES

    if not 0 <= switch:
        raise UsageError(f"--switch: must be a fraction >= 0, got {switch}")
    if not 0 < large_change:
        raise UsageError(f"--large-change: must be a fraction > 0, got {large_change}")
    if strategy not in MODES:
        raise UsageError(f"--strategy: must be one of {', '.join(MODES)}, got {strategy!r}")


def check_session_flags(flags: dict, master: str) -> None:
    """Return None if the flags update, shell and serve share are well formed; else one line."""
    from levelflow.cli.spark import check_master_url

    check_switch(flags["switch"], flags["strategy"], flags["large_change"])
    if flags["jobs"] < 1:
        raise UsageError(f"--jobs: must be a positive integer, got {flags['jobs']}")
    if flags["keep_epochs"] is not None and flags["keep_epochs"] < 1:
        raise UsageError(f"--keep-epochs: must be a positive integer, got {flags['keep_epochs']}")
    check_master_url(master)


def _prepare(statedir: Path, ops_files: tuple, flags: dict):
    """Return (ProgramTasks, update ops, StateDir) after every check that needs no Spark."""
    from levelflow.cli.run_cmd import make_outdir, make_parent, scheduler_from_flag
    from levelflow.engine.incremental.state.directory import StateDir
    from levelflow.engine.incremental.updates import read_updates
    from levelflow.engine.paths import check_io_paths
    from levelflow.tasks import build_tasks, parse_stored

    if flags["facts"] is not None and flags["program"] is None:
        raise UsageError("--facts: only with --program (the new input relations' facts)")
    state = StateDir(statedir, keep=flags["keep_epochs"])
    data = state.manifest()  # raises a one-line StateError if there is no state
    program_tasks = build_tasks(parse_stored(data["program"], data["program_file"]))
    state.verify(None, program_tasks.program, data, listing=True)  # missing, cut: before Spark
    if flags["program"] is not None:  # checked as `run` checks it; the state is untouched
        from levelflow.engine.incremental.program_change import load_new_program

        program_tasks = load_new_program(flags["program"], flags["facts"])
    check_io_paths(program_tasks.program, None, flags["outdir"], flags["confine"])
    scheduler_from_flag(flags["scheduler"], program_tasks.graph)  # checked before Spark starts
    # Every file is parsed and checked before Spark starts: a bad line refuses the whole epoch.
    ops = read_updates(program_tasks.program, *ops_files)
    make_parent(flags["trace_out"], "--trace-out", UpdateArgsError)
    make_parent(flags["schedule_out"], "--schedule", UpdateArgsError)
    if flags["outdir"] is not None:
        make_outdir(flags["outdir"], UpdateArgsError)
    return program_tasks, ops, state


def _apply(spark, state, ops, program, flags: dict, progress, clock) -> None:
    """Commit `ops` as one epoch on `spark`, print it, and write what the flags ask for."""
    from levelflow.cli.run_cmd import write_trace_files
    from levelflow.engine.incremental.session import IncrementalSession

    progress.watch(spark)
    with clock.part("opening the state"):
        session = IncrementalSession.open(
            spark, state, scheduler=flags["scheduler"], jobs=flags["jobs"],
            mode=flags["strategy"], switch=flags["switch"], large_change=flags["large_change"],
            max_tuples=flags["max_tuples"], driver_rows=flags.get("driver_rows", BY_MASTER),
            epoch_timeout=flags["epoch_timeout"],
            warm=False)  # one epoch: it ships the states itself
    if not ops and flags["program"] is None:  # only -D: write the outputs, no new epoch
        progress.phase("writing outputs")
        session.write_outputs(flags["outdir"])
        progress.stop()
        print(f"{NOTHING}; outputs written to {flags['outdir']}")
        return
    session.extend(ops)
    progress.phase("moving to the new program as one epoch" if flags["program"]
                   else f"applying {len(ops)} change(s) as one epoch")
    with clock.part("epoch"):
        if flags["program"] is not None:
            result = session.replace_program(flags["program"], flags["facts"],
                                             progress=progress)
        else:
            result = session.commit(progress=progress)  # tasks done and running, as `run` shows
    epoch_wall = clock.parts.pop("epoch")  # split into the tasks and the durable write
    clock.add("tasks", result.seconds - result.write_seconds)
    clock.add("state", epoch_wall - (result.seconds - result.write_seconds))
    if (outdir := flags["outdir"]) is not None:
        progress.phase("writing outputs")
        try:
            with clock.part("outputs"):
                session.write_outputs(outdir)
        except OSError as e:
            progress.stop()
            print_epoch(result, program)
            raise UpdateArgsError(f"{outdir}: error: epoch {result.epoch} was applied, but "
                                  f"its outputs could not be written ({e})") from None
    notes = write_trace_files(result.trace, result.schedule, flags["trace_out"],
                              flags["schedule_out"])
    progress.stop()  # the live line goes before the epoch's lines are printed
    print_epoch(result, program, summary=clock.line(result.ran, result.total))
    for note in notes:
        print(note)


@app.command("update")
@options.binds_functors
def update_command(
    ctx: typer.Context,
    statedir: Annotated[Path, typer.Argument(help="State directory made by `run --state`.")],
    insert: Annotated[list[Path] | None, typer.Option(
        "--insert", metavar="FILE", help="Facts to insert: REL.facts or the file its .input "
        "names (Soufflé format), or a +r(..)/-r(..) diff file. Repeatable.")] = None,
    remove: Annotated[list[Path] | None, typer.Option(
        "--remove", metavar="FILE", help="Facts to remove: REL.facts, or a diff file (signs "
        "flipped). Repeatable.")] = None,
    outdir: Annotated[Path | None, typer.Option(
        "-D", "--output-dir", help="Write every .output relation as it now stands here.")] = None,
    switch: options.Switch = defaults.SWITCH,
    strategy: options.Strategy = defaults.STRATEGY,
    large_change: options.LargeChange = defaults.LARGE_CHANGE,
    scheduler: options.Scheduler = defaults.SCHEDULER,
    jobs: options.Jobs = defaults.JOBS,
    master: options.Master = defaults.MASTER,
    driver_memory: options.DriverMemory = defaults.DRIVER_MEMORY,
    trace_out: Annotated[Path | None, typer.Option(
        "--trace-out", help="Write the epoch as a jobtrace/1 file: the tasks its change "
        "activated, who activated whom, how long each took.")] = None,
    schedule_out: Annotated[Path | None, typer.Option(
        "--schedule", help="Write the epoch's schedule/1 CSV (wall time, slot = worker).")
    ] = None,
    keep_epochs: options.KeepEpochs = None,
    confine: Annotated[bool, typer.Option("--confine", help=CONFINE_HELP)] = CONFINE_DEFAULT,
    program: Annotated[Path | None, typer.Option(
        "--program", metavar="NEW.dl", help="Move the state to this program in the same epoch: "
        "unchanged tasks keep their state, changed ones are updated or recomputed.")] = None,
    facts: Annotated[Path | None, typer.Option(
        "--facts", metavar="DIR", help="With --program: where new input relations' facts are "
        "(else they start empty).")] = None,
    max_tuples: options.MaxTuples = defaults.MAX_TUPLES,
    include: options.IncludeDirs = None,
    no_preprocessor: options.NoPreprocessor = False,
    functors: options.Functors = None,
    epoch_timeout: options.EpochTimeout = None,
) -> None:
    """Apply the changes as one epoch; print per output relation +added -removed, 'ran k of N'.

    With no change at all it says so and starts nothing."""
    flags = {"switch": switch, "strategy": strategy, "large_change": large_change,
             "scheduler": scheduler, "jobs": jobs, "trace_out": trace_out, "outdir": outdir,
             "schedule_out": schedule_out, "keep_epochs": keep_epochs, "confine": confine,
             "program": program, "facts": facts, "max_tuples": max_tuples,
             "epoch_timeout": options.epoch_deadline(epoch_timeout),
             # A master asked for is where every task runs: no task in the driver.
             "driver_rows": None if master_given(ctx) else defaults.BY_MASTER}
    if program is not None and (include or no_preprocessor or confine):
        flags["program"] = _program_text(program, include or (), not no_preprocessor,
                                         (facts, *(include or ())) if confine else None)
    from levelflow.cli.timing import WallClock

    clock = WallClock()
    check_session_flags(flags, master)
    program_tasks, ops, state = _prepare(statedir, (insert or [], remove or []), flags)
    if not ops and outdir is None and program is None:  # no Spark, no epoch
        print(NOTHING)
        return
    # Spark starts with the command where it will likely be needed, else on first use.
    from levelflow.cli.spark import inputs_are_large

    eager = master_given(ctx) or inputs_are_large([statedir], recursive=True) \
        or inputs_are_large([*(insert or []), *(remove or [])])
    _run(master, driver_memory, program_tasks, state, ops, flags, clock, eager)


def _program_text(path: Path, include_dirs, preprocessor: bool, confined_to=None):
    """Return --program as a ProgramText carrying -I, --no-preprocessor and, with --confine,
    the folders its includes may read (`confined_to`: --facts and -I)."""
    from levelflow.engine.incremental.program_text import ProgramText
    from levelflow.engine.paths import confined_includes

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LevelflowError(f"{path}: error: cannot read program: {e}") from None
    return ProgramText(text, str(path), tuple(str(d) for d in include_dirs), preprocessor,
                       confined_includes(confined_to is not None, confined_to or ()))


def _run(master: str, driver_memory: str, program_tasks, state, ops, flags: dict,
         clock, eager: bool) -> None:
    """Start Spark and apply the epoch, with the live line `run` shows."""
    from levelflow.cli.spark import spark_session
    from levelflow.engine.progress import make_progress

    log = Path(tempfile.mkstemp(prefix="levelflow-spark-", suffix=".log")[1])
    progress = make_progress()  # a live line on a terminal, as `run` shows
    try:
        progress.start(program_tasks.graph.names)
        # Spark starts in the background: an epoch whose tasks all run in the driver never
        # waits for it.
        with spark_session(master, driver_memory, log, clock, eager) as spark:
            progress.phase("opening the state")
            _apply(spark, state, ops, program_tasks.program, flags, progress, clock)
    finally:
        progress.stop()
        log.unlink(missing_ok=True)
