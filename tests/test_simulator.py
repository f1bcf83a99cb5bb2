"""The trace simulator: clock, models, overhead charging, bounds, greedy reference, failures.

Expected makespans here are worked out by hand from the drawings, not taken from a run.
"""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from levelflow.scheduler import make_scheduler
from levelflow.scheduler.base import Scheduler
from levelflow.simulator import (
    SchedulerStall,
    SimulationError,
    greedy_makespan,
    greedy_schedule,
    lower_bound,
    simulate,
)
from levelflow.tasks.graph import TaskGraph
from levelflow.traces import trace_stats
from levelflow.traces.model import JobTrace


def make_trace(edges, durations, initial, activations=None, names=None, **kw) -> JobTrace:
    """Return a trace on nodes 0..len(durations)-1 (names n0, n1, ... unless given)."""
    names = names or [f"n{i}" for i in range(len(durations))]
    return JobTrace(TaskGraph(names, edges), list(durations), tuple(initial), activations, **kw)


def diamond() -> JobTrace:
    r"""
        a(1)
       /    \
     b(2)   c(3)
       \    /
        d(1)
    everything activated
    """
    return make_trace([(0, 1), (0, 2), (1, 3), (2, 3)], [1.0, 2.0, 3.0, 1.0], [0])


def chain(n: int, d: float = 1.0) -> JobTrace:
    """Return a chain 0 -> 1 -> ... -> n-1, all activated."""
    return make_trace([(i, i + 1) for i in range(n - 1)], [d] * n, [0])


# ---- the clock in the serial model -----------------------------------------------------------

def test_diamond_makespan_and_schedule_by_hand():
    r = simulate(diamond(), "levelbased", 2, record_schedule=True)
    # a [0,1]; b [1,3] and c [1,4] side by side; d [4,5].
    assert r.makespan == 5.0
    assert r.tasks == 4
    starts = {v: (s, e) for v, _, s, e in r.schedule}
    assert starts == {0: (0.0, 1.0), 1: (1.0, 3.0), 2: (1.0, 4.0), 3: (4.0, 5.0)}
    assert r.utilization == pytest.approx(7.0 / (2 * 5.0))
    assert r.lower_bound == 5.0 and r.makespan_over_lower_bound == 1.0


def test_one_processor_runs_everything_back_to_back():
    r = simulate(diamond(), "levelbased", 1, record_schedule=True)
    assert r.makespan == 7.0
    assert r.utilization == 1.0
    assert {p for _, p, _, _ in r.schedule} == {0}


def test_only_the_activated_set_runs():
    r"""
      a -> b -> c        a activates nothing: b and c never run,
      d(5)               d is activated on its own.
    """
    tr = make_trace([(0, 1), (1, 2)], [1.0, 1.0, 1.0, 5.0], [0, 3], activations={})
    r = simulate(tr, "levelbased", 4, record_schedule=True)
    assert sorted(v for v, *_ in r.schedule) == [0, 3]
    assert r.makespan == 5.0


def test_inactive_ancestor_does_not_delay_but_active_one_does():
    r"""
      a(4) -> x -> t       x is never activated, a is: t waits for a (ancestor in G),
      s(1) -----> t        so t starts at 4 though its only active-graph parent s ends at 1.
    """
    tr = make_trace([(0, 1), (1, 3), (2, 3)], [4.0, 1.0, 1.0, 1.0], [0, 2],
                    activations={2: (3,)})
    r = simulate(tr, "levelbased", 4, record_schedule=True)
    start = {v: s for v, _, s, _ in r.schedule}
    assert start[3] == 4.0 and r.makespan == 5.0
    assert greedy_makespan(tr, 4) == 5.0


def test_empty_activation_runs_nothing():
    tr = make_trace([(0, 1)], [1.0, 1.0], [])
    r = simulate(tr, "levelbased", 3)
    assert (r.makespan, r.tasks, r.utilization) == (0.0, 0, 0.0)


def test_processors_default_to_the_trace_then_eight():
    assert simulate(diamond(), "levelbased").processors == 8
    tr = make_trace([], [1.0] * 6, range(6), processors=3)
    r = simulate(tr, "levelbased")
    assert r.processors == 3 and r.makespan == 2.0


def test_same_run_twice_gives_the_same_result():
    tr = make_trace([(0, 2), (1, 2), (2, 3), (2, 4), (1, 4)], [1.5, 0.5, 2.0, 1.0, 1.0],
                    [0, 1], names=["p", "q", "r", "s", "t"])
    a = simulate(tr, "hybrid", 2, record_schedule=True)
    b = simulate(tr, "hybrid", 2, record_schedule=True)
    assert (a.makespan, a.schedule, a.counters, a.tasks) == (b.makespan, b.schedule,
                                                              b.counters, b.tasks)


# ---- overhead -----------------------------------------------------------------------------------

def test_overhead_is_measured_and_only_charged_when_asked():
    tr = chain(30)
    plain = simulate(tr, "levelbased", 1)
    assert plain.makespan == 30.0 and plain.overhead_s > 0
    charged = simulate(tr, "levelbased", 1, charge_overhead=True)
    assert charged.makespan > plain.makespan
    # On a chain every scheduler call lies on the critical path: all of it is charged.
    assert charged.makespan == pytest.approx(30.0 + charged.overhead_s, abs=1e-9)


class Sleepy(Scheduler):
    """Wraps another scheduler and sleeps in every get_ready, to make the overhead visible."""

    name = "sleepy"

    def __init__(self, inner: Scheduler, pause: float) -> None:
        super().__init__(inner.graph)
        self.inner, self.pause, self.calls = inner, pause, 0

    def activate(self, tasks):
        self.inner.activate(tasks)

    def get_ready(self, k):
        self.calls += 1
        time.sleep(self.pause)
        return self.inner.get_ready(k)

    def done(self, task, activated=()):
        self.inner.done(task, activated)

    def is_active(self):
        return self.inner.is_active()


def test_charged_overhead_covers_time_spent_in_slow_calls():
    tr = chain(5, d=0.0)
    s = Sleepy(make_scheduler("levelbased", tr.graph), 0.002)
    r = simulate(tr, s, 2, charge_overhead=True)
    assert r.overhead_s >= s.calls * 0.002
    assert r.makespan >= s.calls * 0.002 and r.makespan == pytest.approx(r.overhead_s, abs=1e-9)
    assert simulate(tr, "levelbased", 2).makespan == 0.0


# ---- the parallel model ----------------------------------------------------------------------

def test_parallel_model_spreads_work_over_idle_processors():
    # One task, work 8 on 4 processors: 2 s; with span 3 it cannot go below 3 s.
    tr = make_trace([], [8.0], [0])
    assert simulate(tr, "levelbased", 4, model="parallel").makespan == 2.0
    tr = make_trace([], [1.0], [0], work={0: 8.0}, span={0: 3.0})
    r = simulate(tr, "levelbased", 4, model="parallel", record_schedule=True)
    assert r.makespan == 3.0 and r.utilization == 1.0
    assert r.lower_bound == 3.0


def test_parallel_model_splits_processors_between_tasks_handed_out_together():
    r"""
      a(6)  b(6)  c(6) independent, P=4: get_ready(4) hands out all three;
      a gets 2 processors (3 s), b and c one each (6 s).
    """
    tr = make_trace([], [6.0, 6.0, 6.0], [0, 1, 2])
    r = simulate(tr, "levelbased", 4, model="parallel", record_schedule=True)
    ends = sorted(e for *_, e in r.schedule)
    assert ends == [3.0, 6.0, 6.0] and r.makespan == 6.0
    assert r.utilization == pytest.approx(18.0 / 24.0)
    # The serial model on the same trace: three 6 s tasks side by side.
    assert simulate(tr, "levelbased", 4).makespan == 6.0


def test_parallel_model_chain_runs_each_task_on_all_processors():
    tr = chain(4, d=4.0)
    r = simulate(tr, "levelbased", 4, model="parallel")
    assert r.makespan == 4.0 and r.utilization == 1.0
    assert simulate(tr, "levelbased", 4).makespan == 16.0


# ---- failures -----------------------------------------------------------------------------------

class Stuck(Scheduler):
    """A broken scheduler: claims work is left but never hands anything out."""

    name = "stuck"

    def activate(self, tasks):
        pass

    def get_ready(self, k):
        return []

    def done(self, task, activated=()):
        pass

    def is_active(self):
        return True


class Greedy(Stuck):
    """A broken scheduler: hands out more tasks than asked for."""

    name = "greedy-bug"

    def get_ready(self, k):
        return list(range(k + 1))


def test_stall_raises_naming_the_scheduler():
    tr = diamond()
    with pytest.raises(SchedulerStall, match="stuck.*stalled"):
        simulate(tr, Stuck(tr.graph), 2)
    with pytest.raises(SchedulerStall, match=r"greedy-bug.*3 tasks from get_ready\(2\)"):
        simulate(tr, Greedy(tr.graph), 2)


@pytest.mark.parametrize("kwargs, field", [({"processors": 0}, "processors"),
                                           ({"model": "quantum"}, "model")])
def test_bad_arguments_are_one_line_errors(kwargs, field):
    with pytest.raises(SimulationError) as e:
        simulate(diamond(), "levelbased", **kwargs)
    assert str(e.value).startswith(field) and "\n" not in str(e.value)


def test_scheduler_built_on_another_graph_is_refused():
    with pytest.raises(ValueError, match="another graph"):
        simulate(diamond(), make_scheduler("levelbased", chain(4).graph), 2)


def test_progress_reports_up_to_the_active_count():
    seen = []
    simulate(chain(5), "levelbased", 2, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (5, 5) and all(t == 5 for _, t in seen)


# ---- lower bound and the greedy reference -----------------------------------------------------

def brute_span(tr: JobTrace) -> float:
    """Return the longest chain of W under the start rule by enumerating all paths of G."""
    active = tr.active_set()
    g = tr.graph
    best = 0.0
    stack = [(v, tr.durations[v] if active[v] else 0.0) for v in g.sources]
    while stack:
        v, length = stack.pop()
        best = max(best, length)
        for c in g.children[v]:
            stack.append((c, length + (tr.durations[c] if active[c] else 0.0)))
    return best


@st.composite
def traces(draw, max_nodes=9):
    """Draw a random DAG (ids shuffled against topological order) with random activations."""
    n = draw(st.integers(1, max_nodes))
    perm = draw(st.permutations(range(n)))
    pairs = [(i, j) for i, j in itertools.combinations(range(n), 2)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2 * n)) if pairs else []
    edges = [(perm[i], perm[j]) for i, j in chosen]
    durations = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]), min_size=n,
                              max_size=n))
    initial = draw(st.lists(st.integers(0, n - 1), max_size=3))
    g = TaskGraph([f"v{i}" for i in range(n)], edges)
    if draw(st.booleans()):
        acts = None
    else:
        acts = {v: tuple(c for c in g.children[v] if draw(st.booleans())) for v in range(n)}
    return JobTrace(g, durations, tuple(initial), acts)


@settings(max_examples=150, deadline=None)
@given(traces())
def test_lower_bound_matches_brute_force(tr):
    active = tr.active_set()
    work, span, bound = lower_bound(tr, 3)
    assert work == pytest.approx(sum(d for d, a in zip(tr.durations, active, strict=True) if a))
    assert span == pytest.approx(brute_span(tr))
    assert bound == pytest.approx(max(work / 3, span))
    assert bound == pytest.approx(trace_stats(tr, 3)["lower_bound"])


def exact_ready_time(tr: JobTrace, rows) -> dict[int, float]:
    """Return for each scheduled task the latest end among its W-ancestors in G (brute force)."""
    end = {v: e for v, _, _, e in rows}
    out = {}
    for v in end:
        anc, stack = set(), list(tr.graph.parents[v])
        while stack:
            u = stack.pop()
            if u not in anc:
                anc.add(u)
                stack.extend(tr.graph.parents[u])
        out[v] = max((end[u] for u in anc if u in end), default=0.0)
    return out


@settings(max_examples=150, deadline=None)
@given(traces(), st.integers(1, 4))
def test_greedy_reference_is_valid_and_never_idles_while_work_is_ready(tr, P):
    tr = JobTrace(tr.graph, [d or 1.0 for d in tr.durations], tr.initial, tr.activations)
    rows = greedy_schedule(tr, P)
    active = tr.active_set()
    assert sorted(v for v, *_ in rows) == [v for v in range(len(active)) if active[v]]
    ready = exact_ready_time(tr, rows)
    for v, _, s, _ in rows:
        assert s >= ready[v] - 1e-9
        # Started late only if every processor was busy from the moment it became ready.
        for t in {ready[v]} | {e for *_, e in rows if ready[v] <= e < s}:
            if t < s:
                assert sum(1 for _, _, s2, e2 in rows if s2 <= t < e2) == P
    if rows:
        assert greedy_makespan(tr, P) == max(e for *_, e in rows)


def test_more_processors_than_can_be_simulated_is_one_clear_error():
    from levelflow.simulator.replay import MAX_PROCESSORS, SimulationError
    from levelflow.traces import loads_trace

    trace = loads_trace({"format": "jobtrace/1", "nodes": [{"id": "a", "duration": 1}],
                         "edges": [], "initial": ["a"], "processors": 10**10})
    with pytest.raises(SimulationError, match=f"at most {MAX_PROCESSORS:,} can be simulated"):
        simulate(trace, "levelbased")
    assert simulate(trace, "levelbased", 4).makespan == 1.0  # the trace's P overridden
