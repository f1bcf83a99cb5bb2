"""LogicBlox: ancestor interval lists are exact, readiness is exact, blocked tasks are parked."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from test_scheduler_driver import ancestors, drive, exactly_ready, graph_of, random_case

from levelflow.scheduler import LogicBlox
from levelflow.scheduler.intervals import BYTES_PER_INTERVAL, ancestor_spans, merge
from levelflow.tasks.graph import TaskGraph


def expand(spans: tuple[int, ...]) -> set[int]:
    """Return the post numbers covered by a flat interval list."""
    return {p for a, b in zip(spans[::2], spans[1::2], strict=True) for p in range(a, b + 1)}


@pytest.mark.parametrize("seed", range(30))
def test_interval_lists_match_networkx_ancestors(seed):
    g, _, _ = random_case(seed, n=60, p_edge=0.08)
    post, node_of, spans = ancestor_spans(g)
    assert sorted(post) == list(range(len(g)))
    assert all(node_of[post[v]] == v for v in range(len(g)))
    nxg = nx.DiGraph()
    nxg.add_nodes_from(range(len(g)))
    nxg.add_edges_from((u, c) for u in range(len(g)) for c in g.children[u])
    for v in range(len(g)):
        want = {post[u] for u in nx.ancestors(nxg, v)} | {post[v]}
        assert expand(spans[v]) == want
        sp = spans[v]  # sorted, disjoint, not adjacent: merged as far as possible
        assert all(sp[i] <= sp[i + 1] for i in range(len(sp) - 1))
        assert all(sp[i + 1] > sp[i] + 1 for i in range(1, len(sp) - 1, 2))


def test_merge_joins_overlapping_and_adjacent_intervals():
    assert merge([(5, 6), (0, 2), (3, 3), (8, 9), (9, 12)]) == (0, 3, 5, 6, 8, 12)
    assert merge([(0, 10), (2, 3), (5, 6), (12, 14)]) == (0, 10, 12, 14)  # nested ones vanish


@pytest.mark.parametrize("seed", range(50))
def test_merge_is_the_union_of_the_intervals(seed):
    rnd = random.Random(seed)
    pieces = []
    for _ in range(rnd.randrange(1, 12)):
        a = rnd.randrange(40)
        pieces.append((a, a + rnd.randrange(6)))
    covered = {p for a, b in pieces for p in range(a, b + 1)}
    flat = merge(list(pieces))
    assert expand(flat) == covered
    # maximal runs: each interval starts and ends next to an uncovered number
    assert all(flat[i] - 1 not in covered for i in range(0, len(flat), 2))
    assert all(flat[i] + 1 not in covered for i in range(1, len(flat), 2))


def test_deep_graph_needs_no_recursion():
    """A 50,000-node chain would overflow a recursive DFS."""
    n = 50_000
    g = TaskGraph([str(i) for i in range(n)], [(i, i + 1) for i in range(n - 1)])
    post, _, spans = ancestor_spans(g)
    assert tuple(spans[n - 1]) == (0, n - 1) and post[0] == 0


@pytest.mark.parametrize("seed", range(40))
def test_readiness_is_exact_on_random_dags(seed):
    g, initial, acts = random_case(seed)
    drive(LogicBlox(g), g, initial, acts, P=len(g), exact=exactly_ready(g, initial, acts))


def test_ready_across_levels_on_an_uneven_diamond():
    """
        a          a activates b and x; b activates c; x activates nothing
       / \\
      b   x        x is slow: LogicBlox still runs c as soon as b is done,
      |   |        because the only activated ancestors of c are a and b;
      c   y        d waits for x (an activated ancestor through y).
       \\ /
        d
    """
    g = graph_of("a>b a>x b>c x>y c>d y>d")
    i = g.index()
    s = LogicBlox(g)
    s.activate([i["a"]])
    assert s.get_ready(4) == [i["a"]]
    s.done(i["a"], [i["b"], i["x"]])
    assert sorted(s.get_ready(4)) == [i["b"], i["x"]]
    s.done(i["b"], [i["c"]])
    assert s.get_ready(4) == [i["c"]]
    s.done(i["c"], [i["d"]])
    assert s.get_ready(4) == []  # x (ancestor of d through y) still runs
    s.done(i["x"])
    assert s.get_ready(4) == [i["d"]]


def test_blocked_tasks_are_queried_again_only_when_their_blocker_finishes():
    """
           r                 r activates all of w0..w99; each wi waits on r only.
       /  / \\  \\
     w0 w1 ... w99

    Asking for ready tasks many times while r runs must not re-query the waiting tasks.
    """
    n = 100
    g = TaskGraph(["r"] + [f"w{i}" for i in range(n)], [(0, i) for i in range(1, n + 1)])
    s = LogicBlox(g)
    s.activate(range(n + 1))
    assert s.get_ready(1) == [0]
    assert s.get_ready(1) == []  # queries every wi once and parks it on r
    first = s.counters()["ancestor_queries"]
    assert first == n + 1
    for _ in range(50):
        assert s.get_ready(1) == []
    assert s.counters()["ancestor_queries"] == first  # nothing changed, nothing re-queried
    s.done(0)
    got = s.get_ready(n)
    assert sorted(got) == list(range(1, n + 1))
    assert s.counters()["ancestor_queries"] <= 2 * (n + 1)


def test_memory_is_interval_count_times_bytes_per_interval():
    g, _, _ = random_case(1, n=50)
    s = LogicBlox(g)
    _, _, spans = ancestor_spans(g)
    count = sum(len(sp) for sp in spans) // 2
    assert s.counters()["intervals"] == count
    assert s.memory() == count * BYTES_PER_INTERVAL


@pytest.mark.parametrize("seed", range(30))
def test_blocker_is_the_live_ancestor_numbered_highest(seed):
    """Cross-check the interval search against a plain scan of v's ancestors."""
    rnd = random.Random(seed)
    g, _, _ = random_case(seed, n=60, p_edge=0.1)
    s = LogicBlox(g)
    live = rnd.sample(range(len(g)), rnd.randrange(1, len(g)))
    s.activate(live)
    f = s.finder
    f._sync()
    post = f.post
    for v in range(len(g)):
        blockers = ancestors(g, v) & set(live)
        b = f.blocker(v)
        if not blockers:
            assert b == -1
        else:
            assert b == max(blockers, key=post.__getitem__)
            # so no other blocker descends from it: it is the last of its chain to finish
            assert not any(b in ancestors(g, u) for u in blockers)


def test_a_task_behind_a_chain_of_blockers_is_not_queried_once_per_link():
    """
      r0 > r1 > ... > r49      all activated at once; each ri waits on r(i-1) only
                        \\
                    w0 ... w19  each wj waits on every ri

    A waiting task is parked on the blocker that finishes last (r49), not on r0, then r1, ...
    """
    m, n = 50, 20
    g = graph_of(" ".join(f"r{i}>r{i + 1}" for i in range(m - 1)) + " "
                 + " ".join(f"r{m - 1}>w{j}" for j in range(n)))
    initial = list(range(len(g)))
    drive(LogicBlox(g), g, initial, {}, P=len(g), exact=exactly_ready(g, initial, {}))
    s = LogicBlox(g)
    drive(s, g, initial, {}, P=len(g))
    # each task: one query when activated, one when its last blocker finishes
    assert s.counters()["ancestor_queries"] <= 2 * (m + n)
    assert s.counters()["released"] == m - 1 + n


@pytest.mark.parametrize("seed", range(20))
def test_readiness_is_exact_on_deep_random_dags_with_few_processors(seed):
    """Long chains of blockers, tasks finishing in a random order, P smaller than the ready set."""
    g, initial, acts = random_case(seed, n=80, p_edge=0.06, p_act=0.8)
    rnd = random.Random(seed)
    drive(LogicBlox(g), g, initial, acts, P=3, finish=lambda running: rnd.randrange(len(running)))


def test_sortedlist_internals_logicblox_reads_are_as_it_assumes():
    """LogicBlox's blocker() reads SortedList._maxes and _lists: sorted sublists, their maxima."""
    from sortedcontainers import SortedList

    rng = random.Random(5)
    live = SortedList()
    for _ in range(5000):
        x = rng.randrange(3000)
        if x in live and rng.random() < 0.4:
            live.remove(x)
        else:
            live.add(x)
    assert [x for lst in live._lists for x in lst] == list(live)
    assert live._maxes == [lst[-1] for lst in live._lists]
