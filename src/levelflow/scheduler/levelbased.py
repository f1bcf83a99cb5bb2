"""LevelBased: run the lowest unfinished level; every activated task there is ready.

Constant: the graph's level array.
Changes: cur = the lowest level with an activated unfinished task (it only rises, except when a
driver activates a task below it from outside); ready = the policy's container of the admitted,
not yet handed out tasks at level cur.

Why it is exact enough: every ancestor of a task at level l lies at a level < l, and a task is
only activated by a parent, so once levels < l hold no activated unfinished task, nothing can
still change the input of a task at level l. Each task is admitted once and each level is passed
once: O(n + L log n) time. Which ready task goes first is policy: override `admit` and `pick`.
The default hands a level's tasks out in task-id order, as the reference simulator of the
LevelBased paper does, so a trace gives the same makespan there and here.
"""

from __future__ import annotations

from collections.abc import Sequence

from levelflow.scheduler.core import RUNNING, WAITING, ActiveSet
from levelflow.scheduler.registry import register
from levelflow.tasks.graph import TaskGraph


@register("levelbased")
class LevelBased(ActiveSet):
    """Hands out the activated tasks of the lowest unfinished level (policy: `admit`/`pick`)."""

    __slots__ = ("_ready", "_levels_scanned", "_admitted")

    def __init__(self, graph: TaskGraph, *, costs: Sequence[float] | None = None) -> None:
        super().__init__(graph, costs=costs)
        self.shared.cur = 0  # on the shared record: LookAhead searches the levels above it
        self._ready: list = []
        self._levels_scanned = 0
        self._admitted = 0

    # --- policy: subclasses override these two ------------------------------------------------

    def admit(self, ready: list, new: list[int]) -> None:
        """Add newly ready tasks of level cur to `ready` (default: by id, smallest at the end)."""
        ready.extend(new)
        # A level's tasks mostly arrive in one batch, and step-backs re-admit sorted runs:
        # Timsort keeps this near linear.
        ready.sort(reverse=True)

    def pick(self, ready: list, k: int) -> list[int]:
        """Remove up to k tasks from `ready` and return them, first to run first (default: the
        smallest ids).

        Must return at least one task while `ready` holds any and k >= 1.
        """
        if k == 1:
            return [ready.pop()]
        if k >= len(ready):
            out = ready[::-1]
            ready.clear()
            return out
        out = ready[:-k - 1:-1]
        del ready[-k:]
        return out

    # --- mechanism ----------------------------------------------------------------------------

    def _activated_at(self, lv: int) -> None:
        """Step back to level lv if a driver activated a task below the current level."""
        cur = self.shared.cur
        if lv < cur:
            ready = self._ready
            # The task may be an ancestor of the admitted ones: they are waiting again.
            while ready:
                self._waiting[cur].extend(self.pick(ready, len(ready)))
            self.shared.cur = lv

    def get_ready(self, k: int) -> list[int]:
        """Return up to k ready tasks and count them as running from now on."""
        left = self._left
        cur = self.shared.cur
        if not left[cur]:
            last = len(left) - 1
            start = cur
            while cur < last and not left[cur]:
                cur += 1
            self._levels_scanned += cur - start
            self.shared.cur = cur
        waiting = self._waiting[cur]
        ready = self._ready
        if waiting:
            state = self._state
            # A heuristic running beside us may have handed some of them out already.
            new = [v for v in waiting if state[v] == WAITING]
            waiting.clear()
            if new:
                self._admitted += len(new)
                self.admit(ready, new)
        if not ready or k <= 0:
            return []
        # Admitted tasks stay WAITING until picked: heuristics are only consulted once the
        # ready set is empty, and step-backs put admitted tasks back into `waiting`.
        out = self.pick(ready, k)
        state = self._state
        for v in out:
            state[v] = RUNNING
        self._handed_out += len(out)
        return out

    def counters(self) -> dict[str, int]:
        """Return levels_scanned, admitted, activations, handed_out, finished."""
        c = super().counters()
        c["levels_scanned"] = self._levels_scanned
        c["admitted"] = self._admitted
        return c
