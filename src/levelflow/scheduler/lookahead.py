"""LookAhead(K): LevelBased, plus a search of the next K levels when level cur runs dry.

Constant: the graph, K.
Changes: unchecked[l] = activated tasks at level l not yet searched; waiters[b] = tasks whose
last search met b, an activated unfinished ancestor; mark[v] = the search that last visited v.

A candidate at level cur+1..cur+K is ready when a BFS over its parents, restricted to levels >=
cur (every task below cur has finished, so nothing there can block), meets no activated
unfinished task. A blocked candidate is parked on the task that blocked it and searched again only
when that task finishes: a search is never repeated while nothing it depends on has changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from levelflow.scheduler.core import FINISHED, IDLE, WAITING, Finder, Shared
from levelflow.scheduler.hybrid import Hybrid
from levelflow.scheduler.registry import register
from levelflow.tasks.graph import TaskGraph


class LookaheadFinder(Finder):
    """Finds ready tasks in the K levels above LevelBased's current one by bounded BFS."""

    def __init__(self, shared: Shared, k: str | int = 15) -> None:
        try:
            self.k = int(k)
        except ValueError:
            raise ValueError(f"lookahead: K must be an integer, got {k!r}") from None
        if self.k < 1:
            raise ValueError(f"lookahead: K must be >= 1, got {k}")
        if shared.cur is None:
            raise ValueError("lookahead runs beside LevelBased only (it searches above level cur)")
        super().__init__(shared)
        n = len(shared.graph)
        self.unchecked: list[list[int]] = [[] for _ in range(shared.graph.num_levels + 1)]
        self.waiters: dict[int, list[int]] = {}
        self.parked = 0
        self.mark = [0] * n
        self.stamp = 0
        self.below = 0  # levels < below have had their unchecked lists dropped
        self.searches = 0
        self.bfs_steps = 0

    def _sync(self) -> None:
        """File new activations by level and release the tasks parked on finished ones."""
        shared = self.shared
        acts, fins = shared.act_log, shared.fin_log
        if acts:
            level = shared.level
            unchecked = self.unchecked
            for v in acts:
                unchecked[level[v]].append(v)
            acts.clear()
        if fins:
            waiters = self.waiters
            if waiters:
                level = self.shared.level
                unchecked = self.unchecked
                for b in fins:
                    ws = waiters.pop(b, None)
                    if ws:
                        self.parked -= len(ws)
                        for v in ws:
                            unchecked[level[v]].append(v)
            fins.clear()

    def blocker(self, v: int, floor: int) -> int:
        """Return an activated unfinished proper ancestor of v at level >= floor, or -1."""
        state = self.shared.state
        level = self.shared.level
        parents = self.shared.graph.parents
        mark = self.mark
        self.stamp += 1
        stamp = self.stamp
        frontier = [v]  # visiting order does not matter: any blocker will do
        steps = 0
        found = -1
        while frontier and found < 0:
            u = frontier.pop()
            for p in parents[u]:
                if mark[p] == stamp or level[p] < floor:
                    continue
                mark[p] = stamp
                steps += 1
                s = state[p]
                if s != IDLE and s != FINISHED:
                    found = p
                    break
                frontier.append(p)
        self.bfs_steps += steps
        return found

    def find(self, k: int) -> list[int]:
        """Return up to k ready waiting tasks from the levels cur+1 .. cur+K."""
        self._sync()
        state = self.shared.state
        cur = self.shared.cur
        unchecked = self.unchecked
        waiters = self.waiters
        out: list[int] = []
        while self.below <= cur:
            # LevelBased has admitted everything there; the entries are stale.
            unchecked[self.below] = []
            self.below += 1
        top = min(cur + self.k, len(unchecked) - 1)
        for lv in range(cur + 1, top + 1):
            todo = unchecked[lv]
            while todo:
                v = todo.pop()
                if state[v] != WAITING:
                    continue
                self.searches += 1
                b = self.blocker(v, cur)
                if b < 0:
                    out.append(v)
                    if len(out) >= k:
                        return out
                else:
                    self.parked += 1
                    ws = waiters.get(b)
                    if ws is None:
                        waiters[b] = [v]
                    else:
                        ws.append(v)
        return out

    def counters(self) -> dict[str, int]:
        """Return searches and bfs_steps."""
        return {"searches": self.searches, "bfs_steps": self.bfs_steps}

    def memory(self) -> int:
        """Return the visit marks' and parked tasks' size in bytes."""
        return 8 * (len(self.mark) + self.parked)


@register("lookahead")
class LookAhead(Hybrid):
    """LevelBased that, when level cur runs dry, searches the next K levels (default 15)."""

    __slots__ = ()
    finder_class = LookaheadFinder

    def __init__(self, graph: TaskGraph, k: str | int = 15, *,
                 costs: Sequence[float] | None = None) -> None:
        super().__init__(graph, costs=costs, finder=partial(LookaheadFinder, k=k))
