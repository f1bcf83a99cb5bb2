"""Options that the commands share: one declaration each, so their help cannot drift."""

import functools
import math
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli import defaults
from levelflow.errors import UsageError

Switch = Annotated[float, typer.Option("--switch", help=defaults.SWITCH_HELP)]
Strategy = Annotated[str, typer.Option(
    "--strategy", help="elastic, incremental (never switch) or scratch.")]
LargeChange = Annotated[float, typer.Option("--large-change", help=defaults.LARGE_CHANGE_HELP)]
Scheduler = Annotated[str, typer.Option("--scheduler", "-s", help=defaults.SCHEDULER_HELP)]
Jobs = Annotated[int, typer.Option("-j", "--jobs", help=defaults.JOBS_HELP)]
Master = Annotated[str, typer.Option("--master", help=defaults.MASTER_HELP)]
MaxTuples = Annotated[int, typer.Option("--max-tuples", min=1, help=defaults.MAX_TUPLES_HELP)]
DriverMemory = Annotated[str, typer.Option("--driver-memory",
                                           help=defaults.DRIVER_MEMORY_HELP)]
IncludeDirs = Annotated[list[Path] | None, typer.Option(
    "-I", "--include-dir", metavar="DIR", help="Where `#include \"f.dl\"` looks after the "
    "including file's directory (repeatable).")]
NoPreprocessor = Annotated[bool, typer.Option(
    "--no-preprocessor", help="Do not run the C preprocessor (#include, #define, #if) on the "
    "program; Soufflé runs it by default.")]
KeepEpochs = Annotated[int | None, typer.Option(
    "--keep-epochs", help="Keep this many of the last epochs on disk from now on (the state "
    "remembers it; 2 unless set).")]
Functors = Annotated[Path | None, typer.Option(
    "--functors", metavar="FILE.py", help="A Python module defining the program's user "
    "functors (`.functor f(number): number` calls its function f); imported by Spark's "
    "workers too.")]

EpochTimeout = Annotated[float | None, typer.Option(
    "--epoch-timeout", metavar="SECONDS", help="Cancel an epoch (run: the evaluation) whose "
    "tasks still run after this many seconds: one line, nothing written, the state as it was "
    "(0: no limit).")]


def epoch_deadline(seconds: float | None) -> float | None:
    """Return --epoch-timeout as the engine takes it (None: no limit); one line if invalid."""
    if seconds is None:
        return None
    if not seconds >= 0:  # NaN too
        raise UsageError(f"--epoch-timeout: must be a number of seconds >= 0 (0: no limit), "
                         f"got {seconds}")
    return None if seconds == 0 or math.isinf(seconds) else seconds


def binds_functors(command):
    """Return the command run with its `--functors` module bound to the programs it loads."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        from levelflow.tasks.user_functors import bound, check_module

        with bound(check_module(kwargs.get("functors"))):
            return command(*args, **kwargs)
    return run
