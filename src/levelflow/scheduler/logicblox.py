"""LogicBlox: the production baseline; exact readiness by ancestor-interval queries.

Constant: post numbers and each node's ancestor intervals (levelflow.scheduler.intervals).
Changes: live = SortedList of the post numbers of the activated unfinished tasks (synced from the
owner's event logs when consulted); unchecked = activated waiting tasks not yet queried;
waiters[b] = the tasks whose last query found b as their highest-numbered unfinished activated
ancestor.

A task is ready when no post number in `live` other than its own falls in its intervals. A blocked
task is re-queried only when the blocker it was parked on finishes: until then it cannot be ready.
It is parked on the live ancestor with the highest post number: post numbers are topological, so
no other live ancestor of the task descends from that one, and the task is not re-queried once
per link of a chain of blockers that must finish one after the other anyway.
Ready tasks are handed out as soon as they are found, so an external activation can never block a
task this finder is holding.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Sequence

from sortedcontainers import SortedList

from levelflow.scheduler.core import FINISHED, WAITING, Finder, FinderScheduler, Shared
from levelflow.scheduler.intervals import BYTES_PER_INTERVAL, TooManyIntervals, ancestor_spans
from levelflow.scheduler.registry import register
from levelflow.tasks.graph import TaskGraph


class IntervalFinder(Finder):
    """Finds ready tasks with interval queries against the unfinished activated tasks."""

    def __init__(self, shared: Shared, *, max_memory: int | None = None) -> None:
        """Build the interval lists; past `max_memory` bytes, stop and keep none (see memory)."""
        super().__init__(shared)
        try:
            self.post, self.node_of, self.spans = ancestor_spans(
                shared.graph, None if max_memory is None else max_memory // BYTES_PER_INTERVAL)
            self.intervals = sum(map(len, self.spans)) // 2
        except TooManyIntervals as e:
            # Over budget: the owner drops this finder on seeing memory() > max_memory, so it
            # is never consulted; the count still says how far the lists had grown.
            self.post, self.node_of, self.spans = [], [], []
            self.intervals = e.count
        self.live = SortedList()
        self.in_live = bytearray(len(shared.graph))
        self.unchecked: deque[int] = deque()
        self.waiters: dict[int, list[int]] = {}
        self.queries = 0
        self.interval_probes = 0
        self.released = 0
        self.rebuilds = 0

    def _sync(self) -> None:
        """Bring `live` and `unchecked` up to date with the owner's activations and finishes."""
        shared = self.shared
        state = shared.state
        acts, fins = shared.act_log, shared.fin_log
        post = self.post
        in_live = self.in_live
        live = self.live
        if acts:
            new = []
            for v in acts:
                if state[v] != FINISHED:
                    in_live[v] = 1
                    new.append(post[v])
            self.unchecked.extend(acts)
            acts.clear()
            if new:
                live.update(new)
        if fins:
            gone = [v for v in fins if in_live[v]]
            if len(gone) * 8 > len(live):
                # Many removals: one filtered rebuild beats a tree removal each.
                for v in gone:
                    in_live[v] = 0
                node_of = self.node_of
                keep = [p for p in live if in_live[node_of[p]]]
                live.clear()
                live.update(keep)
                self.rebuilds += 1
            else:
                for v in gone:
                    in_live[v] = 0
                    live.remove(post[v])
            waiters = self.waiters
            if waiters:
                for v in fins:
                    ws = waiters.pop(v, None)
                    if ws:
                        self.released += len(ws)
                        self.unchecked.extend(ws)
            fins.clear()

    def blocker(self, v: int) -> int:
        """Return v's activated unfinished proper ancestor with the highest post number, or -1."""
        live = self.live
        # SortedList's public bisect/index rebuild a positional index after every change; its
        # sublists and their maxima answer "last element <= x" without that.
        maxes = live._maxes
        if not maxes:
            return -1
        lists = live._lists
        nm = len(maxes)
        sp = self.spans[v]
        end = len(sp)
        hi = self.post[v] - 1  # v's own number tops its list; its ancestors lie below it
        probes = 0
        # Walk down the live numbers and the intervals together, each bisect skipping a run of
        # the other that cannot match.
        while True:
            probes += 1
            # x = the highest live number <= hi
            pos = bisect_right(maxes, hi)
            if pos == nm:
                x = maxes[-1]
            else:
                lst = lists[pos]
                i = bisect_right(lst, hi)
                if i:
                    x = lst[i - 1]
                elif pos:
                    x = maxes[pos - 1]
                else:
                    break  # nothing live at or below hi
            # Which interval end lies just at or below x: inside an interval, x is an ancestor;
            # in a gap, the next candidate is at most the end of the interval below the gap.
            end = bisect_right(sp, x, 0, end)
            if end & 1 or (end and sp[end - 1] == x):
                self.interval_probes += probes
                return self.node_of[x]
            if not end:
                break
            hi = sp[end - 1]
        self.interval_probes += probes
        return -1

    def find(self, k: int) -> list[int]:
        """Return up to k waiting tasks with no unfinished activated ancestor."""
        self._sync()
        state = self.shared.state
        unchecked = self.unchecked
        waiters = self.waiters
        blocker = self.blocker
        out: list[int] = []
        queries = 0
        while unchecked:
            v = unchecked.popleft()
            if state[v] != WAITING:
                continue  # handed out meanwhile (by LevelBased in a hybrid)
            queries += 1
            b = blocker(v)
            if b < 0:
                out.append(v)
                if len(out) >= k:
                    break
            else:
                ws = waiters.get(b)
                if ws is None:
                    waiters[b] = [v]
                else:
                    ws.append(v)
        self.queries += queries
        return out

    def counters(self) -> dict[str, int]:
        """Return ancestor_queries, interval_probes, intervals, released, rebuilds.

        interval_probes counts search steps; intervals is the lists' size, or, when they passed
        max_memory, how many had been built when the build stopped.
        """
        return {"ancestor_queries": self.queries, "interval_probes": self.interval_probes,
                "intervals": self.intervals, "released": self.released,
                "rebuilds": self.rebuilds}

    def memory(self) -> int:
        """Return the interval lists' size: interval count times bytes per interval."""
        return self.intervals * BYTES_PER_INTERVAL


@register("logicblox")
class LogicBlox(FinderScheduler):
    """Exact readiness from ancestor interval lists and a sorted list of unfinished tasks."""

    finder_class = IntervalFinder

    def __init__(self, graph: TaskGraph, *, costs: Sequence[float] | None = None) -> None:
        super().__init__(graph, costs=costs)
