"""CLI commands: state check (verify every file of a state), state repair (make it whole again).

Both read the state with pyarrow and start no Spark; only `repair --rebuild` (or a repair of
a damaged current epoch, which rebuilds it from its base facts) does."""

from __future__ import annotations

import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli import defaults
from levelflow.cli.app import app
from levelflow.errors import LevelflowError

state_app = typer.Typer(help="Check and repair a state directory made by `run --state`.",
                        no_args_is_help=True)
app.add_typer(state_app, name="state")


class StateCmdError(LevelflowError):
    """A state that check found damaged, or a repair that cannot be done."""


@contextmanager
def _spark(master: str, driver_memory: str):
    """Yield the CLI's SparkSession (cli/spark.py), its JVM's output in a temp log."""
    from levelflow.cli.spark import spark_session

    log = Path(tempfile.mkstemp(prefix="levelflow-spark-", suffix=".log")[1])
    try:
        with spark_session(master, driver_memory, log) as spark:
            yield spark
    finally:
        log.unlink(missing_ok=True)


@contextmanager
def _spark_shown(master: str, driver_memory: str):
    """Yield (SparkSession, the live line): what is being done, how far Spark's jobs got."""
    from levelflow.cli.spark import check_master_url
    from levelflow.engine.progress import make_progress

    check_master_url(master)
    progress = make_progress()
    try:
        progress.start(())
        progress.phase(f"starting Spark ({master})")
        with _spark(master, driver_memory) as spark:
            progress.watch(spark)
            yield spark, progress
    finally:
        progress.stop()


@contextmanager
def _shown():
    """Yield the live line (what is being done), stopped at the end."""
    from levelflow.engine.progress import make_progress

    progress = make_progress()
    try:
        progress.start(())
        yield progress
    finally:
        progress.stop()


def _open(statedir: Path):
    """Return the state's files (no Spark) after checking it is a state at all."""
    from levelflow.engine.incremental.state.files import StateFiles

    state = StateFiles(statedir)
    state.check_usable()
    if not state.on_disk():
        state.current()  # one line if it is not a state at all
    return state


@state_app.command("check")
def check_command(
    statedir: Annotated[Path, typer.Argument(help="State directory made by `run --state`.")],
    master: Annotated[str, typer.Option("--master", hidden=True, help="Unused: the check "
                                        "starts no Spark.")] = defaults.MASTER,
    driver_memory: Annotated[str, typer.Option(
        "--driver-memory", hidden=True, help="Unused, as --master.")] = defaults.DRIVER_MEMORY,
) -> None:
    """Verify every file of the state against its manifests; exit 1 if the current epoch or
    CURRENT is damaged, saying which file and why, which older epochs are whole and which
    epoch `state repair` recovers."""
    from levelflow.engine.incremental.state.repair import check_state

    state = _open(statedir)
    with _shown() as progress:
        ok, lines, advice = check_state(state, progress.phase)
    for line in lines:
        print(line)
    if not ok:
        raise StateCmdError(advice)


@state_app.command("repair")
def repair_command(
    statedir: Annotated[Path, typer.Argument(help="State directory made by `run --state`.")],
    from_epoch: Annotated[int | None, typer.Option(
        "--from-epoch", help="Make this whole epoch current again (updates since are "
        "undone); with --rebuild, rebuild from its base facts.")] = None,
    rebuild_flag: Annotated[bool, typer.Option(
        "--rebuild", help="Re-evaluate the program from scratch on the base facts of the "
        "current epoch (or of --from-epoch).")] = False,
    master: Annotated[str, typer.Option("--master", help=defaults.MASTER_HELP)
                      ] = defaults.MASTER,
    driver_memory: Annotated[str, typer.Option(
        "--driver-memory", help=defaults.DRIVER_MEMORY_HELP)] = defaults.DRIVER_MEMORY,
) -> None:
    """Make a whole epoch current again: the last committed one when CURRENT is damaged, a
    copy of --from-epoch N, or a rebuild from base facts.

    With neither flag: the last committed epoch if CURRENT is damaged, nothing if the current
    epoch is whole, else a rebuild from its base facts if they are whole. Nothing stored is
    deleted or changed. Only a rebuild starts Spark.
    """
    from levelflow.engine.incremental.state.repair import epoch_problems, recover, restore_epoch

    state = _open(statedir)
    with _shown() as progress:
        if from_epoch is not None and not rebuild_flag:
            progress.phase(f"verifying epoch {from_epoch} to restore it")
            new = restore_epoch(state, from_epoch)
            progress.stop()
            print(f"{statedir}: epoch {new} is " + ("current again" if new == from_epoch
                                                   else f"a copy of epoch {from_epoch}"))
            return
        problem = state.current_problem()
        if problem is not None and rebuild_flag:
            raise StateCmdError(state.damaged_current(problem) + "; then rebuild")
        recovered = recover(state, progress.phase)
        if recovered is not None:
            progress.stop()
            print(f"{statedir}: {recovered[0]}: epoch {recovered[1]}, the last committed, "
                  f"is current again")
            return
        progress.phase(f"verifying epoch {state.current()}")
        if not rebuild_flag and not epoch_problems(state, state.current()):
            progress.stop()
            print(f"{statedir}: epoch {state.current()} is whole; nothing to repair")
            return
    _rebuild(statedir, from_epoch, master, driver_memory)


def _rebuild(statedir: Path, from_epoch: int | None, master: str, driver_memory: str) -> None:
    """Re-evaluate the program on an epoch's base facts, on Spark, as a new epoch."""
    from levelflow.engine.incremental.state.directory import StateDir
    from levelflow.engine.incremental.state.repair import rebuild

    with _spark_shown(master, driver_memory) as (spark, progress):
        result = rebuild(spark, StateDir(statedir), from_epoch, progress=progress)
    print(f"{statedir}: epoch {result.epoch} rebuilt from the base facts of epoch "
          f"{result.epoch - 1 if from_epoch is None else from_epoch}", file=sys.stdout)
