"""CLI commands: update (apply inserted / removed input facts to a maintained state, one epoch)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli.app import app
from levelflow.cli.run_cmd import CONFINE_HELP
from levelflow.engine.paths import CONFINE_DEFAULT
from levelflow.errors import LevelflowError

# The engine's defaults (maintain.py), repeated here so that --help does not import Spark.
SWITCH_DEFAULT = 0.2
SWITCH_FLOOR = 1.0  # seconds: the switch never fires earlier
LARGE_CHANGE_DEFAULT = 0.05
SWITCH_HELP = (f"Elastic switch: stop a task's update after this fraction of its last "
               f"from-scratch time (at least {SWITCH_FLOOR:g} s) and recompute it from scratch. "
               f"--strategy incremental never switches.")


class UpdateArgsError(LevelflowError):
    """A bad flag or directory given to `levelflow update`."""


def print_epoch(result, program, out=sys.stdout) -> None:
    """Print per output relation the tuples added and removed, the strategies and the summary."""
    for name in program.outputs:
        d = result.deltas.get(name)
        added, removed = (d.added_rows, d.removed_rows) if d is not None else (0, 0)
        print(f"{name}\t+{added}\t-{removed}", file=out)
    for note in result.notes:
        print(note, file=out)
    if result.strategies:
        print("strategies: " + ", ".join(f"{t}={s}" for t, s in result.strategies.items()),
              file=out)
    print(result.summary(), file=out)


def check_switch(switch: float, strategy: str, large_change: float) -> None:
    """Return None if the elastic flags are valid; else raise UpdateArgsError naming the flag."""
    from levelflow.engine.incremental.maintain import MODES

    if not 0 <= switch:
        raise UpdateArgsError(f"--switch: must be a fraction >= 0, got {switch}")
    if not 0 < large_change:
        raise UpdateArgsError(f"--large-change: must be a fraction > 0, got {large_change}")
    if strategy not in MODES:
        raise UpdateArgsError(f"--strategy: must be one of {', '.join(MODES)}, got {strategy!r}")


@app.command("update")
def update_command(
    statedir: Annotated[Path, typer.Argument(help="State directory made by `run --state`.")],
    insert: Annotated[list[Path] | None, typer.Option(
        "--insert", help="Facts to insert: REL.facts or the file its .input names (Soufflé "
        "format), or a +r(..)/-r(..) diff file. Repeatable.")] = None,
    remove: Annotated[list[Path] | None, typer.Option(
        "--remove", help="Facts to remove: REL.facts, or a diff file (signs flipped). "
        "Repeatable.")] = None,
    outdir: Annotated[Path | None, typer.Option(
        "-D", "--output-dir", help="Write every .output relation as it now stands here.")] = None,
    switch: Annotated[float, typer.Option(
        "--switch", help=SWITCH_HELP)] = SWITCH_DEFAULT,
    strategy: Annotated[str, typer.Option(
        "--strategy", help="elastic | incremental (never switch) | scratch.")] = "elastic",
    large_change: Annotated[float, typer.Option(
        "--large-change", help="Elastic: recompute a recursive task at once when this fraction "
        "of the tuples it reads changed.")] = LARGE_CHANGE_DEFAULT,
    scheduler: Annotated[str, typer.Option("--scheduler", "-s", help="Scheduler spec.")
                         ] = "hybrid",
    jobs: Annotated[int, typer.Option("-j", "--jobs", help="Tasks updated concurrently.")] = 1,
    master: Annotated[str, typer.Option("--master", help="Spark master URL.")] = "local[*]",
    driver_memory: Annotated[str, typer.Option("--driver-memory")] = "2g",
    trace_out: Annotated[Path | None, typer.Option(
        "--trace-out", help="Write the epoch as a jobtrace/1 file: the tasks its change "
        "activated, who activated whom, how long each took.")] = None,
    schedule_out: Annotated[Path | None, typer.Option(
        "--schedule", help="Write the epoch's schedule/1 CSV (wall time, slot = worker).")
    ] = None,
    keep_epochs: Annotated[int | None, typer.Option(
        "--keep-epochs", help="Keep this many of the last epochs on disk from now on (the "
        "state remembers it; 2 unless set).")] = None,
    confine: Annotated[bool, typer.Option("--confine", help=CONFINE_HELP)] = CONFINE_DEFAULT,
) -> None:
    """Apply the changes as one epoch; print per output relation +added -removed, 'ran k of N'."""
    from levelflow.cli.run_cmd import (
        jvm_stderr_to,
        make_outdir,
        make_parent,
        quiet_pyspark_loggers,
        scheduler_from_flag,
    )
    from levelflow.engine.incremental.state import StateDir
    from levelflow.engine.incremental.updates import read_updates
    from levelflow.engine.paths import check_io_paths
    from levelflow.tasks import build_tasks, parse_program

    check_switch(switch, strategy, large_change)
    if jobs < 1:
        raise UpdateArgsError(f"--jobs: must be a positive integer, got {jobs}")
    state = StateDir(statedir, keep=keep_epochs)
    data = state.manifest()  # raises a one-line StateError if there is no state
    program_tasks = build_tasks(parse_program(data["program"], data["program_file"]))
    state.verify(None, program_tasks.program, data)  # missing or cut files: before Spark
    check_io_paths(program_tasks.program, None, outdir, confine)
    scheduler_from_flag(scheduler, program_tasks.graph)  # checked before Spark starts
    # Every file is parsed and checked before Spark starts: a bad line refuses the whole epoch.
    ops = read_updates(program_tasks.program, insert or [], remove or [])
    make_parent(trace_out, "--trace-out", UpdateArgsError)
    make_parent(schedule_out, "--schedule", UpdateArgsError)
    if outdir is not None:
        make_outdir(outdir, UpdateArgsError)
    log = Path(tempfile.mkstemp(prefix="levelflow-spark-", suffix=".log")[1])
    spark = None
    try:
        from levelflow.engine.incremental.session_api import IncrementalSession
        from levelflow.engine.session import make_session

        quiet_pyspark_loggers()
        with jvm_stderr_to(log):
            spark = make_session(master=master, driver_memory=driver_memory)
        session = IncrementalSession.open(spark, state, scheduler=scheduler, jobs=jobs,
                                          mode=strategy, switch=switch,
                                          large_change=large_change)
        session.extend(ops)
        result = session.commit()
        print_epoch(result, program_tasks.program)  # the epoch is applied: say so first
        if trace_out is not None:
            from levelflow.traces import dump_trace

            dump_trace(result.trace, trace_out)
        if schedule_out is not None:
            from levelflow.traces import write_schedule

            write_schedule(result.schedule, result.trace, schedule_out)
        if outdir is not None:
            try:
                session.write_outputs(outdir)
            except OSError as e:
                raise UpdateArgsError(f"{outdir}: error: epoch {result.epoch} was applied, but "
                                      f"its outputs could not be written ({e})") from None
    finally:
        if spark is not None:
            spark.stop()
        log.unlink(missing_ok=True)
