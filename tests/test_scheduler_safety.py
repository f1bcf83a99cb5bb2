"""Every built-in scheduler: only hands out tasks whose activated ancestors finished, runs
exactly W once each, and refuses misuse with a ValueError naming the task."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_scheduler_driver import closure, drive, graph_of, random_case

from levelflow.scheduler import make_scheduler
from levelflow.tasks.graph import TaskGraph

SPECS = ["levelbased", "lookahead", "lookahead:1", "logicblox", "hybrid", "hybrid:signal",
         "hybrid:lookahead:2", "signal", "budget:logicblox:0", "budget:logicblox:1000000000",
         "budget:lookahead:2:1000"]


@st.composite
def cases(draw):
    """Draw (graph, initial, activations): a random DAG on shuffled ids with random activations."""
    n = draw(st.integers(1, 14))
    perm = draw(st.permutations(range(n)))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=30)) if pairs else []
    graph = TaskGraph([f"t{i}" for i in range(n)], [(perm[i], perm[j]) for i, j in chosen])
    initial = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    acts = {v: tuple(c for c in graph.children[v] if draw(st.booleans())) for v in range(n)}
    return graph, initial, acts


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=60, deadline=None)
@given(case=cases(), P=st.integers(1, 4), newest=st.booleans())
def test_hands_out_only_ready_tasks_and_runs_exactly_w(spec, case, P, newest):
    graph, initial, acts = case
    finish = (lambda running: len(running) - 1) if newest else (lambda running: 0)
    batches = drive(make_scheduler(spec, graph), graph, initial, acts, P, finish=finish)
    ran = [v for b in batches for v in b]
    assert len(ran) == len(set(ran)) and set(ran) == closure(initial, acts)


@pytest.mark.parametrize("spec", SPECS)
def test_larger_random_dags(spec):
    for seed in range(12):
        graph, initial, acts = random_case(seed, n=80, p_edge=0.06)
        drive(make_scheduler(spec, graph), graph, initial, acts, P=5)


@pytest.mark.parametrize("spec", SPECS)
def test_misuse_raises_value_error_naming_the_task(spec):
    g = graph_of("alpha>beta beta>gamma")
    s = make_scheduler(spec, g)
    with pytest.raises(ValueError, match="'alpha'"):
        s.done(0)
    s.activate([0])
    [a] = s.get_ready(3)
    assert a == 0
    with pytest.raises(ValueError, match="'gamma'"):
        s.done(0, [2])  # not a child
    s.done(0, [1])
    with pytest.raises(ValueError, match="'alpha'"):
        s.activate([0])  # finished
    with pytest.raises(ValueError, match="'alpha'"):
        s.done(0)  # finished, not running
    with pytest.raises(ValueError, match="'beta'"):
        s.done(1)  # waiting, not running
    with pytest.raises(ValueError, match="id -1"):
        s.activate([-1])
    assert s.get_ready(3) == [1]
    s.done(1)
    assert not s.is_active() and s.get_ready(3) == []


@pytest.mark.parametrize("spec", SPECS)
def test_nothing_activated_means_nothing_to_do(spec):
    g = graph_of("a>b c")
    s = make_scheduler(spec, g)
    s.activate([])
    assert not s.is_active()
    assert s.get_ready(4) == []
    assert isinstance(s.counters(), dict) and s.memory() >= 0


@pytest.mark.parametrize("spec", SPECS)
def test_renamed_and_renumbered_nodes_give_the_same_batches(spec):
    """
        a
       / \\
      b   c        a activates b, c; b activates d; c activates e; d activates f
      |\\ /|
      | X  |       (b>e and c>d cross)
      |/ \\|
      d   e
      |
      f
    """
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("b", "e"), ("c", "d"), ("c", "e"), ("d", "f")]
    act_names = {"a": ("b", "c"), "b": ("d",), "c": ("e",), "d": ("f",)}

    def run(names, rename):
        g = TaskGraph.from_named_edges([rename[x] for x in names],
                                       [(rename[u], rename[v]) for u, v in edges])
        i = g.index()
        acts = {i[rename[u]]: tuple(i[rename[c]] for c in cs) for u, cs in act_names.items()}
        back = {rename[x]: x for x in rename}
        batches = drive(make_scheduler(spec, g), g, [i[rename["a"]]], acts, P=len(g))
        return [sorted(back[g.names[v]] for v in b) for b in batches]

    same = {x: x for x in "abcdef"}
    other = {x: f"node-{5 - k}" for k, x in enumerate("abcdef")}
    assert run("abcdef", same) == run("fedcba", other)
