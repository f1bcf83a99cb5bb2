"""TaskGraph: levels are longest paths from a source; misuse is a one-line GraphError."""

from __future__ import annotations

import random

import pytest

from levelflow.errors import LevelflowError
from levelflow.tasks import GraphError, TaskGraph


def graph(spec: str) -> TaskGraph:
    """Return the graph of `a->b b->c ...` (nodes in order of first mention)."""
    names: list[str] = []
    edges: list[tuple[str, str]] = []
    for token in spec.split():
        u, v = token.split("->")
        for x in (u, v):
            if x not in names:
                names.append(x)
        edges.append((u, v))
    return TaskGraph.from_named_edges(names, edges)


def levels_by_name(g: TaskGraph) -> dict[str, int]:
    return {name: g.level[i] for i, name in enumerate(g.names)}


def reference_levels(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Longest path into each node by relaxing every edge n times (Bellman-Ford style)."""
    level = [0] * n
    for _ in range(n):
        for u, v in edges:
            level[v] = max(level[v], level[u] + 1)
    return level


def test_diamond_with_a_shortcut():
    r"""
        a
       / \
      b   c
       \ / \
        d   |
         \  |
          e-+      (a->e is a shortcut: e's level is still 3, the longest path a-b-d-e)
    """
    g = graph("a->b a->c b->d c->d d->e c->e a->e")
    assert levels_by_name(g) == {"a": 0, "b": 1, "c": 1, "d": 2, "e": 3}
    assert g.num_levels == 4
    assert [sorted(g.names[v] for v in lvl) for lvl in g.by_level] == [
        ["a"], ["b", "c"], ["d"], ["e"]]


def test_two_sources_and_an_isolated_node():
    r"""
      a   x   z
      |   |
      b   |
       \ /
        c
    """
    g = TaskGraph.from_named_edges(["a", "b", "x", "c", "z"],
                                   [("a", "b"), ("b", "c"), ("x", "c")])
    assert levels_by_name(g) == {"a": 0, "b": 1, "x": 0, "c": 2, "z": 0}
    assert sorted(g.names[v] for v in g.sources) == ["a", "x", "z"]
    assert g.parents[g.index()["c"]] == (1, 2)


def test_order_is_topological_and_complete():
    g = graph("c->a a->b c->b d->c")
    pos = {v: i for i, v in enumerate(g.order)}
    assert sorted(g.order) == list(range(len(g)))
    for u in range(len(g)):
        for v in g.children[u]:
            assert pos[u] < pos[v]


def test_empty_graph():
    g = TaskGraph([], [])
    assert len(g) == 0 and g.num_levels == 0 and g.by_level == () and g.sources == []


def test_random_dags_match_the_reference_and_renaming_keeps_levels():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 12)
        rank = list(range(n))
        rng.shuffle(rank)  # edges go from lower to higher rank: acyclic, ids in any order
        edges = sorted({(u, v) for u in range(n) for v in range(n)
                        if rank[u] < rank[v] and rng.random() < 0.3})
        g = TaskGraph([f"t{i}" for i in range(n)], edges)
        assert g.level == reference_levels(n, edges)
        assert g.num_edges == len(edges)
        # Renamed and renumbered: node i becomes perm[i]; each node keeps its level.
        perm = list(range(n))
        rng.shuffle(perm)
        names = [""] * n
        for i in range(n):
            names[perm[i]] = f"renamed{i}"
        h = TaskGraph(names, [(perm[u], perm[v]) for u, v in edges])
        assert [h.level[perm[i]] for i in range(n)] == g.level


def _on_a_cycle(n: int, edges: list[tuple[int, int]], node: int) -> bool:
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        succ[u].append(v)
    seen, todo = set(), list(succ[node])
    while todo:
        x = todo.pop()
        if x == node:
            return True
        if x not in seen:
            seen.add(x)
            todo.extend(succ[x])
    return False


def test_cycle_error_names_a_node_on_the_cycle():
    r"""
      a -> b -> c -> d
           ^         |
           +---------+      (a is not on the cycle: the named node must be b, c or d)
    """
    with pytest.raises(GraphError) as e:
        graph("a->b b->c c->d d->b")
    assert isinstance(e.value, LevelflowError)
    named = str(e.value).rsplit(" ", 1)[1]
    assert named in {"b", "c", "d"}
    assert str(e.value) == f"the graph has a cycle through node {named}"


def test_random_cycles_name_a_node_on_a_cycle():
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(2, 10)
        edges = sorted({(u, v) for u in range(n) for v in range(n)
                        if u != v and rng.random() < 0.25})
        names = [f"n{i}" for i in range(n)]
        try:
            TaskGraph(names, edges)
        except GraphError as e:
            node = names.index(str(e).rsplit(" ", 1)[1])
            assert _on_a_cycle(n, edges, node)
        else:
            assert not any(_on_a_cycle(n, edges, v) for v in range(n))


def test_self_loop_is_a_cycle():
    with pytest.raises(GraphError, match="cycle through node a"):
        TaskGraph(["a", "b"], [(0, 1), (0, 0)])


def test_duplicate_edge_is_an_error():
    with pytest.raises(GraphError) as e:
        graph("a->b b->c a->b")
    assert str(e.value) == "duplicate edge a -> b"


def test_edge_outside_the_nodes_is_an_error():
    with pytest.raises(GraphError, match=r"edge \(0, 3\) names a node outside 0..2"):
        TaskGraph(["a", "b", "c"], [(0, 3)])
    with pytest.raises(GraphError, match="unknown node q"):
        TaskGraph.from_named_edges(["a"], [("a", "q")])
