"""What one simulated run reports, and the error for a bad simulation argument."""

from __future__ import annotations

from dataclasses import dataclass, field

from levelflow.driver import SchedulerStall  # noqa: F401 (its old home)
from levelflow.errors import LevelflowError


class SimulationError(LevelflowError):
    """A bad simulation argument (processors, model); str() is one line naming it."""

    exit_code = 2


@dataclass(slots=True)
class SimResult:
    """The outcome of replaying one trace under one scheduler with P simulated processors."""

    scheduler: str
    processors: int
    makespan: float
    overhead_s: float          # real seconds spent inside scheduler calls during the run
    utilization: float         # busy processor-time / (processors * makespan)
    tasks: int                 # tasks handed out and run
    counters: dict[str, int] = field(default_factory=dict)
    overhead_by_call: dict[str, float] = field(default_factory=dict)  # activate, get_ready, ...
    memory: int = 0            # the scheduler's own estimate, bytes (max of the samples taken)
    lower_bound: float = 0.0   # max(work / P, span) of the activated set W, for this model
    makespan_over_lower_bound: float = 0.0
    model: str = "serial"
    charge_overhead: bool = False
    setup_s: float = 0.0       # real seconds building the scheduler (precomputation), not charged
    trace: str = ""
    schedule: list[tuple[int, int, float, float]] | None = None  # (task, processor, start, end)

    def to_dict(self) -> dict:
        """Return the JSON-ready summary (everything but the schedule rows)."""
        return {
            "scheduler": self.scheduler, "processors": self.processors,
            "makespan": self.makespan, "overhead_s": self.overhead_s,
            "utilization": self.utilization, "tasks": self.tasks,
            "overhead_by_call": dict(self.overhead_by_call),
            "counters": dict(self.counters), "memory": self.memory,
            "lower_bound": self.lower_bound,
            "makespan_over_lower_bound": self.makespan_over_lower_bound,
            "model": self.model, "charge_overhead": self.charge_overhead,
            "setup_s": self.setup_s, "trace": self.trace,
        }
