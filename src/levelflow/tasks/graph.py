"""The immutable task DAG on integer ids, with each node's level precomputed.

Constant after construction: names, children, parents, level, by_level, order.
Nothing changes; schedulers keep their own run-time state beside it.
A node's level is the longest path (in edges) from any source; sources are level 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from levelflow.errors import LevelflowError


class GraphError(LevelflowError):
    """The edges do not form a DAG on the given nodes (cycle, duplicate, unknown id).

    `kind` is "cycle" (nodes: one node on it), "duplicate" (nodes: the edge) or "" (other), so
    a caller can word the error in its own terms (a trace file names ids, not edges).
    """

    def __init__(self, message: str, kind: str = "", nodes: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.nodes = nodes


class TaskGraph:
    """A DAG of tasks on ids 0..n-1; names are only for display and I/O."""

    __slots__ = ("names", "children", "parents", "level", "num_levels", "by_level", "order",
                 "num_edges")

    def __init__(self, names: Sequence[str], edges: Iterable[tuple[int, int]]) -> None:
        n = len(names)
        self.names: tuple[str, ...] = tuple(names)
        children: list[list[int]] = [[] for _ in range(n)]
        parents: list[list[int]] = [[] for _ in range(n)]
        seen: set[int] = set()
        m = 0
        for u, v in edges:
            if not (0 <= u < n and 0 <= v < n):
                raise GraphError(f"edge ({u}, {v}) names a node outside 0..{n - 1}")
            key = u * n + v
            if key in seen:
                raise GraphError(f"duplicate edge {self.names[u]} -> {self.names[v]}",
                                 "duplicate", (u, v))
            seen.add(key)
            children[u].append(v)
            parents[v].append(u)
            m += 1
        self.num_edges = m
        self.children: tuple[tuple[int, ...], ...] = tuple(map(tuple, children))
        self.parents: tuple[tuple[int, ...], ...] = tuple(map(tuple, parents))
        self.order, self.level = self._levels()
        self.num_levels = (max(self.level) + 1) if n else 0
        by_level: list[list[int]] = [[] for _ in range(self.num_levels)]
        for v in range(n):
            by_level[self.level[v]].append(v)
        self.by_level: tuple[tuple[int, ...], ...] = tuple(map(tuple, by_level))

    def _levels(self) -> tuple[tuple[int, ...], list[int]]:
        """Return a topological order and the longest-path level of every node (Kahn, O(V+E))."""
        n = len(self.names)
        indeg = [len(p) for p in self.parents]
        level = [0] * n
        order = [v for v in range(n) if indeg[v] == 0]
        children = self.children
        i = 0
        while i < len(order):
            u = order[i]
            i += 1
            lu = level[u] + 1
            for v in children[u]:
                if level[v] < lu:
                    level[v] = lu
                indeg[v] -= 1
                if indeg[v] == 0:
                    order.append(v)
        if len(order) < n:
            v = self._on_cycle(indeg)
            raise GraphError(f"the graph has a cycle through node {self.names[v]}", "cycle", (v,))
        return tuple(order), level

    def _on_cycle(self, indeg: list[int]) -> int:
        """Return a node that lies on a cycle, given the in-degrees left after Kahn's algorithm."""
        # Every node left with indeg > 0 has a leftover parent; walking parents must revisit one.
        v = next(u for u, d in enumerate(indeg) if d > 0)
        visited: set[int] = set()
        while v not in visited:
            visited.add(v)
            v = next(p for p in self.parents[v] if indeg[p] > 0)
        return v

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"TaskGraph(nodes={len(self)}, edges={self.num_edges}, levels={self.num_levels})"

    @property
    def sources(self) -> list[int]:
        """Return the ids of nodes with no parents."""
        return [v for v in range(len(self.names)) if not self.parents[v]]

    def index(self) -> dict[str, int]:
        """Return a map from name to id (built on demand: hot paths stay on ids)."""
        return {name: i for i, name in enumerate(self.names)}

    @classmethod
    def from_named_edges(cls, names: Sequence[str],
                         edges: Iterable[tuple[str, str]]) -> TaskGraph:
        """Return the graph on `names` with edges given by name."""
        idx = {name: i for i, name in enumerate(names)}
        try:
            pairs = [(idx[u], idx[v]) for u, v in edges]
        except KeyError as e:
            raise GraphError(f"edge names unknown node {e.args[0]}") from None
        return cls(names, pairs)
