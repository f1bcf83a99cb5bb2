"""Existence tests (tasks/exists.py): a body part sharing no variable with the head is lifted
into a nullary relation. Checked on its shape, by hand, against the naive reference run on
the program as written (the lifting turned off), on every plan, one tuple at a time and over
frames, and through epochs that flip the test."""

from __future__ import annotations

import polars as pl
import pytest
from naive_datalog import evaluate as naive_evaluate
from test_incremental_properties import rows_of, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.plans import fixpoint, planner
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, check, parse_program
from levelflow.tasks.ast import Atom
from levelflow.tasks.exists import PREFIX

# A test over lower relations inside a recursive rule that carries x (partitionable).
LOWER = """
.decl e(x:number, y:number)
.input e
.decl mark(x:number)
.input mark
.decl c(y:number)
c(y) :- mark(y), y > 0.
.decl d(y:number)
d(y) :- e(y, _).
.decl path(x:number, y:number)
path(x, y) :- e(x, y), x < 3.
path(x, z) :- path(x, y), e(y, z), c(w), d(w).
.decl odd(x:number)
odd(x) :- mark(x), d(w), !c(w).
.decl some()
some() :- path(x, _), mark(y), y > 5.
.output path
"""
# A test that reads the recursion it feeds: its delta atom is inside the test.
RECURSIVE = """
.decl e(x:number, y:number)
.input e
.decl mark(x:number)
.input mark
.decl reach(x:number)
reach(x) :- mark(x), x <= 0.
reach(y) :- reach(x), e(x, y).
reach(y) :- mark(y), reach(z), z > 100.
.output reach
"""
E = {(0, 1), (1, 2), (2, 3), (3, 101), (101, 4)}
MARK = {0, 2, 7, 50}


def _unlifted(text: str, monkeypatch):
    """Return the program's tasks as written: no part lifted (the reference's input)."""
    with monkeypatch.context() as m:
        m.setattr(check, "lift_tests", lambda rules, decls, *_: (rules, dict(decls)))
        return build_tasks(parse_program(text, "p.dl"))


def _reference(text, facts, tmp_path, monkeypatch, name="ref") -> dict[str, set]:
    write_facts(tmp_path / name, facts)
    return naive_evaluate(_unlifted(text, monkeypatch), tmp_path / name)


def _rules_of(pt, relation):
    return [r for r in pt.program.rules if r.heads[0].relation == relation and r.body]


def test_a_part_without_head_variables_becomes_a_nullary_relation():
    pt = build_tasks(parse_program(LOWER, "p.dl"))
    (step,) = [r for r in _rules_of(pt, "path") if len(r.body) > 1
               and any(a.relation == "path" for a in r.body if isinstance(a, Atom))]
    test = step.body[-1]
    assert [type(lit).__name__ for lit in step.body] == ["Atom", "Atom", "Atom"]
    assert test.relation.startswith(PREFIX) and test.args == ()
    assert pt.program.decls[test.relation].arity == 0
    (made,) = _rules_of(pt, test.relation)
    assert [a.relation for a in made.body] == ["c", "d"]
    # Its own task, below path's: evaluated once, not in every round of path's fixpoint.
    assert pt.task_of(test.relation).id < pt.task_of("path").id
    assert not pt.task_of(test.relation).recursive
    # `some()` has no head variable: one part stays, the other is lifted.
    (some,) = _rules_of(pt, "some")
    assert [lit.relation for lit in some.body[:1]] == ["path"]
    assert some.body[-1].relation.startswith(PREFIX)


def test_the_same_test_in_two_rules_is_one_relation_and_joined_parts_stay():
    pt = build_tasks(parse_program("""
.decl b(x:number)
.decl c(y:number)
.decl d(y:number)
.decl p(x:number)
.decl q(x:number)
.decl r(x:number, y:number)
.decl s(x:number)
p(x) :- b(x), c(y), d(y).
q(u) :- c(w), d(w), b(u).
r(x, y) :- b(x), c(y).
s(x) :- b(x), c(y), y < x.
""", "p.dl"))
    (p,), (q,) = _rules_of(pt, "p"), _rules_of(pt, "q")
    assert p.body[-1].relation == q.body[-1].relation  # named by the test's text
    assert [lit.relation for lit in q.body] == ["b", p.body[-1].relation]
    assert _rules_of(pt, "r")[0].body == parse_program(
        ".decl b(x:number)\n.decl c(y:number)\n.decl r(x:number, y:number)\n"
        "r(x, y) :- b(x), c(y).\n", "p.dl").rules[0].body  # both parts bind the head
    assert len(_rules_of(pt, "s")[0].body) == 3  # `y < x` joins the parts


@pytest.mark.parametrize("text", [
    # An aggregate counts its body's rows: 3 x 3 of them, not "some exist".
    ".decl n(k:number)\nn(k) :- k = count : { c(_), d(_) }.",
    # autoinc() numbers each body row.
    ".decl n(x:number, k:number)\nn(x, autoinc()) :- c(x), d(y).",
    # A test reading a choice-domain recursion would see it one round late.
    ".decl n(x:number, y:number) choice-domain x\nn(x, y) :- c(x), d(y).\n"
    "n(y, x) :- n(x, y), n(z, _), z > 1.",
])
def test_parts_whose_rows_or_rounds_count_stay_in_their_rule(text):
    pt = build_tasks(parse_program(".decl c(y:number)\n.decl d(y:number)\n"
                                   "c(1). c(2). c(3). d(1). d(2). d(3).\n" + text, "p.dl"))
    assert not any(n.startswith(PREFIX) for n in pt.program.decls)


@pytest.mark.parametrize("plan", ["local", "partitioned", "global"])
def test_lower_test_on_every_plan(spark, tmp_path, monkeypatch, plan):
    monkeypatch.setattr(planner, "PARTITION_MIN_ROWS", 1)
    pt = build_tasks(parse_program(LOWER, "p.dl"))
    write_facts(tmp_path / "f", {"e": E, "mark": {(m,) for m in MARK}})
    result = run_program(spark, pt, tmp_path / "f", tmp_path / "out", jobs=2, plan=plan)
    ref = _reference(LOWER, {"e": E, "mark": {(m,) for m in MARK}}, tmp_path, monkeypatch)
    # c = {2, 7, 50}, d = {0, 1, 2, 3, 101}: they share 2, so path is e's closure from 0, 1, 2.
    closure = {(0, 1), (0, 2), (0, 3), (0, 101), (0, 4), (1, 2), (1, 3), (1, 101), (1, 4),
               (2, 3), (2, 101), (2, 4)}
    assert rows_of(result.relation("path")) == ref["path"] == closure
    # d holds 0, 1, 3, 101 outside c: every mark is odd.
    assert rows_of(result.relation("odd")) == ref["odd"] == {(m,) for m in MARK}
    assert rows_of(result.relation("some")) == {(True,)} and ref["some"] == {()}


def test_lower_test_false_keeps_only_the_first_rule(spark, tmp_path, monkeypatch):
    facts = {"e": E, "mark": {(7,), (50,)}}  # c = {7, 50} shares nothing with d
    pt = build_tasks(parse_program(LOWER, "p.dl"))
    write_facts(tmp_path / "f", facts)
    result = run_program(spark, pt, tmp_path / "f", tmp_path / "out", jobs=2, plan="local")
    assert rows_of(result.relation("path")) == {(0, 1), (1, 2), (2, 3)}
    assert rows_of(result.relation("path")) == _reference(LOWER, facts, tmp_path,
                                                          monkeypatch)["path"]


@pytest.mark.parametrize("plan", ["local", "global"])
def test_a_test_inside_the_recursion_on_every_plan(spark, tmp_path, monkeypatch, plan):
    pt = build_tasks(parse_program(RECURSIVE, "p.dl"))
    (task,) = [t for t in pt.tasks if "reach" in t.relations]
    assert any(n.startswith(PREFIX) for n in task.relations)  # the test joins reach's SCC
    write_facts(tmp_path / "f", {"e": E, "mark": {(m,) for m in MARK}})
    result = run_program(spark, pt, tmp_path / "f", tmp_path / "out", jobs=2, plan=plan)
    # From 0: 1, 2, 3, 101, 4; 101 > 100, so every mark is reached too.
    expected = {(0,), (1,), (2,), (3,), (101,), (4,), (7,), (50,)}
    assert rows_of(result.relation("reach")) == expected
    assert expected == _reference(RECURSIVE, {"e": E, "mark": {(m,) for m in MARK}},
                                  tmp_path, monkeypatch)["reach"]


def _in_process(pt, facts: dict[str, set], tuple_rounds: bool) -> tuple[dict[str, set], bool]:
    """Return every relation, each task's fixpoint run in process as a worker runs it, and
    whether some rounds ran one tuple at a time."""
    decls, rels, tiny = pt.program.decls, {}, False
    for task in pt.tasks:
        given = {n: pl.DataFrame(sorted(facts[n]), schema=[f"c{i}" for i in
                                                           range(decls[n].arity)],
                                 orient="row")
                 for n in task.relations if n in facts}
        out = fixpoint.run_task(tuple(r for r in task.rules if r.body), task.relations, decls,
                                rels, given, tuple_rounds=tuple_rounds)
        rels.update({n: out.relation(n) for n in task.relations})
        tiny |= bool(out.ranked)
    return {n: set(df.rows()) for n, df in rels.items()}, tiny


@pytest.mark.parametrize("tuple_rounds", [True, False])
def test_one_tuple_at_a_time_and_frames_agree_with_the_reference(tmp_path, monkeypatch,
                                                                 tuple_rounds):
    chain = {(i, i + 1) for i in range(40)} | {(40, -5)}  # tiny deltas: tuple rounds
    for text in (LOWER, RECURSIVE):
        for mark in ({0, 2, 7}, {0, 200}):  # the lower test true, then false
            facts = {"e": chain, "mark": {(m,) for m in mark}}
            got, tiny = _in_process(build_tasks(parse_program(text, "p.dl")), facts,
                                    tuple_rounds)
            assert tiny == (tuple_rounds and (text, mark) != (LOWER, {0, 200}))  # no rounds
            ref = _reference(text, facts, tmp_path, monkeypatch)
            for name in ("path", "odd", "reach"):
                if name in ref:
                    assert got[name] == ref[name], (name, mark)


@pytest.mark.parametrize("text,name", [(LOWER, "path"), (RECURSIVE, "reach")])
def test_epochs_that_flip_the_test_equal_the_reference(spark, tmp_path, monkeypatch, text,
                                                       name):
    (tmp_path / "p.dl").write_text(text)
    facts = {"e": set(E), "mark": {(m,) for m in MARK}}
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f0",
                                           tmp_path / "state", mode="incremental")
    # LOWER: c ∩ d is {2}; marking 3 adds a witness, unmarking 2 keeps it true, unmarking 3
    # makes it false, marking 2 again true. RECURSIVE: 101 is reached through 3 -> 101;
    # removing that edge and 101 -> 4 unreaches every mark; putting one back reaches them.
    steps = {
        "path": [[(1, "mark", (3,))], [(-1, "mark", (2,))], [(-1, "mark", (3,))],
                 [(1, "mark", (2,))]],
        "reach": [[(-1, "e", (3, 101))], [(1, "e", (2, 101))], [(-1, "e", (2, 101)),
                                                                (1, "mark", (-1,))],
                  [(1, "e", (3, 101))]],
    }[name]
    pt = build_tasks(parse_program(text, "p.dl"))
    test = next(lit.relation for r in _rules_of(pt, name) for lit in r.body
                if isinstance(lit, Atom) and lit.relation.startswith(PREFIX))
    seen = set()
    for k, ops in enumerate(steps, 1):
        for sign, rel, row in ops:
            (session.insert if sign > 0 else session.remove)(rel, row)
            (facts[rel].add if sign > 0 else facts[rel].discard)(row)
        result = session.commit()
        ref = _reference(text, facts, tmp_path, monkeypatch, f"ref{k}")
        got = rows_of(session.relation(name))
        assert got == ref[name], (k, ops)
        # Maintained, not recomputed: a nullary head is not counted (counting.py), so DRed
        # over-deletes the test on a lost witness and re-derives it from the one left.
        assert result.strategies[pt.task_of(test).name] == "dred", (k, result.strategies)
        seen.add(frozenset(got))
    session.close()
    assert len(seen) >= 2  # the epochs did flip the test
