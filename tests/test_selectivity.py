"""The view costs `workload gmark` selects by: join counts, closure walks, in-process views."""

from __future__ import annotations

import random
import re
from pathlib import Path

import naive_datalog
import networkx as nx
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from levelflow.errors import LevelflowError
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.ast import Const, Var
from levelflow.workloads.gmark import (
    LINEAR_TUPLES_PER_NODE,
    draw_views,
    generate_graph,
    type_ranges,
    write_workload,
)
from levelflow.workloads.gmark_schema import read_schema
from levelflow.workloads.selectivity import body_matches, closure_sample, view_cost

DATA = Path(__file__).parent / "data" / "gmark"
BODIES = [  # chains, stars, a wildcard, a constant, a repeated variable, a unary atom
    "a(x, y)",
    "a(x, y), b(y, z)",
    "a(x, y), b(y, z), c(z, w)",
    "a(x, y), b(x, z), c(x, w)",
    "a(x, y), b(z, y), c(z, w), a(v, w)",
    "a(x, _), b(x, y)",
    "a(x, 1), b(x, y)",
    "a(x, x), b(x, y)",
    "u(x), a(x, y), u(y)",
    "a(x, y), u(z)",  # two trees: the product of their matches
]


def _relations(rng: random.Random, nodes: int) -> dict[str, pl.DataFrame]:
    rel = {}
    for name in "abc":
        m = rng.randrange(0, 30)
        rel[name] = pl.DataFrame({"c0": [rng.randrange(nodes) for _ in range(m)],
                                  "c1": [rng.randrange(nodes) for _ in range(m)]},
                                 schema={"c0": pl.Int64, "c1": pl.Int64}).unique()
    rel["u"] = pl.DataFrame({"c0": sorted({rng.randrange(nodes) for _ in range(5)})},
                            schema={"c0": pl.Int64})
    return rel


def _joined_count(atoms, rel: dict[str, pl.DataFrame]) -> int:
    """Return the matches of body atoms by enumerating them, atom by atom over Python tuples."""
    bindings: list[dict] = [{}]
    for atom in atoms:
        nxt = []
        for env in bindings:
            for row in rel[atom.relation].rows():
                new, ok = dict(env), True
                for arg, value in zip(atom.args, row, strict=True):
                    if isinstance(arg, Const):
                        ok &= arg.value == value
                    elif isinstance(arg, Var):
                        ok &= new.setdefault(arg.name, value) == value
                if ok:
                    nxt.append(new)
        bindings = nxt
    return len(bindings)


def _body(text: str):
    # The head names every variable: no part of the body is an existence test, which the
    # checker would lift out of the rule (tasks/exists.py).
    names = sorted(set(re.findall(r"\b([v-z])\b", text)))
    attrs = ", ".join(f"{n}:number" for n in names)
    return parse_program(".decl a(x:number, y:number)\n.decl b(x:number, y:number)\n"
                         ".decl c(x:number, y:number)\n.decl u(x:number)\n"
                         f".decl h({attrs})\nh({', '.join(names)}) :- {text}.\n",
                         "b.dl").rules[0].body


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(BODIES))
def test_body_matches_count_the_join(seed, body):
    rel = _relations(random.Random(seed), 6)
    atoms = _body(body)
    # body_matches is the most matches of any prefix of the body.
    assert body_matches(atoms, rel) == max(_joined_count(atoms[:k], rel)
                                           for k in range(1, len(atoms) + 1))


def test_body_matches_refuses_a_cycle():
    rel = _relations(random.Random(1), 5)
    assert body_matches(_body("a(x, y), b(y, z), c(z, x)"), rel) is None


@pytest.mark.parametrize("seed", range(4))
def test_closure_sample_is_pairs_and_edge_visits(seed):
    rng = np.random.default_rng(seed)
    edges = np.unique(rng.integers(0, 40, (int(rng.integers(1, 120)), 2)), axis=0)
    g = nx.DiGraph([tuple(map(int, e)) for e in edges])
    # Every source sampled: exact. Each pair (s, t) of the closure walks t's out-edges once.
    reach = {s: set().union(*({v} | nx.descendants(g, v) for v in g.successors(s)))
             for s in g if g.out_degree(s)}
    want = (sum(len(r) for r in reach.values()),
            sum(g.out_degree(t) for s in reach for t in reach[s]))
    assert closure_sample(edges[:, 0], edges[:, 1], sample=10_000) == want


def test_view_cost_evaluates_the_view_and_stops_at_the_budget(tmp_path):
    text = (".decl a(x:number, y:number)\n.input a\n.decl b(x:number, y:number)\n.input b\n"
            ".decl v(x:number, y:number)\nv(x, z) :- [(a . b)+](x, y), [^a | b*](y, z).\n"
            ".output v\n")
    pt = build_tasks(parse_program(text, "v.dl"))
    rng = np.random.default_rng(3)
    facts = {n: np.unique(rng.integers(0, 30, (60, 2)), axis=0) for n in "ab"}
    for n, pairs in facts.items():
        np.savetxt(tmp_path / f"{n}.facts", pairs, fmt="%d", delimiter="\t")
    relations = {n: pl.DataFrame({"c0": p[:, 0], "c1": p[:, 1]}) for n, p in facts.items()}
    cost = view_cost(pt, relations, 10**9)
    want = naive_datalog.evaluate(pt, tmp_path)
    assert set(relations["v"].iter_rows()) == want["v"]
    derived = sum(len(want[n]) for n in pt.program.decls if n not in "ab")
    assert cost is not None and cost >= derived
    assert view_cost(pt, {n: relations[n] for n in "ab"}, cost - 1) is None


def test_linear_views_cost_at_most_the_budget_and_any_keeps_every_draw():
    schema = read_schema(DATA / "shop.xml")
    edges = generate_graph(schema, 3000, 2)
    ranges = type_ranges(schema, 3000)
    relations = {n: pl.DataFrame({"c0": p[:, 0], "c1": p[:, 1]}) for n, p in edges.items()}
    budget = LINEAR_TUPLES_PER_NODE * sum(c for _, c in ranges)
    linear = draw_views(schema, ranges, edges, 10, random.Random(2), LINEAR_TUPLES_PER_NODE)
    drawn = draw_views(schema, ranges, edges, 30, random.Random(2), None)
    costs = []
    for rule in drawn:
        text = "\n".join(f".decl {n}(x:number, y:number)\n.input {n}" for n in schema.labels)
        pt = build_tasks(parse_program(f"{text}\n.decl {rule.split('(')[0]}(x:number, y:number)"
                                       f"\n{rule}\n", "d.dl"))
        costs.append(view_cost(pt, dict(relations), budget))
    # The linear views are the draws within budget, in draw order (names aside).
    kept = [r.split(" :- ")[1] for r, c in zip(drawn, costs, strict=True) if c is not None]
    assert None in costs and [r.split(" :- ")[1] for r in linear] == kept[:10]


def test_no_view_within_budget_is_one_clear_error(tmp_path):
    schema = read_schema(DATA / "social-network.xml")
    with pytest.raises(LevelflowError, match="no view of at most 0 tuples per node"):
        write_workload(schema, 200, 3, 1, tmp_path, tuples_per_node=0)


def test_cli_any_selectivity_keeps_the_draws(tmp_path, capsys):
    from levelflow.cli import main

    args = ["workload", "gmark", str(DATA / "shop.xml"), "--nodes", "300", "--queries", "6",
            "--seed", "4"]
    for how in ("linear", "any"):
        with pytest.raises(SystemExit) as e:
            main([*args, "--selectivity", how, str(tmp_path / how)])
        assert e.value.code == 0, capsys.readouterr()
    schema = read_schema(DATA / "shop.xml")
    edges = generate_graph(schema, 300, 4)
    drawn = draw_views(schema, type_ranges(schema, 300), edges, 6, random.Random(4), None)
    assert (tmp_path / "any" / "program.dl").read_text().count(":-") == 6
    assert all(v in (tmp_path / "any" / "program.dl").read_text() for v in drawn)


def test_a_schema_without_edges_is_one_error_line(tmp_path, capsys):
    from levelflow.cli import main

    path = tmp_path / "noedge.xml"
    path.write_text("<generator><graph><nodes>100</nodes></graph><predicates><size>1</size>"
                    "<alias symbol='0'>a</alias></predicates><types><size>1</size>"
                    "<alias type='0'>A</alias><proportion type='0'>1.0</proportion></types>"
                    "<schema></schema></generator>")
    for how in ("linear", "any"):
        with pytest.raises(SystemExit) as e:
            main(["workload", "gmark", str(path), str(tmp_path / how), "--selectivity", how])
        err = capsys.readouterr().err
        assert e.value.code == 1 and err.count("\n") == 1 and "no view can be drawn" in err
        assert str(path) in err
    with pytest.raises(SystemExit) as e:  # the graph alone is fine
        main(["workload", "gmark", str(path), str(tmp_path / "g"), "--queries", "0"])
    assert e.value.code == 0
