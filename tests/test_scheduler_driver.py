"""A tiny serial driver and brute-force references for the scheduler unit tests, and tests that
the driver's checks do catch a broken scheduler.

The other scheduler test files import it. `levelflow.driver` has the real loop; this one only needs
to be obviously right.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

import pytest

from levelflow.scheduler import LevelBased
from levelflow.tasks.graph import TaskGraph


def graph_of(spec: str) -> TaskGraph:
    """Return the graph of a spec like 'a>b a>c b>d' (nodes in order of first mention)."""
    names: list[str] = []
    edges = []
    for item in spec.split():
        if ">" in item:
            u, v = item.split(">")
            for x in (u, v):
                if x not in names:
                    names.append(x)
            edges.append((u, v))
        elif item not in names:
            names.append(item)
    return TaskGraph.from_named_edges(names, edges)


def ancestors(graph: TaskGraph, v: int) -> set[int]:
    """Return v's proper ancestors in G by a plain walk over parents."""
    seen: set[int] = set()
    stack = list(graph.parents[v])
    while stack:
        u = stack.pop()
        if u not in seen:
            seen.add(u)
            stack.extend(graph.parents[u])
    return seen


def closure(initial: Iterable[int], acts: dict[int, Iterable[int]]) -> set[int]:
    """Return W: the closure of the initial tasks under the activations."""
    w = set(initial)
    stack = list(w)
    while stack:
        for c in acts.get(stack.pop(), ()):
            if c not in w:
                w.add(c)
                stack.append(c)
    return w


def random_case(seed: int, n: int = 30, p_edge: float = 0.15, p_act: float = 0.5):
    """Return (graph, initial, activations) of a random DAG with random activations."""
    rnd = random.Random(seed)
    perm = list(range(n))
    rnd.shuffle(perm)  # ids need not be in topological order
    edges = [(perm[i], perm[j]) for i in range(n) for j in range(i + 1, n)
             if rnd.random() < p_edge]
    graph = TaskGraph([f"t{i}" for i in range(n)], edges)
    initial = rnd.sample(range(n), max(1, n // 8))
    acts = {v: tuple(c for c in graph.children[v] if rnd.random() < p_act) for v in range(n)}
    return graph, initial, acts


def drive(s, graph: TaskGraph, initial: Iterable[int], acts: dict[int, Iterable[int]], P: int,
          finish: Callable[[list[int]], int] = lambda running: 0,
          exact: Callable[[set[int]], set[int]] | None = None) -> list[list[int]]:
    """Run a scheduler serially to the end; return the batches it handed out, in order.

    Asserts on every hand-out that all ancestors in W of the task have finished, that nothing is
    handed out twice, and at the end that exactly W ran. `finish(running)` picks the index of
    the running task to finish next. If `exact` is given, every get_ready(P) with all P
    processors idle must hand out exactly exact(finished) (capped at P).
    """
    w = closure(initial, acts)
    anc = {v: ancestors(graph, v) & w for v in w}
    s.activate(initial)
    finished: set[int] = set()
    running: list[int] = []
    batches: list[list[int]] = []
    while True:
        batch = s.get_ready(P - len(running))
        assert len(batch) <= P - len(running)
        if exact is not None and not running:
            want = exact(finished)
            assert len(batch) == min(P, len(want)) and set(batch) <= want, (batch, want)
        for v in batch:
            assert v in w, f"{v} is not in W"
            assert v not in finished and v not in running, f"{v} handed out twice"
            assert anc[v] <= finished, f"{v} started before its ancestors {anc[v] - finished}"
        running.extend(batch)
        if batch:
            batches.append(batch)
        if not running:
            break
        v = running.pop(finish(running))
        finished.add(v)
        s.done(v, acts.get(v, ()))
    assert finished == w
    assert not s.is_active()
    return batches


def exactly_ready(graph: TaskGraph, initial, acts):
    """Return a function: finished set -> the tasks ready under exact readiness."""
    w = closure(initial, acts)
    anc = {v: ancestors(graph, v) for v in range(len(graph))}

    def ready(finished: set[int]) -> set[int]:
        activated = set(initial) | {c for v in finished for c in acts.get(v, ())}
        return {v for v in activated - finished
                if not (anc[v] & (activated - finished))} & w

    return ready


class Eager(LevelBased):
    """A broken scheduler: hands out every activated task at once, ignoring ancestors."""

    def get_ready(self, k):
        out = []
        for lv in range(len(self._waiting)):
            out += [v for v in self._waiting[lv] if self._state[v] == 1][:k - len(out)]
            self._waiting[lv] = [v for v in self._waiting[lv] if v not in out]
        for v in out:
            self._state[v] = 2
        return out


def test_the_driver_catches_a_task_started_before_its_ancestor():
    g = graph_of("a>b")
    with pytest.raises(AssertionError, match="started before its ancestors"):
        drive(Eager(g), g, [0, 1], {}, P=2)


def test_the_driver_catches_an_inexact_ready_set():
    g = graph_of("a>b c")
    ready = exactly_ready(g, [0, 2], {0: (1,)})
    assert ready(set()) == {0, 2} and ready({0, 2}) == {1}
    with pytest.raises(AssertionError):
        drive(LevelBased(g), g, [0], {0: (1,)}, P=1, exact=lambda finished: {0, 2})


def test_closure_and_ancestors_are_plain_references():
    g = graph_of("a>b b>c a>d")
    assert ancestors(g, 2) == {0, 1} and ancestors(g, 0) == set()
    assert closure([0], {0: (1,), 1: (2,), 3: (0,)}) == {0, 1, 2}
