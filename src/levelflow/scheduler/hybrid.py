"""Hybrid and Budget: LevelBased plus a heuristic Finder on one shared ready queue.

Constant: the graph; the heuristic's precomputation (e.g. interval lists).
Changes: LevelBased's state; the heuristic's own state, which it brings up to date from the event
logs only when it is consulted.

get_ready(k) first hands out what the level rule knows is ready; only when level cur has nothing
left to hand out and fewer than k were found is the heuristic asked for the rest. A task either
rule hands out is RUNNING in the shared state, so the other skips it. Budget (Theorem 10) drops the
heuristic for good once its memory passes the budget, and is plain LevelBased from then on; a
heuristic that takes `max_memory` (LogicBlox) stops building its lists as soon as they pass it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

from levelflow.scheduler.core import RUNNING, Finder, Shared
from levelflow.scheduler.levelbased import LevelBased
from levelflow.scheduler.registry import register, resolve
from levelflow.tasks.graph import TaskGraph


def make_finder(shared: Shared, spec: str, max_memory: int | None = None) -> Finder:
    """Return the Finder of the heuristic a spec names (a scheduler with a `finder_class`).

    A finder whose constructor takes a `max_memory` keyword is told the byte budget, so that it
    can stop building its structures once they pass it instead of building them all first.
    """
    cls, args = resolve(spec)
    finder_class = getattr(cls, "finder_class", None)
    if finder_class is None or finder_class is Finder:
        raise ValueError(f"{spec!r} cannot run beside LevelBased: it has no finder_class")
    if max_memory is not None and "max_memory" in inspect.signature(finder_class).parameters:
        return finder_class(shared, *args, max_memory=max_memory)
    return finder_class(shared, *args)


@register("hybrid")
class Hybrid(LevelBased):
    """LevelBased's ready tasks first, then the heuristic's (default: LogicBlox intervals)."""

    __slots__ = ("finder", "_consults")

    def __init__(self, graph: TaskGraph, heuristic: str = "logicblox", *args: str,
                 costs: Sequence[float] | None = None,
                 finder: Callable[[Shared], Finder] | None = None) -> None:
        """Run LevelBased with the `finder` given, else the one the heuristic's spec names."""
        super().__init__(graph, costs=costs)
        self.finder: Finder | None = (
            finder(self.shared) if finder is not None
            else make_finder(self.shared, ":".join((heuristic, *args)), self._memory_limit()))
        self._consults = 0

    def _memory_limit(self) -> int | None:
        """Return the byte budget the heuristic is built under (None: no budget)."""
        return None

    def _check_activate(self, tasks: list[int]) -> None:
        """Let the heuristic refuse an activation before anything changes."""
        if self.finder is not None:
            self.finder.check_activate(tasks)

    def get_ready(self, k: int) -> list[int]:
        """Return up to k ready tasks: the level rule's first, then the heuristic's."""
        out = LevelBased.get_ready(self, k)
        finder = self.finder
        if finder is None or len(out) >= k or self._ready or not self._unfinished:
            return out
        self._consults += 1
        more = finder.find(k - len(out))
        if more:
            state = self._state
            for v in more:
                state[v] = RUNNING  # find returns only WAITING tasks
            self._handed_out += len(more)
            out.extend(more)
        return out

    def counters(self) -> dict[str, int]:
        """Return LevelBased's counts, the consults and the heuristic's counts."""
        c = super().counters()
        c["consults"] = self._consults
        if self.finder is not None:
            c.update(self.finder.counters())
        return c

    def memory(self) -> int:
        """Return the heuristic's memory in bytes (0 once it is dropped)."""
        return self.finder.memory() if self.finder is not None else 0


@register("budget")
class Budget(Hybrid):
    """Hybrid whose heuristic is dropped for good once its memory passes a byte budget."""

    __slots__ = ("budget", "dropped_at", "_peak", "_last_counts")

    def __init__(self, graph: TaskGraph, *args: str,
                 costs: Sequence[float] | None = None) -> None:
        if not args:
            raise ValueError("budget needs <heuristic>:<bytes>, e.g. budget:logicblox:1000000")
        *heuristic, limit = args
        try:
            self.budget = int(limit)
        except ValueError:
            raise ValueError(f"budget: bytes must be an integer, got {limit!r}") from None
        if self.budget < 0:
            raise ValueError(f"budget: bytes must be >= 0, got {limit}")
        super().__init__(graph, *(heuristic or ["logicblox"]), costs=costs)
        self.dropped_at = -1  # handed-out count when the heuristic was dropped; -1: never
        self._peak = 0
        self._last_counts: dict[str, int] = {}
        self._check()

    def _memory_limit(self) -> int | None:
        """Return the budget: a heuristic that takes max_memory stops building once past it."""
        return self.budget

    def _check(self) -> None:
        """Drop the heuristic if its memory has passed the budget."""
        finder = self.finder
        if finder is None:
            return
        m = finder.memory()
        if m > self._peak:
            self._peak = m
        if m > self.budget:
            self._last_counts = finder.counters()
            self.finder = None
            self.shared.act_log = self.shared.fin_log = None  # nobody reads them any more
            self.dropped_at = self._handed_out

    def get_ready(self, k: int) -> list[int]:
        """Return up to k ready tasks (Hybrid's rule while the heuristic is kept)."""
        out = Hybrid.get_ready(self, k)
        if self.finder is not None:
            self._check()
        return out

    def counters(self) -> dict[str, int]:
        """Return Hybrid's counts plus budget, heuristic_peak_memory, dropped, dropped_at."""
        c = super().counters()
        if self.finder is None:
            c.update(self._last_counts)  # what the heuristic had done before it was dropped
        c.update(budget=self.budget, heuristic_peak_memory=self._peak,
                 dropped=int(self.finder is None), dropped_at=self.dropped_at)
        return c
