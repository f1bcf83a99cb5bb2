"""Pre-run checks: everything about a run's arguments that can be refused before Spark starts."""

from __future__ import annotations

from pathlib import Path

from levelflow.errors import LevelflowError
from levelflow.tasks.ast import Program

CHECKPOINTS = ("local", "reliable")


class RunError(LevelflowError):
    """A run cannot start or a task failed in Spark; str() is one line naming the task or flag."""


def check_fact_files(program: Program, factdir) -> list[str]:
    """Return a warning line per `.input` fact file that does not exist (its relation is read
    as empty, as Soufflé reads it); raise FactError naming the first that exists but is no
    regular file."""
    from levelflow.engine.facts import FactError, input_missing, input_path, missing_input_warning
    from levelflow.engine.spark_io import check_parquet, frame_kind

    warnings = []
    for io in program.inputs.values():
        if frame_kind(io) == "sqlite":  # its database, table and columns
            from levelflow.engine.sqlite_io import check_sqlite
            check_sqlite(program.decls[io.relation], io, factdir)
        if frame_kind(io) is not None:  # a DataFrame, Parquet or table: checked as it is read
            check_parquet(io, factdir)
            continue
        path = input_path(io, Path(factdir))
        if input_missing(path):
            warnings.append(missing_input_warning(path, io.relation))
        elif not path.is_file():
            # Same shape as facts.read_facts' errors, checked before any Spark job starts.
            why = "a directory" if path.is_dir() else "not a regular file" if path.exists() \
                else "a broken symbolic link"
            raise FactError(f"{path}:1:1: error: cannot read fact file for relation "
                            f"{io.relation} ({why})")
    return warnings


def check_run_args(jobs: int, checkpoint: str) -> None:
    """Return None if the run's flags are valid; else raise RunError naming the flag."""
    if not isinstance(jobs, int) or jobs < 1:
        raise RunError(f"jobs: must be a positive integer, got {jobs!r}")
    if checkpoint not in CHECKPOINTS:
        raise RunError(f"checkpoint: must be one of {', '.join(CHECKPOINTS)}, got {checkpoint!r}")
