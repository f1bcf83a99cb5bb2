"""Signal: brute-force signal propagation; exact readiness at O(V + E) per run.

Constant: the graph.
Changes: missing[v] = parents that have not signalled v yet; resolved[v] = READY once v is an
activated task known ready, SIGNALLED once v has signalled its children; found = tasks known ready
(stale entries, handed out by LevelBased in a hybrid, are dropped when met).

Every node waits for a signal from every parent. A node all of whose parents have signalled can no
longer be activated: if it is not activated by then it signals at once, a finished task signals,
and an activated one is ready. Propagation starts at the first get_ready, so the initial
activation is seen first; it touches every node and edge once whatever the active set's size.
"""

from __future__ import annotations

from collections.abc import Sequence

from levelflow.scheduler.core import FINISHED, IDLE, WAITING, Finder, FinderScheduler, Shared
from levelflow.scheduler.registry import register
from levelflow.tasks.graph import TaskGraph

READY, SIGNALLED = 1, 2


class SignalFinder(Finder):
    """Finds ready tasks by propagating signals from the sources through all of G."""

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        shared.act_log = None  # the state array says who is activated; only finishes matter
        graph = shared.graph
        self.missing = [len(p) for p in graph.parents]
        self.resolved = bytearray(len(graph))
        self.found: list[int] = []
        self.started = False
        self.signals = 0
        self.nodes_resolved = 0

    def check_activate(self, tasks: list[int]) -> None:
        """Refuse to activate a node already resolved as unchanged: its children moved on."""
        resolved = self.resolved
        state = self.shared.state
        for v in tasks:
            if resolved[v] == SIGNALLED and state[v] == IDLE:
                raise ValueError(f"activate: task {self.shared.name(v)} was already passed over "
                                 f"as unchanged; its descendants may have started")

    def _resolve(self, stack: list[int]) -> None:
        """Propagate from nodes whose parents have all signalled (the stack), as far as it goes."""
        state = self.shared.state
        children = self.shared.graph.children
        missing = self.missing
        resolved = self.resolved
        found = self.found
        signals = 0
        nodes = 0
        while stack:
            v = stack.pop()
            s = state[v]
            if s == WAITING:
                if not resolved[v]:
                    resolved[v] = READY
                    found.append(v)
                continue
            if (s != IDLE and s != FINISHED) or resolved[v] == SIGNALLED:
                continue  # a running task signals when it finishes
            resolved[v] = SIGNALLED
            nodes += 1
            for c in children[v]:
                signals += 1
                missing[c] -= 1
                if not missing[c]:
                    stack.append(c)
        self.signals += signals
        self.nodes_resolved += nodes

    def find(self, k: int) -> list[int]:
        """Return up to k waiting tasks all of whose ancestors have signalled."""
        missing = self.missing
        fins = self.shared.fin_log
        if not self.started:
            self.started = True
            fins.clear()  # the full sweep below sees their FINISHED state
            self._resolve([v for v in range(len(missing)) if not missing[v]])
        elif fins:
            # A finished task whose parents have not all signalled yet (LevelBased ran it) is
            # picked up when its last parent signals.
            self._resolve([v for v in fins if not missing[v]])
            fins.clear()
        found = self.found
        state = self.shared.state
        out: list[int] = []
        while found and len(out) < k:
            v = found.pop()
            # Others were handed out by LevelBased meanwhile; their finish signals as usual.
            if state[v] == WAITING:
                out.append(v)
        return out

    def counters(self) -> dict[str, int]:
        """Return signals (edges signalled along) and nodes_resolved."""
        return {"signals": self.signals, "nodes_resolved": self.nodes_resolved}

    def memory(self) -> int:
        """Return the per-node counters' and flags' size in bytes."""
        return 9 * len(self.missing) + 8 * len(self.found)


@register("signal")
class Signal(FinderScheduler):
    """Exact readiness by propagating a signal along every edge of G."""

    finder_class = SignalFinder

    def __init__(self, graph: TaskGraph, *, costs: Sequence[float] | None = None) -> None:
        super().__init__(graph, costs=costs)
