"""The one loop that drives a scheduler: ready tasks go to idle workers, finishes come back.

Constant: the scheduler and the workers it is driven with.
Changes: only the count of tasks started; the scheduler's state and the workers' are their own.

Clock-free, in the spirit of `graphlib.TopologicalSorter.static_order`: whatever time there is
(a simulated clock, Spark's wall clock) lives in the workers. The simulator's workers place
tasks on P simulated processors; the engine's are threads running Spark jobs. Both plug in here,
so a scheduler that misbehaves is caught the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from levelflow.errors import LevelflowError


class SchedulerStall(LevelflowError, RuntimeError):
    """A scheduler bug (a plugin's, usually): it stalls, or hands out more than asked for."""

    exit_code = 3


class Workers(Protocol):
    """What the driver needs from whoever runs the tasks."""

    def idle(self) -> int:
        """Return how many tasks could start now."""

    def start(self, ready: list[int]) -> None:
        """Start every task of `ready` (at most idle() of them)."""

    def busy(self) -> bool:
        """Return True while any started task has not been reported finished."""

    def finished(self) -> Iterator[tuple[int, Sequence[int]]]:
        """Wait for at least one finish; yield (task, children it activated) per finish."""


def scheduler_name(sched) -> str:
    """Return the name to show for a scheduler: its own or its class's `name`, else the class's.

    An inherited name is not used: a plugin subclassing LevelBased is not "levelbased".
    """
    for where in (getattr(sched, "__dict__", {}), vars(type(sched))):
        name = where.get("name")
        if isinstance(name, str) and name:
            return name
    return type(sched).__name__


def drive(sched, workers: Workers, *, name: str | None = None) -> int:
    """Return the number of tasks run after driving an activated scheduler until it is done.

    Raises SchedulerStall naming the scheduler if it hands out more tasks than asked for, or
    reports active work while handing out nothing and nothing runs.
    """
    started = 0
    while True:
        idle = workers.idle()
        if idle:
            ready = sched.get_ready(idle)
            if ready:
                if len(ready) > idle:
                    raise SchedulerStall(f"scheduler {name or scheduler_name(sched)!r} handed out "
                                         f"{len(ready)} tasks from get_ready({idle})")
                started += len(ready)
                workers.start(ready)
        if not workers.busy():
            if not sched.is_active():
                return started
            raise SchedulerStall(
                f"scheduler {name or scheduler_name(sched)!r} stalled after {started} tasks: "
                "is_active() is True but get_ready() hands out nothing while no task is running "
                "(a scheduler bug)")
        # A generator: each finish is reported before the next is looked at, so time a
        # worker charges for done() can let more tasks finish at this instant.
        for v, activated in workers.finished():
            sched.done(v, activated)
