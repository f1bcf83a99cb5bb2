"""Hybrid and Budget: LevelBased's ready tasks first, the heuristic's only to fill up."""

from __future__ import annotations

import pytest
from test_scheduler_driver import drive, exactly_ready, graph_of, random_case

from levelflow.scheduler import Budget, Hybrid, LevelBased, SchedulerSpecError, make_scheduler
from levelflow.scheduler.intervals import BYTES_PER_INTERVAL, TooManyIntervals, ancestor_spans


def fan():
    """
      a  b  c  d   s        level 0 (s slow)
      |  |  |  |   |
      a2 b2 c2 d2  |        level 1
                   |
                   x        level 1
    """
    g = graph_of("a>a2 b>b2 c>c2 d>d2 s>x")
    return g, g.index()


def test_level_rule_first_then_heuristic_fills_up():
    g, i = fan()
    s = Hybrid(g)
    s.activate([i[n] for n in "abcds"])
    assert s.get_ready(2) == [i["a"], i["b"]]  # level rule only: nothing asked of the heuristic
    assert s.counters()["consults"] == 0
    assert s.get_ready(2) == [i["c"], i["d"]]
    for n in "abcd":
        s.done(i[n], [i[n + "2"]])
    got = s.get_ready(8)
    # s runs; a2..d2 are ready by the heuristic (level 0 still holds s)
    assert sorted(got) == sorted([i["s"], i["a2"], i["b2"], i["c2"], i["d2"]])
    assert s.counters()["consults"] == 1


def test_tasks_the_heuristic_handed_out_are_not_handed_out_again():
    g, i = fan()
    s = Hybrid(g)
    s.activate([i["a"], i["s"]])
    s.get_ready(2)
    s.done(i["a"], [i["a2"]])
    assert s.get_ready(1) == [i["a2"]]  # from the heuristic: level 0 still runs s
    s.done(i["s"], [i["x"]])
    assert s.get_ready(5) == [i["x"]]  # level 1 is admitted now; a2 is not handed out again
    s.done(i["a2"])
    s.done(i["x"])
    assert not s.is_active()


@pytest.mark.parametrize("heuristic", ["logicblox", "signal"])
@pytest.mark.parametrize("seed", range(25))
def test_with_an_exact_heuristic_and_enough_processors_readiness_is_exact(heuristic, seed):
    g, initial, acts = random_case(seed)
    drive(Hybrid(g, heuristic), g, initial, acts, P=len(g),
          exact=exactly_ready(g, initial, acts))


def test_hybrid_args_name_the_heuristic():
    g, _ = fan()
    assert type(make_scheduler("hybrid:lookahead:3", g).finder).__name__ == "LookaheadFinder"
    assert make_scheduler("hybrid:lookahead:3", g).finder.k == 3
    with pytest.raises(SchedulerSpecError, match="cannot run beside LevelBased"):
        make_scheduler("hybrid:levelbased", g)
    with pytest.raises(SchedulerSpecError, match="unknown scheduler 'nosuch'"):
        make_scheduler("hybrid:nosuch", g)


def test_budget_keeps_a_heuristic_within_budget():
    g, initial, acts = random_case(5)
    s = make_scheduler("budget:logicblox:1000000000", g)
    drive(s, g, initial, acts, P=3)
    c = s.counters()
    assert c["dropped"] == 0 and c["dropped_at"] == -1 and c["consults"] > 0
    assert c["heuristic_peak_memory"] == s.memory() > 0


def test_budget_drops_a_heuristic_over_budget_and_is_plain_levelbased():
    g, initial, acts = random_case(5)
    s = make_scheduler("budget:logicblox:10", g)
    assert isinstance(s, Budget) and s.finder is None and s.memory() == 0
    batches = drive(s, g, initial, acts, P=3)
    plain = drive(LevelBased(g), g, initial, acts, P=3)
    assert batches == plain
    c = s.counters()
    assert c["dropped"] == 1 and c["dropped_at"] == 0 and c["consults"] == 0
    assert c["heuristic_peak_memory"] > 10 and c["intervals"] > 0


def test_budget_drops_a_growing_heuristic_mid_run():
    """
      r            level 0, slow
      |
      m            level 1, activated: parks 30 level-2 tasks on itself in lookahead's search
     /|..\\
    w0 ... w29     level 2
    """
    n = 30
    g = graph_of("r>m " + " ".join(f"m>w{i}" for i in range(n)) + " q")
    i = g.index()
    base = 8 * len(g)  # lookahead's visit marks; each parked task adds 8 bytes
    s = Budget(g, "lookahead", "3", str(base + 8 * 10))
    assert s.finder is not None
    s.activate([i["r"], i["m"], i["q"]] + [i[f"w{j}"] for j in range(n)])
    assert sorted(s.get_ready(2)) == sorted([i["q"], i["r"]])
    s.done(i["q"])
    assert s.get_ready(1) == []  # the search parks all the w's on m: memory passes the budget
    c = s.counters()
    assert c["dropped"] == 1 and c["dropped_at"] == 2 and s.finder is None
    s.done(i["r"])
    assert s.get_ready(1) == [i["m"]]
    s.done(i["m"])
    assert len(s.get_ready(n)) == n


@pytest.mark.parametrize("spec", ["budget", "budget:logicblox:x", "budget:logicblox:-1"])
def test_bad_budget_specs(spec):
    g, _ = fan()
    with pytest.raises(SchedulerSpecError, match="budget"):
        make_scheduler(spec, g)


@pytest.mark.parametrize("seed", range(10))
def test_budget_never_builds_more_than_its_budget_of_interval_lists(seed):
    g, _, _ = random_case(seed, n=120, p_edge=0.08)
    _, _, spans = ancestor_spans(g)
    total = sum(map(len, spans)) // 2
    widest = max(map(len, spans)) // 2 * BYTES_PER_INTERVAL
    for budget in (0, 17, total * BYTES_PER_INTERVAL // 3, total * BYTES_PER_INTERVAL - 1):
        s = make_scheduler(f"budget:logicblox:{budget}", g)
        c = s.counters()
        assert s.finder is None and c["dropped"] == 1 and c["dropped_at"] == 0
        assert budget < c["heuristic_peak_memory"] <= budget + widest
        assert c["intervals"] * BYTES_PER_INTERVAL == c["heuristic_peak_memory"]
        if budget + widest < total * BYTES_PER_INTERVAL:
            assert c["intervals"] < total  # it stopped building, not built all and then dropped
    s = make_scheduler(f"budget:logicblox:{total * BYTES_PER_INTERVAL}", g)  # exactly enough
    assert s.finder is not None and s.counters()["intervals"] == total


def test_interval_cap_stops_the_build_past_the_cap():
    g, _, _ = random_case(3, n=120, p_edge=0.08)
    _, _, spans = ancestor_spans(g)
    total = sum(map(len, spans)) // 2
    assert ancestor_spans(g, max_intervals=total)[2] == spans
    with pytest.raises(TooManyIntervals) as e:
        ancestor_spans(g, max_intervals=total // 2)
    assert total // 2 < e.value.count <= total // 2 + max(map(len, spans)) // 2


def test_hybrid_parks_a_task_behind_a_chain_once():
    """
      r0 > r1 > ... > r39 > w      all activated; level rule runs r0; the heuristic parks w on
      s                            r39 (the blocker that finishes last) rather than on r1, r2, ...
    """
    m = 40
    g = graph_of(" ".join(f"r{i}>r{i + 1}" for i in range(m - 1)) + f" r{m - 1}>w s")
    initial = list(range(len(g)))
    s = Hybrid(g)
    drive(s, g, initial, {}, P=2, exact=exactly_ready(g, initial, {}))
    assert s.counters()["ancestor_queries"] <= 2 * len(g)
