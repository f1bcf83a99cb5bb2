"""generate_trace: exact shape (nodes, edges, levels, initial), activations, durations, seeds."""

from __future__ import annotations

import json
import statistics

import pytest

from levelflow.cli import main
from levelflow.traces import TraceError, generate_trace, load_trace, trace_to_obj


def _check_shape(trace, nodes, edges, levels, initial):
    g = trace.graph
    assert len(g) == nodes
    assert g.num_edges == edges
    assert g.num_levels == levels
    assert all(len(layer) > 0 for layer in g.by_level)
    # Levels are exact: each node above 0 has a parent exactly one level down.
    level = g.level
    assert all(any(level[p] == level[v] - 1 for p in g.parents[v])
               for v in range(nodes) if level[v] > 0)
    pairs = [(u, v) for u, kids in enumerate(g.children) for v in kids]
    assert len(set(pairs)) == edges
    assert len(trace.initial) == initial == len(set(trace.initial))
    # Initial tasks come from the lowest levels.
    if 0 < initial < nodes:
        rest = set(range(nodes)) - set(trace.initial)
        assert max(level[v] for v in trace.initial) <= min(level[v] for v in rest)


@pytest.mark.parametrize("nodes,edges,levels,initial", [
    (1, 0, 1, 1),
    (10, 0, 1, 3),
    (10, 9, 10, 1),          # a chain
    (10, 45, 10, 2),         # every forward pair of a chain: the densest possible
    (30, 290, 3, 5),         # near the maximum for 3 layers of 10
    (200, 199, 4, 10),
    (200, 1500, 12, 40),
    (1000, 999, 50, 0),
    (5000, 12000, 30, 700),
])
def test_exact_shape(nodes, edges, levels, initial):
    _check_shape(generate_trace(nodes, edges, levels, initial, 0.5, seed=nodes + edges),
                 nodes, edges, levels, initial)


@pytest.mark.parametrize("nodes,edges,levels,initial", [
    (64_910, 100_000, 171, 1_000),      # Table I shapes
    (379_500, 380_000, 11, 125_544),
    (465_127, 465_000, 5, 1_000),
])
def test_table_one_shapes(nodes, edges, levels, initial):
    _check_shape(generate_trace(nodes, edges, levels, initial, 0.3, seed=1),
                 nodes, edges, levels, initial)


def test_same_seed_same_trace_other_seed_other_trace():
    a = trace_to_obj(generate_trace(300, 700, 8, 20, 0.5, seed=11))
    b = trace_to_obj(generate_trace(300, 700, 8, 20, 0.5, seed=11))
    c = trace_to_obj(generate_trace(300, 700, 8, 20, 0.5, seed=12))
    assert a == b
    assert a["edges"] != c["edges"] and a["nodes"] != c["nodes"]


def test_activations_are_children_with_probability_p():
    trace = generate_trace(4000, 12000, 10, 100, 0.3, seed=2)
    children = trace.graph.children
    activated = 0
    for u, kids in trace.activations.items():
        assert set(kids) <= set(children[u]) and len(set(kids)) == len(kids)
        activated += len(kids)
    assert activated / 12000 == pytest.approx(0.3, abs=0.02)

    assert generate_trace(50, 100, 5, 5, 1.0, seed=2).activations is None  # all children
    none = generate_trace(50, 100, 5, 5, 0.0, seed=2)
    assert none.activations == {}
    assert sum(none.active_set()) == 5


def test_durations_are_log_normal_around_the_median():
    normal = generate_trace(5000, 5000, 5, 10, 0.5, seed=4).durations
    tiny = generate_trace(5000, 5000, 5, 10, 0.5, seed=4, tiny=True).durations
    assert min(normal) > 0 and min(tiny) > 0
    assert statistics.median(normal) == pytest.approx(1.0, rel=0.15)
    assert statistics.median(tiny) == pytest.approx(5e-6, rel=0.15)
    assert max(normal) / min(normal) > 100  # spread, not constant


@pytest.mark.parametrize("args,message", [
    ((10, 3, 5, 1), "too few"),           # needs at least levels-1 edges
    ((10, 46, 10, 1), "too many"),        # a 10-chain has only 45 forward pairs
    ((10, 1, 1, 1), "too many"),          # one level has no room for an edge
    ((5, 4, 6, 1), "--levels"),
    ((0, 0, 1, 0), "--nodes"),
    ((5, 4, 2, 6), "--initial"),
    ((5, -1, 2, 1), "--edges"),
])
def test_infeasible_shapes_are_errors(args, message):
    with pytest.raises(TraceError, match=message):
        generate_trace(*args, p=0.5, seed=0)
    with pytest.raises(TraceError, match="probability"):
        generate_trace(10, 9, 2, 1, p=1.5, seed=0)


def test_cli_gen_writes_a_valid_trace(tmp_path, capsys):
    out = tmp_path / "g.json.gz"
    with pytest.raises(SystemExit) as ex:
        main(["trace", "gen", str(out), "--nodes", "500", "--edges", "900", "--levels", "7",
              "--initial", "25", "--p", "0.4", "--seed", "9", "--tiny"])
    assert ex.value.code == 0
    assert capsys.readouterr().out.startswith(f"{out}: wrote 500 nodes, 900 edges, 7 levels")
    trace = load_trace(out)
    _check_shape(trace, 500, 900, 7, 25)
    assert trace_to_obj(trace) == json.loads(json.dumps(
        trace_to_obj(generate_trace(500, 900, 7, 25, 0.4, seed=9, tiny=True))))

    with pytest.raises(SystemExit) as ex:
        main(["trace", "gen", str(tmp_path / "x.json"), "--nodes", "5", "--edges", "1",
              "--levels", "4", "--initial", "1", "--p", "0.5"])
    assert ex.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "too few" in err and "Traceback" not in err
    assert not (tmp_path / "x.json").exists()


def test_extra_edges_when_the_low_layers_are_saturated():
    # Layer 1 nodes have a single possible parent, already used: drawing v uniformly would
    # almost never succeed, so the sampler must switch to drawing pairs uniformly.
    import numpy as np

    from levelflow.traces.generate import _extra_edges

    sizes = np.array([1, 5000, 20], dtype=np.int64)
    n = int(sizes.sum())
    starts = np.array([0, 1, 5001], dtype=np.int64)
    level_of = np.repeat(np.arange(3), sizes)
    taken = np.sort(np.arange(1, 5001, dtype=np.int64))  # edges 0 -> every layer-1 node
    keys = _extra_edges(2000, taken, sizes, starts, level_of, n, np.random.default_rng(0))
    us, vs = keys // n, keys % n
    assert len(set(keys.tolist())) == 2000
    assert not set(keys.tolist()) & set(taken.tolist())
    assert (level_of[us] < level_of[vs]).all()


@pytest.mark.parametrize("seed", range(40))
def test_random_feasible_shapes_come_out_exact(seed):
    import random

    rng = random.Random(seed)
    nodes = rng.randint(2, 300)
    levels = rng.randint(2, min(nodes, 25))
    q, r = divmod(nodes, levels)
    sizes = [q + 1] * r + [q] * (levels - r)
    most = (nodes * nodes - sum(s * s for s in sizes)) // 2  # pairs across balanced layers
    if rng.random() < 0.5:
        edges = rng.randint(levels - 1, nodes - 1)  # sparse: layer 0 must grow
    else:
        edges = rng.randint(nodes - 1, min(3 * nodes, most))
    initial = rng.randint(0, nodes)
    trace = generate_trace(nodes, edges, levels, initial, rng.random(), seed=seed)
    _check_shape(trace, nodes, edges, levels, initial)
