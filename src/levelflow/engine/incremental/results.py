"""What an epoch reports: per relation its net change, which tasks ran and how, the times."""

from __future__ import annotations

from dataclasses import dataclass, field

from levelflow.errors import LevelflowError
from levelflow.traces.model import JobTrace


class EpochError(LevelflowError):
    """An epoch failed; the previous epoch stays current. str() names the task."""


class EpochTimeout(EpochError):
    """An epoch ran past its deadline (`--epoch-timeout`) and was cancelled; nothing changed."""


@dataclass
class Delta:
    """The net change of one relation in an epoch (DataFrames with columns c0..)."""

    added: object
    removed: object
    added_rows: int
    removed_rows: int


@dataclass
class EpochResult:
    """What an epoch did: per-relation deltas, which tasks ran and how, and the times."""

    epoch: int
    deltas: dict[str, Delta]  # every relation with a non-empty net change
    ran: int
    total: int
    strategies: dict[str, str]  # task name -> counting | dred | scratch | switched | bootstrap
    task_seconds: dict[str, float]
    seconds: float
    notes: list[str] = field(default_factory=list)
    trace: JobTrace | None = None  # the epoch as a job trace: what ran, who activated whom
    schedule: list[tuple[int, int, float, float]] = field(default_factory=list)  # schedule/1 rows
    spark_jobs: dict[str, int] = field(default_factory=dict)  # task name -> Spark jobs it ran
    arranged: tuple[str, ...] = ()  # tasks updated where their state lives (dred_job.py)
    # A program change's epoch: task name -> kept | updated | recomputed | new | dropped.
    status: dict[str, str] = field(default_factory=dict)
    write_seconds: float = 0.0  # of `seconds`, the durable write of the state (0 without one)

    def summary(self) -> str:
        """Return the line 'ran k of N tasks in S s'."""
        return f"ran {self.ran} of {self.total} tasks in {self.seconds:.2f} s"
