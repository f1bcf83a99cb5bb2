"""LevelBased: the lowest unfinished level runs; counts grow linearly; policy is pluggable."""

from __future__ import annotations

import heapq

import pytest
from test_scheduler_driver import closure, drive, graph_of, random_case

from levelflow.scheduler import LevelBased, make_scheduler
from levelflow.scheduler.registry import _REGISTRY, register
from levelflow.tasks.graph import TaskGraph


def level_reference(graph, initial, acts):
    """Return: finished set -> activated unfinished tasks at the lowest such level."""
    def ready(finished):
        activated = (set(initial) | {c for v in finished for c in acts.get(v, ())}) - finished
        if not activated:
            return set()
        low = min(graph.level[v] for v in activated)
        return {v for v in activated if graph.level[v] == low}
    return ready


def test_ready_sets_on_a_diamond_with_a_long_arm():
    """
        a       level 0
       / \\
      b   c     level 1
      |   |
      |   d     level 2
       \\ /
        e       level 3

    a activates b and c; b activates e; c activates nothing. d is never activated, yet LevelBased
    must pass level 2 to reach e; c and b run together.
    """
    g = graph_of("a>b a>c c>d b>e d>e")
    i = g.index()
    acts = {i["a"]: (i["b"], i["c"]), i["b"]: (i["e"],)}
    s = LevelBased(g)
    batches = drive(s, g, [i["a"]], acts, P=4)
    names = [sorted(g.names[v] for v in b) for b in batches]
    assert names == [["a"], ["b", "c"], ["e"]]


def test_level_waits_for_a_running_task_at_its_own_level():
    """
      a   b        level 0 (a slow, b fast)
      |   |
      c   d        level 1

    With b finished and a still running, d (level 1) must wait although its only parent is done:
    that is the level rule's price.
    """
    g = graph_of("a>c b>d")
    i = g.index()
    s = LevelBased(g)
    s.activate([i["a"], i["b"]])
    assert sorted(s.get_ready(4)) == [i["a"], i["b"]]
    s.done(i["b"], [i["d"]])
    assert s.get_ready(4) == []
    s.done(i["a"], [i["c"]])
    assert sorted(s.get_ready(4)) == [i["c"], i["d"]]


def test_renamed_nodes_give_the_same_schedule():
    """The same graph with other names and shuffled ids hands out the same tasks in each batch."""
    g = graph_of("a>b a>c b>d c>d d>e c>f f>g")
    i = g.index()
    acts = {i["a"]: (i["b"], i["c"]), i["b"]: (i["d"],), i["c"]: (i["f"], i["d"]),
            i["d"]: (i["e"],), i["f"]: (i["g"],)}
    base = [sorted(g.names[v] for v in b) for b in drive(LevelBased(g), g, [i["a"]], acts, 2)]
    rename = {x: f"zz{ord(x)}" for x in "abcdefg"}
    order = ["g", "e", "d", "f", "c", "b", "a"]
    h = TaskGraph.from_named_edges([rename[x] for x in order],
                                   [(rename[u], rename[v]) for u, v in
                                    [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e"),
                                     ("c", "f"), ("f", "g")]])
    j = h.index()
    acts_h = {j[rename[g.names[u]]]: tuple(j[rename[g.names[c]]] for c in cs)
              for u, cs in acts.items()}
    back = {rename[x]: x for x in rename}
    other = [sorted(back[h.names[v]] for v in b)
             for b in drive(LevelBased(h), h, [j[rename["a"]]], acts_h, 2)]
    assert other == base


@pytest.mark.parametrize("seed", range(40))
def test_random_dags_hand_out_exactly_the_lowest_level(seed):
    """On random DAGs every all-idle get_ready returns the lowest activated level (reference)."""
    g, initial, acts = random_case(seed)
    drive(LevelBased(g), g, initial, acts, P=len(g), exact=level_reference(g, initial, acts))
    # and with few processors and newest-first finishing it stays valid
    drive(LevelBased(g), g, initial, acts, P=3, finish=lambda running: len(running) - 1)


def test_default_pick_is_id_order_within_a_level():
    g = TaskGraph([f"t{i}" for i in range(6)], [])
    s = LevelBased(g)
    s.activate([4, 1, 5])
    s.activate([0, 3])
    assert s.get_ready(2) == [0, 1]
    s.activate([2])  # arrives later, still goes before the larger ids
    assert s.get_ready(10) == [2, 3, 4, 5]


def _reference_levelbased(trace, P: int) -> float:
    """Return the makespan of the LevelBased paper's reference simulator: a level's active tasks
    in id order, list-scheduled on P processors, with a barrier between levels."""
    active = set(trace.initial)
    for v in sorted(active):  # ids grow with levels here, so parents come first
        active |= set(trace.activated_by(v))
    t = 0.0
    for level in trace.graph.by_level:
        free = [t] * P
        for v in sorted(level):
            if v in active:
                p = min(range(P), key=lambda i: (free[i], i))
                free[p] += trace.durations[v]
        t = max(free)
    return t


def test_levelbased_makespan_matches_the_reference_simulator_where_order_matters():
    r"""
      a(1)  b(2)        level 0: a finishes first, so FIFO would admit d and e before c
      / \    |
    d(1) e(1) c(3)      level 1: id order runs c (id 2) first: 2 + 3 = 5; FIFO gives 2 + 4
    """
    from levelflow.simulator import simulate
    from levelflow.traces.model import JobTrace

    g = TaskGraph(["a", "b", "c", "d", "e"], [(0, 3), (0, 4), (1, 2)])
    trace = JobTrace(g, [1.0, 2.0, 3.0, 1.0, 1.0], (0, 1), None)
    assert _reference_levelbased(trace, 2) == 5.0
    assert simulate(trace, "levelbased", processors=2).makespan == 5.0


def test_misuse_raises_value_error_naming_the_task():
    g = graph_of("a>b b>c")
    s = LevelBased(g)
    with pytest.raises(ValueError, match="'a'"):
        s.done(0)  # not running
    s.activate([0])
    assert s.get_ready(1) == [0]
    with pytest.raises(ValueError, match="'c'.*not one of its children"):
        s.done(0, [2])
    assert s.is_active()  # the failed done left the task running
    s.done(0, [1])
    with pytest.raises(ValueError, match="'a'"):
        s.activate([0])  # already finished
    with pytest.raises(ValueError, match="'a'"):
        s.done(0)  # finished, not running
    with pytest.raises(ValueError, match="id 7"):
        s.activate([7])


def test_activation_below_the_current_level_steps_back():
    """
      a     x      level 0
     / \\
    b   c          level 1

    a has finished, b runs and c is admitted; the driver now activates x (level 0; not an
    ancestor of c, but LevelBased cannot know that): x runs before c.
    """
    g = graph_of("a>b a>c x")
    i = g.index()
    s = LevelBased(g)
    s.activate([i["a"]])
    [a] = s.get_ready(2)
    s.done(a, [i["b"], i["c"]])
    assert s.get_ready(1) == [i["b"]]
    s.activate([i["x"]])
    assert s.get_ready(2) == [i["x"]]
    assert s.get_ready(2) == []
    s.done(i["x"])
    assert s.get_ready(2) == [i["c"]]


def _layered(width: int, levels: int) -> tuple[TaskGraph, dict]:
    """Return a layered DAG (each node feeds two nodes of the next layer) and full activations."""
    n = width * levels
    edges = [(lv * width + j, (lv + 1) * width + (j + d) % width)
             for lv in range(levels - 1) for j in range(width) for d in (0, 1)]
    g = TaskGraph([str(v) for v in range(n)], edges)
    return g, {v: g.children[v] for v in range(n)}


def _count(width, levels):
    g, acts = _layered(width, levels)
    s = LevelBased(g)
    drive(s, g, range(width), acts, P=4)
    return s.counters()


def test_counters_grow_linearly_in_n_and_levels():
    """Doubling both the width and the number of levels quadruples n: the counts follow n + L."""
    small = _count(10, 20)
    big = _count(20, 40)
    for key in ("activations", "handed_out", "admitted", "finished"):
        assert big[key] == 4 * small[key]  # n quadruples
    assert small["levels_scanned"] == 20 and big["levels_scanned"] == 40  # L doubles
    deep = _count(10, 40)  # n and L both double
    for key in ("activations", "handed_out", "admitted", "levels_scanned"):
        assert deep[key] == 2 * small[key]


class LongestFirst(LevelBased):
    """LevelBased, but within the ready set of level l the longest task (by costs) runs first."""

    def admit(self, ready, new):
        costs = self.costs
        for v in new:
            heapq.heappush(ready, (-costs[v], v))

    def pick(self, ready, k):
        return [heapq.heappop(ready)[1] for _ in range(min(k, len(ready)))]


def test_custom_policy_longest_first_within_a_level():
    """
      s            level 0
     /|\\ \\
    a b c d        level 1, costs 1 4 2 3

    With one processor the level-1 tasks run longest first: b d c a.
    """
    g = graph_of("s>a s>b s>c s>d")
    i = g.index()
    costs = [0.0] * len(g)
    for name, c in zip("abcd", (1, 4, 2, 3), strict=True):
        costs[i[name]] = c
    acts = {i["s"]: g.children[i["s"]]}
    batches = drive(LongestFirst(g, costs=costs), g, [i["s"]], acts, P=1)
    assert [g.names[b[0]] for b in batches] == ["s", "b", "d", "c", "a"]


def test_custom_policy_is_usable_through_the_registry():
    register("test-longest")(LongestFirst)
    try:
        g, initial, acts = random_case(3)
        costs = [float((v * 7) % 5) for v in range(len(g))]
        s = make_scheduler("test-longest", g, costs=costs)
        assert isinstance(s, LongestFirst) and s.costs is costs
        assert closure(initial, acts) == {v for b in drive(s, g, initial, acts, 2) for v in b}
    finally:
        _REGISTRY.pop("test-longest")
