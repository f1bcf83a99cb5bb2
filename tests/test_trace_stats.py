"""trace_stats against brute force: W by closure, span by enumerating chains, levels by paths."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from levelflow.cli import main
from levelflow.traces import dump_trace, generate_trace, loads_trace, trace_stats


def _random_obj(rng: random.Random, n: int) -> dict:
    """Return a random small jobtrace object; names are shuffled so ids are not a topo order."""
    names = [f"n{i}" for i in range(n)]
    rng.shuffle(names)  # names[i] is the i-th node of a hidden topological order
    edges = [[names[i], names[j]] for i in range(n) for j in range(i + 1, n)
             if rng.random() < 0.35]
    rng.shuffle(edges)
    nodes = [{"id": x, "duration": rng.choice([0.0, 0.5, 1.0, 2.25, rng.random() * 3])}
             for x in rng.sample(names, n)]
    obj = {"format": "jobtrace/1", "nodes": nodes, "edges": edges,
           "initial": rng.sample(names, rng.randint(0, min(3, n)))}
    if rng.random() < 0.7:
        acts: dict[str, list[str]] = {}
        for u in names:
            kids = [v for a, v in edges if a == u and rng.random() < 0.6]
            if kids or rng.random() < 0.3:
                acts[u] = kids
        obj["activations"] = acts
    if rng.random() < 0.5:
        obj["processors"] = rng.randint(1, 4)
    return obj


def _reference(obj: dict, processors: int | None) -> dict:
    """Return the figures of a trace object computed by brute force on names."""
    names = [nd["id"] for nd in obj["nodes"]]
    dur = {nd["id"]: nd["duration"] for nd in obj["nodes"]}
    kids = {x: [v for u, v in obj["edges"] if u == x] for x in names}

    def below(x, seen):
        for c in kids[x]:
            if c not in seen:
                seen.add(c)
                below(c, seen)
        return seen

    desc = {x: below(x, set()) for x in names}
    acts = obj.get("activations")
    w = set(obj["initial"])
    frontier = list(w)
    while frontier:
        x = frontier.pop()
        for c in (kids[x] if acts is None else acts.get(x, [])):
            if c not in w:
                w.add(c)
                frontier.append(c)
    wl = sorted(w)
    span = 0.0
    for r in range(1, len(wl) + 1):
        for chain in itertools.combinations(wl, r):
            # A chain of W: every pair ordered by ancestry in G, so they all run one after another.
            if all(b in desc[a] or a in desc[b] for a, b in itertools.combinations(chain, 2)):
                span = max(span, sum(dur[x] for x in chain))

    def longest_from(x):
        return 1 + max((longest_from(c) for c in kids[x]), default=0)

    p = processors or obj.get("processors") or 8
    work = sum(dur[x] for x in w)
    return {"nodes": len(names), "edges": len(obj["edges"]),
            "levels": max((longest_from(x) for x in names), default=0),
            "initial": len(obj["initial"]), "active": len(w), "work": work, "span": span,
            "lower_bound": max(work / p, span), "processors": p,
            "active_edges": sum(1 for u, v in obj["edges"] if u in w and v in w)}


@pytest.mark.parametrize("seed", range(150))
def test_stats_match_brute_force_on_tiny_dags(seed):
    rng = random.Random(seed)
    obj = _random_obj(rng, rng.randint(1, 9))
    processors = rng.choice([None, 1, 3])
    got = trace_stats(loads_trace(obj), processors)
    want = _reference(obj, processors)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_span_waits_for_w_ancestors_through_inactive_nodes():
    # a ──► b ──► c        b is not activated (a activates nothing), c is initial:
    # c must still wait for a, because a is c's ancestor in G.
    obj = {"format": "jobtrace/1",
           "nodes": [{"id": "a", "duration": 2.0}, {"id": "b", "duration": 100.0},
                     {"id": "c", "duration": 3.0}, {"id": "d", "duration": 4.0}],
           "edges": [["a", "b"], ["b", "c"]], "initial": ["a", "c", "d"], "activations": {}}
    s = trace_stats(loads_trace(obj))
    assert (s["active"], s["work"], s["span"]) == (3, 9.0, 5.0)
    assert s["lower_bound"] == 5.0
    assert trace_stats(loads_trace(obj), processors=1)["lower_bound"] == 9.0


def test_processors_come_from_argument_then_trace_then_eight():
    obj = {"format": "jobtrace/1", "nodes": [{"id": f"t{i}", "duration": 1.0} for i in range(16)],
           "edges": [], "initial": [f"t{i}" for i in range(16)]}
    assert trace_stats(loads_trace(obj))["lower_bound"] == 2.0  # 16 / 8
    assert trace_stats(loads_trace(dict(obj, processors=4)))["lower_bound"] == 4.0
    assert trace_stats(loads_trace(dict(obj, processors=4)), processors=16)["lower_bound"] == 1.0


def test_span_matches_ancestor_set_reference_on_a_generated_trace():
    trace = generate_trace(150, 400, 9, 12, 0.5, seed=3)
    g = trace.graph
    anc: list[set[int]] = [set() for _ in range(len(g))]
    for v in g.order:
        for p in g.parents[v]:
            anc[v] |= anc[p] | {p}
    w = trace.active_set()
    finish: dict[int, float] = {}
    for v in g.order:
        if w[v]:
            finish[v] = trace.durations[v] + max((finish[a] for a in anc[v] if w[a]), default=0.0)
    s = trace_stats(trace)
    assert s["span"] == pytest.approx(max(finish.values()))
    assert s["active"] == len(finish) and s["work"] == pytest.approx(
        sum(trace.durations[v] for v in finish))
    assert s["max_level_width"] == max(sum(1 for x in g.level if x == k) for k in range(9))
    assert s["sources"] == sum(1 for ps in g.parents if not ps)


def test_cli_stats_json_and_table(tmp_path, capsys):
    trace = generate_trace(60, 120, 6, 5, 0.7, seed=1)
    path = tmp_path / "t.json"
    dump_trace(trace, path)
    with pytest.raises(SystemExit) as ex:
        main(["trace", "stats", str(path), "--json", "-P", "3"])
    assert ex.value.code == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert json.loads(out) == json.loads(json.dumps(trace_stats(trace, 3)))
    with pytest.raises(SystemExit) as ex:
        main(["trace", "stats", str(path)])
    assert ex.value.code == 0
    out = capsys.readouterr().out
    assert "lower bound" in out and "span" in out and "120" in out
