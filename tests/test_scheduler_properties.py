"""Every scheduler, driven by the simulator on random DAGs and activations, gives valid schedules.

Validity is checked twice: by the spec's rule in levelflow.traces.check_schedule and by a plain
O(n^2) reference below. LevelBased must also keep the paper's bound, and lose to the optimum by
Theta(L) on the paper's tight example (Fig. 2).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from levelflow.simulator import greedy_makespan, lower_bound, simulate
from levelflow.tasks.graph import TaskGraph
from levelflow.traces.model import JobTrace
from levelflow.traces.schedule import check_schedule

SCHEDULERS = ["levelbased", "lookahead:2", "lookahead:15", "logicblox", "hybrid", "signal",
              "budget:logicblox:64", "budget:logicblox:100000000"]


@st.composite
def traces(draw, max_nodes=12):
    """Draw a random DAG (ids shuffled against topological order) with random activations."""
    n = draw(st.integers(1, max_nodes))
    perm = draw(st.permutations(range(n)))
    pairs = list(itertools.combinations(range(n), 2))
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2 * n)) if pairs else []
    g = TaskGraph([f"v{i}" for i in range(n)], [(perm[i], perm[j]) for i, j in chosen])
    durations = draw(st.lists(st.sampled_from([0.0, 0.25, 1.0, 2.0, 5.0]), min_size=n,
                              max_size=n))
    initial = draw(st.lists(st.integers(0, n - 1), max_size=4))
    if draw(st.booleans()):
        acts = None
    else:
        acts = {v: tuple(c for c in g.children[v] if draw(st.booleans())) for v in range(n)
                if draw(st.integers(0, 4))}  # some tasks absent: they change nothing
    return JobTrace(g, durations, tuple(initial), acts)


def reference_violations(tr: JobTrace, rows, P: int) -> list[str]:
    """Return the schedule's violations found by brute force over all pairs of rows."""
    g = tr.graph
    active = tr.active_set()
    bad = []
    tasks = [v for v, *_ in rows]
    if sorted(tasks) != [v for v in range(len(g)) if active[v]]:
        bad.append(f"ran {sorted(tasks)}, W is {[v for v in range(len(g)) if active[v]]}")
    for (u, pu, su, eu), (v, pv, sv, ev) in itertools.permutations(rows, 2):
        if is_ancestor(g, u, v) and sv < eu - 1e-9:
            bad.append(f"{v} starts at {sv} before its ancestor {u} ends at {eu}")
        if pu == pv and su < ev - 1e-9 and sv < eu - 1e-9 and su < eu and sv < ev:
            bad.append(f"{u} and {v} overlap on processor {pu}")
    bad += [f"processor {p} out of range" for _, p, _, _ in rows if not 0 <= p < P]
    return bad


def is_ancestor(g: TaskGraph, u: int, v: int) -> bool:
    """Return True if u reaches v in G by a non-empty path (plain DFS)."""
    stack, seen = list(g.children[u]), set()
    while stack:
        w = stack.pop()
        if w == v:
            return True
        if w not in seen:
            seen.add(w)
            stack.extend(g.children[w])
    return False


def level_bound(tr: JobTrace, P: int) -> float:
    """Return w/P + the sum over levels of the longest task of W at that level."""
    active = tr.active_set()
    longest = [0.0] * tr.graph.num_levels
    work = 0.0
    for v, a in enumerate(active):
        if a:
            work += tr.durations[v]
            longest[tr.graph.level[v]] = max(longest[tr.graph.level[v]], tr.durations[v])
    return work / P + sum(longest)


@pytest.mark.parametrize("spec", SCHEDULERS)
@settings(max_examples=60, deadline=None)
@given(tr=traces(), P=st.integers(1, 4))
def test_every_scheduler_gives_a_valid_schedule_of_exactly_w(spec, tr, P):
    r = simulate(tr, spec, P, record_schedule=True)
    assert check_schedule(tr, r.schedule) == []
    assert reference_violations(tr, r.schedule, P) == []
    assert r.tasks == sum(tr.active_set())
    assert r.makespan >= r.lower_bound - 1e-9
    if spec == "levelbased":
        assert r.makespan <= level_bound(tr, P) + 1e-9


@settings(max_examples=100, deadline=None)
@given(tr=traces(), P=st.integers(1, 4))
def test_parallel_model_schedules_respect_the_start_rule(tr, P):
    for spec in ("levelbased", "hybrid"):
        r = simulate(tr, spec, P, model="parallel", record_schedule=True)
        assert check_schedule(tr, r.schedule, serial=False) == []
        assert r.tasks == sum(tr.active_set())


@settings(max_examples=100, deadline=None)
@given(tr=traces())
def test_exact_readiness_reaches_the_span_on_unlimited_processors(tr):
    # With a processor per task nothing queues: a task starts the moment its last W-ancestor
    # ends, so exact-readiness schedulers finish at the span, the brute-force longest chain.
    P = len(tr.graph)
    span = lower_bound(tr, P)[1]
    assert greedy_makespan(tr, P) == pytest.approx(span)
    for spec in ("signal", "logicblox", "hybrid"):
        assert simulate(tr, spec, P).makespan == pytest.approx(span), spec
    assert simulate(tr, "levelbased", P).makespan >= span - 1e-9


def tight_example(L: int) -> JobTrace:
    r"""The paper's Fig. 2, all activated: a unit spine and long leaves hanging off it.

      s0 -> s1 -> s2 -> ... -> s_{L-1}      (unit tasks, s_i at level i)
             \      \             \
              b1     b2   ...      b_{L-1}  (duration L; b_i is a child of s_{i-1}: level i)
    """
    names = [f"s{i}" for i in range(L)] + [f"b{i}" for i in range(1, L)]
    edges = [(i, i + 1) for i in range(L - 1)] + [(i - 1, L - 1 + i) for i in range(1, L)]
    durations = [1.0] * L + [float(L)] * (L - 1)
    return JobTrace(TaskGraph(names, edges), durations, (0,), None)


@pytest.mark.parametrize("L", [4, 8, 16])
def test_tight_example_levelbased_pays_l_squared_where_exact_readiness_pays_2l(L):
    tr = tight_example(L)
    P = L + 1
    # LevelBased: s0 alone, then each level i waits for b_i (L s long): 1 + (L-1) L.
    assert simulate(tr, "levelbased", P).makespan == 1 + (L - 1) * L
    # Exact readiness runs the spine in L and starts b_{L-1} at L-1: it ends at 2L-1.
    assert greedy_makespan(tr, P) == 2 * L - 1
    for spec in ("signal", "logicblox", "hybrid"):
        assert simulate(tr, spec, P).makespan == 2 * L - 1, spec


def test_tight_example_ratio_grows_linearly_in_l():
    ratios = []
    for L in (4, 8, 16, 32):
        tr = tight_example(L)
        ratios.append(simulate(tr, "levelbased", L + 1).makespan / greedy_makespan(tr, L + 1))
    # Theta(L): doubling L roughly doubles the ratio (it tends to L/2).
    for small, big in itertools.pairwise(ratios):
        assert 1.7 < big / small < 2.3
    assert ratios[-1] > 14
