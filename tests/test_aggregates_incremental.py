"""Aggregates maintained: every epoch equals the naive reference from scratch, the aggregate
tasks recompute only the groups the change touched (strategy "aggregate"), above recursion
and below it, and random programs over random epochs (hypothesis) agree with from scratch.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_incremental_properties import check_against_reference, random_epochs, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program

# min hop count over a closure (aggregate above recursion), and a recursion that reads an
# aggregate (recursion above it): reachable through edges out of nodes of degree >= 2.
LAYERED = """
.decl e(x:number, y:number)
.input e
.decl n(x:number)
.input n
.decl hops(x:number, y:number, d:number)
hops(x, y, 1) :- e(x, y).
hops(x, z, d + 1) :- hops(x, y, d), e(y, z), d < 6.
.decl dist(x:number, y:number, d:number)
dist(x, y, min d : hops(x, y, d)) :- hops(x, y, _).
.decl deg(x:number, c:number)
deg(x, c) :- n(x), c = count : e(x, _).
.decl busy(x:number)
busy(x) :- deg(x, c), c >= 2.
.decl via(x:number, y:number)
via(x, y) :- busy(x), e(x, y).
via(x, z) :- via(x, y), e(y, z).
.decl total(s:number, m:float)
total(s, m) :- s = sum y : e(_, y), m = mean y : e(_, y).
.decl far(x:number, m:number)
far(x, m) :- n(x), m = max d : { dist(x, _, d), !busy(x) }.
"""

GENS = {"e": lambda rng: (rng.randint(0, 7), rng.randint(0, 7)),
        "n": lambda rng: (rng.randint(0, 8),)}


def _session(spark, tmp_path, text, facts):
    pt = build_tasks(parse_program(text, "a.dl"))
    write_facts(tmp_path / "f0", facts)
    return IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental"), pt


def test_epochs_above_and_below_recursion_equal_from_scratch(spark, tmp_path):
    rng = random.Random(5)
    facts = {"e": {GENS["e"](rng) for _ in range(14)}, "n": {(k,) for k in range(8)}}
    session, pt = _session(spark, tmp_path, LAYERED, facts)
    check_against_reference(session, pt, facts, tmp_path / "ref0")
    strategies = set()
    for k, ops in enumerate(random_epochs(rng, GENS, facts, 4), 1):
        for sign, name, row in ops:
            (session.insert if sign > 0 else session.remove)(name, row)
        result = session.commit()
        strategies |= {s for t, s in result.strategies.items() if "@agg" in t}
        check_against_reference(session, pt, facts, tmp_path / f"ref{k}")
    assert strategies == {"aggregate"}


KINDS = ["count : {BODY}", "sum y : {BODY}", "min y : {BODY}", "max y : {BODY}",
         "mean y : {BODY}"]
BODIES = ["a(x, y)", "a(x, y), b(y)", "a(x, y), !b(y)", "a(x, y), y > 2", "b(y), a(y, x)"]


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), body=st.sampled_from(BODIES),
       grouped=st.booleans(), seed=st.integers(0, 10_000))
def test_random_aggregates_over_random_epochs_equal_from_scratch(spark, tmp_path_factory,
                                                                  kind, body, grouped, seed):
    agg = kind.replace("BODY", body if grouped else body.replace("x", "z"))
    out = "float" if kind.startswith("mean") else "number"
    rule = f"r(x, v) :- g(x), v = {agg}." if grouped else f"r(0, v) :- v = {agg}."
    text = f"""
.decl a(x:number, y:number)
.input a
.decl b(y:number)
.input b
.decl g(x:number)
.input g
.decl r(x:number, v:{out})
{rule}
.decl s(x:number, v:{out})
s(x, v) :- r(x, v), b(x).
"""
    rng = random.Random(seed)
    gens = {"a": lambda r: (r.randint(0, 4), r.randint(0, 5)), "b": lambda r: (r.randint(0, 5),),
            "g": lambda r: (r.randint(0, 5),)}
    facts = {name: {gen(rng) for _ in range(6)} for name, gen in gens.items()}
    tmp = tmp_path_factory.mktemp("agg")
    session, pt = _session(spark, tmp, text, facts)
    for k, ops in enumerate(random_epochs(rng, gens, facts, 3), 1):
        for sign, name, row in ops:
            (session.insert if sign > 0 else session.remove)(name, row)
        session.commit()
        check_against_reference(session, pt, facts, tmp / f"ref{k}")


@pytest.mark.parametrize("large", [True])
def test_a_large_change_recomputes_an_aggregate_task(spark, tmp_path, large):
    """The elastic switch covers aggregate tasks: a change to most of what one reads is a
    from-scratch recompute (strategy bootstrap), and still right."""
    facts = {"e": {(k % 5, k) for k in range(40)}, "n": {(k,) for k in range(5)}}
    pt = build_tasks(parse_program(LAYERED, "a.dl"))
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="elastic")
    for row in sorted(facts["e"])[:30]:
        session.remove("e", row)
        facts["e"].discard(row)
    result = session.commit()
    assert "bootstrap" in {s for t, s in result.strategies.items() if "@agg" in t}
    check_against_reference(session, pt, facts, tmp_path / "ref1")
