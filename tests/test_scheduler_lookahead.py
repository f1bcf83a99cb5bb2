"""LookAhead(K): when level cur runs dry, ready tasks in the next K levels run too."""

from __future__ import annotations

import pytest
from test_scheduler_driver import drive, graph_of, random_case

from levelflow.scheduler import LookAhead, SchedulerSpecError, make_scheduler


def chains():
    """
      a1   b1        level 0   (a1 is slow)
      |    |
      a2   b2        level 1
      |    |
      a3   b3        level 2
           |
           b4        level 3
    """
    g = graph_of("a1>a2 a2>a3 b1>b2 b2>b3 b3>b4")
    return g, g.index()


def test_runs_ready_tasks_of_later_levels_while_a_slow_task_holds_its_level():
    g, i = chains()
    s = LookAhead(g, "15")
    s.activate([i["a1"], i["b1"]])
    assert sorted(s.get_ready(2)) == [i["a1"], i["b1"]]
    s.done(i["b1"], [i["b2"]])
    assert s.get_ready(1) == [i["b2"]]  # level 1, while level 0 still runs a1
    s.done(i["b2"], [i["b3"]])
    assert s.get_ready(1) == [i["b3"]]
    s.done(i["b3"], [i["b4"]])
    assert s.get_ready(1) == [i["b4"]]


def test_k_bounds_how_far_ahead_it_looks():
    g, i = chains()
    s = LookAhead(g, "1")
    s.activate([i["a1"], i["b1"]])
    s.get_ready(2)
    s.done(i["b1"], [i["b2"]])
    assert s.get_ready(1) == [i["b2"]]  # level 1 = cur + 1
    s.done(i["b2"], [i["b3"]])
    assert s.get_ready(1) == []  # level 2 is beyond cur + K
    s.done(i["a1"])
    assert s.get_ready(1) == [i["b3"]]


def test_an_activated_ancestor_in_the_band_blocks():
    """
      a    s        level 0 (a slow)
      |    |
      x    |        level 1: x activated, waiting for a
       \\  |
        y  t        level 2: y (child of x) must wait for x; t runs
    """
    g = graph_of("a>x x>y s>y s>t")
    i = g.index()
    s = LookAhead(g)
    s.activate([i["a"], i["x"], i["s"]])
    assert sorted(s.get_ready(3)) == [i["a"], i["s"]]
    s.done(i["s"], [i["y"], i["t"]])
    assert s.get_ready(3) == [i["t"]]


def test_a_blocked_search_is_not_repeated_until_its_blocker_finishes():
    g, i = chains()
    s = LookAhead(g, "3")
    s.activate([i["a1"], i["a2"], i["b1"]])
    s.get_ready(2)
    assert s.get_ready(1) == []  # a2 searched once, blocked by a1
    searches = s.counters()["searches"]
    for _ in range(20):
        assert s.get_ready(1) == []
    assert s.counters()["searches"] == searches
    s.done(i["b1"])  # not a2's blocker: a2 is still not searched again
    assert s.get_ready(1) == []
    assert s.counters()["searches"] == searches


@pytest.mark.parametrize("seed", range(30))
def test_random_dags_stay_valid(seed):
    g, initial, acts = random_case(seed)
    for k in ("1", "3", "15"):
        drive(LookAhead(g, k), g, initial, acts, P=4)


def test_bad_k_is_a_spec_error():
    g, _ = chains()
    for spec in ("lookahead:x", "lookahead:0"):
        with pytest.raises(SchedulerSpecError, match="K must be"):
            make_scheduler(spec, g)
    assert make_scheduler("lookahead:4", g).finder.k == 4
