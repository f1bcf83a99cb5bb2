"""Signal: exact readiness by signalling along every edge; O(V + E) whatever is active."""

from __future__ import annotations

import pytest
from test_scheduler_driver import drive, exactly_ready, graph_of, random_case

from levelflow.scheduler import Signal
from levelflow.tasks.graph import TaskGraph


@pytest.mark.parametrize("seed", range(40))
def test_readiness_is_exact_on_random_dags(seed):
    g, initial, acts = random_case(seed)
    drive(Signal(g), g, initial, acts, P=len(g), exact=exactly_ready(g, initial, acts))


def test_an_unactivated_node_passes_the_signal_on():
    """
      a   u         u is never activated: it signals at once, so c waits only for b
      |   |
      b   |
       \\ /
        c
    """
    g = graph_of("a>b b>c u>c")
    i = g.index()
    s = Signal(g)
    s.activate([i["a"], i["c"]])
    assert s.get_ready(3) == [i["a"]]
    s.done(i["a"], [i["b"]])
    assert s.get_ready(3) == [i["b"]]
    s.done(i["b"])
    assert s.get_ready(3) == [i["c"]]


def test_work_is_every_node_and_edge_once_however_few_tasks_run():
    """One active task at the bottom of a 500-node ladder: every edge above it carries a signal."""
    n = 500
    edges = [(v, v + 1) for v in range(n - 1)] + [(v, v + 2) for v in range(n - 2)]
    g = TaskGraph([str(v) for v in range(n)], edges)
    s = Signal(g)
    drive(s, g, [n - 1], {}, P=2)
    c = s.counters()
    assert c["signals"] == g.num_edges and c["nodes_resolved"] == n - 1


def test_activating_a_node_already_passed_over_is_refused():
    g = graph_of("a>b x>y")
    i = g.index()
    s = Signal(g)
    s.activate([i["a"]])
    s.get_ready(2)  # x was not activated: it has signalled y already
    with pytest.raises(ValueError, match="'x'"):
        s.activate([i["x"]])
    assert s.counters()["activations"] == 1  # nothing changed
