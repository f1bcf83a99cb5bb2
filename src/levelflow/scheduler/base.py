"""The scheduler protocol every driver (simulator, Spark engine) uses, after graphlib.

A driver does, in a loop:

    s = make_scheduler("hybrid", graph)
    s.activate(initial)                  # tasks dirtied by the input change
    while s.is_active():
        for v in s.get_ready(idle):      # at most `idle` ready tasks, now counted as running
            start(v)
        v, changed = wait_for_a_finish()
        s.done(v, changed)               # changed: the children v sent changed output to

Constant: the TaskGraph. Changes: which tasks are activated, running, finished.
No clock, no I/O. Misuse (done on a task not running, activating a finished task) raises
ValueError naming the task.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from levelflow.tasks.graph import TaskGraph


class Scheduler(ABC):
    """Finds ready tasks among the activated ones; subclasses differ only in how."""

    __slots__ = ("graph", "costs")  # a plugin without __slots__ still gets a __dict__
    name = "scheduler"

    def __init__(self, graph: TaskGraph, *, costs: Sequence[float] | None = None) -> None:
        self.graph = graph
        # Estimated durations per task id when the driver knows them (trace, previous run);
        # policies may use them, correctness never depends on them.
        self.costs = costs

    @abstractmethod
    def activate(self, tasks: Iterable[int]) -> None:
        """Mark tasks as activated (already activated ones are ignored)."""

    @abstractmethod
    def get_ready(self, k: int) -> list[int]:
        """Return up to k ready tasks and count them as running from now on."""

    @abstractmethod
    def done(self, task: int, activated: Iterable[int] = ()) -> None:
        """Record that a running task finished and activated the given children."""

    @abstractmethod
    def is_active(self) -> bool:
        """Return True while any activated task has not finished."""

    def counters(self) -> dict[str, int]:
        """Return this scheduler's operation counts (levels scanned, ancestor queries, ...)."""
        return {}

    def memory(self) -> int:
        """Return the extra memory this scheduler holds, in bytes (an estimate)."""
        return 0
