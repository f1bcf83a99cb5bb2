"""A scheduler wrapper that times each protocol call with a clock it is handed.

The drivers (simulator, engine) report where scheduling time went; the scheduler package itself
reads no clock, so the clock is an argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

CALLS = ("activate", "get_ready", "done", "is_active")


class Metered:
    """A scheduler whose protocol calls are timed with a clock passed in, summed per call kind.

    `on_call(seconds)` hears each call's duration (the simulator charges it to its clock).
    """

    __slots__ = ("sched", "clock", "on_call", "seconds")

    def __init__(self, sched, clock: Callable[[], float],
                 on_call: Callable[[float], None] | None = None) -> None:
        self.sched = sched
        self.clock = clock
        self.on_call = on_call
        self.seconds = dict.fromkeys(CALLS, 0.0)

    def _spent(self, call: str, t: float) -> None:
        d = self.clock() - t
        self.seconds[call] += d
        if self.on_call is not None:
            self.on_call(d)

    def activate(self, tasks: Iterable[int]) -> None:
        """Activate tasks, timed."""
        t = self.clock()
        self.sched.activate(tasks)
        self._spent("activate", t)

    def get_ready(self, k: int) -> list[int]:
        """Return up to k ready tasks, timed."""
        t = self.clock()
        ready = self.sched.get_ready(k)
        self._spent("get_ready", t)
        return ready

    def done(self, task: int, activated: Iterable[int] = ()) -> None:
        """Record a finish, timed."""
        t = self.clock()
        self.sched.done(task, activated)
        self._spent("done", t)

    def is_active(self) -> bool:
        """Return whether work is left, timed."""
        t = self.clock()
        alive = self.sched.is_active()
        self._spent("is_active", t)
        return alive

    def total(self) -> float:
        """Return the seconds spent inside all scheduler calls."""
        return sum(self.seconds.values())
