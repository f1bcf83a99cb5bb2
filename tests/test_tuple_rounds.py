"""Rounds run one tuple at a time (plans/tuples.py) give exactly the frame rounds' tuples and ranks.

Delete-and-rederive reads the ranks, so a tuple must be found in the same round either way.
Random facts for programs that cover linear and non-linear recursion, mutual recursion,
expressions (with overflow and division by zero), equalities that bind, comparisons,
negation, constants, repeated variables, wildcards, nullary relations and tests of lower
relations by constant keys; each run all frames, all tuples, and switching between them at
small thresholds.
"""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from levelflow.engine.plans import fixpoint, tiny
from levelflow.engine.plans.columnar import frame_schema
from levelflow.tasks import build_tasks, parse_program

PROGRAMS = {
    "linear": """
.decl e(x:number, y:number)
.decl p(x:number, y:number)
p(x, y) :- e(x, y).
p(x, z) :- p(x, y), e(y, z), !e(z, x).
""",
    "nonlinear": """
.decl e(x:number, y:number)
.decl p(x:number, y:number)
p(x, y) :- e(x, y).
p(x, z) :- p(x, y), p(y, z), x != z.
""",
    "mutual": """
.decl e(x:number, y:number)
.decl a(x:number, y:number)
.decl b(x:number, y:number)
a(x, y) :- e(x, y), x < y.
b(y, x) :- a(x, y), e(_, x).
a(x, y + 1) :- b(x, y), y < 9.
a(x, x) :- b(x, x).
""",
    "arith": """
.decl e(x:number, y:number)
.decl v(x:number, y:number)
v(x, y) :- e(x, y).
v(x / y, y * 1000000000000) :- v(x, y), y != 3.
v(y % 5 - x, z) :- v(x, y), z = y - 1, z > -4, z < 20.
v(x, y) :- v(y, x), v(x, x), e(x - 1, _).
""",
    "unsigned_float": """
.decl e(x:number, y:number)
.decl u(x:unsigned)
.decl f(x:float)
u(as_u) :- e(_, y), as_u = 3u, y > 0.
u(x - 1u) :- u(x), x < 7u.
f(1.5) :- u(_).
f(x / 2.0) :- f(x), x > 0.2.
""",
    "nullary": """
.decl e(x:number, y:number)
.decl z()
.decl w(x:number)
z() :- e(1, _).
w(x) :- e(x, x), z().
w(y) :- w(x), e(x, y), z().
z() :- w(3).
""",
    # Tests of lower relations whose key is constant (decided once when compiled), a
    # comparison and arithmetic with a constant operand on either side.
    "constant_tests": """
.decl e(x:number, y:number)
.decl flag()
.decl p(x:number, y:number)
flag() :- e(2, _).
p(x, y) :- e(x, y), flag().
p(x, y + 1) :- p(x, y), y < 8, e(3, _), flag().
p(y, x) :- p(x, y), !e(x, 0), e(_, _), 4 > x - y.
p(x, 1 - y) :- p(x, y), !flag(), e(y, y).
""",
}


def _facts(pairs) -> pl.DataFrame:
    return pl.DataFrame(sorted(set(pairs)), schema={"c0": pl.Int64, "c1": pl.Int64},
                        orient="row")


def _run(program: str, edges: pl.DataFrame, tuple_rounds: bool) -> dict:
    pt = build_tasks(parse_program(PROGRAMS[program], "p.dl"))
    decls = pt.program.decls
    lower = {"e": edges}
    out = {}
    for task in pt.tasks:
        if "e" in task.relations:
            continue
        rules = tuple(r for r in task.rules if r.body)
        base = fixpoint.base_tuples(rules, task.relations, decls, lower, {})
        outcome = fixpoint.TaskOutcome(rounds=[base], rows={n: d.height for n, d in base.items()})
        rels = {n: fixpoint.Relation(decls[n], base[n]) for n in task.relations}
        recursive = [r for r in rules if fixpoint.reads_own(r, task.relations)]
        fixpoint.iterate(recursive, rels, decls, lower, outcome, tuple_rounds=tuple_rounds)
        for n in task.relations:
            ranked = outcome.relation(n, ranked=True)
            out[n] = (sorted(ranked.rows()), outcome.rows[n], outcome.iterations)
            assert ranked.height == outcome.rows[n]
            assert ranked.columns == [*frame_schema(decls[n]), "_it"]
            lower[n] = ranked.drop("_it")
    return out


EDGES = st.lists(st.tuples(st.integers(-3, 12), st.integers(-3, 12)), max_size=30)


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("enter,leave", [(10**9, 10**9), (2, 6)], ids=["tuples", "switching"])
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edges=EDGES)
def test_tuple_rounds_equal_frame_rounds(monkeypatch, program, enter, leave, edges):
    monkeypatch.setattr(tiny, "ENTER", enter)
    monkeypatch.setattr(tiny, "LEAVE", leave)
    frames = _run(program, _facts(edges), tuple_rounds=False)
    tuples = _run(program, _facts(edges), tuple_rounds=True)
    assert tuples == frames


def test_a_million_round_chain_is_not_a_frame_per_round():
    """One tuple per round: the outcome keeps one ranked frame, not a frame per round."""
    pt = build_tasks(parse_program("""
.decl a(x:number)
.decl b(x:number)
.decl c(y:number)
b(0).
a(x) :- b(x), c(y), y <= x + 2.
b(x + 1) :- a(x), x < 2000.
""", "p.dl"))
    task = pt.task_of("a")
    outcome = fixpoint.run_task(tuple(r for r in task.rules if r.body), task.relations,
                                pt.program.decls, {"c": pl.DataFrame({"c0": [1, 2]})},
                                {"b": pl.DataFrame({"c0": [0]})})
    assert outcome.iterations == 4002  # the last round finds nothing
    b = outcome.relation("b", ranked=True).sort("c0")
    assert b["c0"].to_list() == list(range(2001)) and b["_it"].to_list() == list(range(0, 4001, 2))
    assert len(outcome.ranked["b"]) == 1
