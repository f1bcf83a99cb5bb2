"""Soufflé's own test programs that once failed here, maintained under `update` epochs.

Takeuchi's recursive rule (no atom can be matched whole first) and recursive nullary
relations with a program fact: after each epoch (an input removed, then put back) every
relation equals its from-scratch value, under each way an epoch runs (Spark-side DRed and
counting, the arranged Python workers, recomputation).
"""

from __future__ import annotations

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_grounded_body import takeuchi
from test_incremental_properties import rows_of, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program

TAK = """
.decl low(n:number)
.input low
.decl natural(n:number)
natural(n) :- low(n).
natural(n + 1) :- natural(n), n < {top}.
.decl tak(x:number, y:number, z:number, v:number, q:number)
tak(X,Y,Z,Y,0) :- Y >= X, natural(X), natural(Y), natural(Z).
tak(X,Y,Z,V,Q1+Q2+Q3+Q4+1) :- tak(X-1,Y,Z,V1,Q1), tak(Y-1,Z,X,V2,Q2), tak(Z-1,X,Y,V3,Q3),
                              tak(V1,V2,V3,V,Q4), Y < X.
"""

NULLARY = """
.decl I()
.input I
.decl P()
.decl Q()
P().
P() :- Q().
Q() :- P().
.decl N()
N().
N() :- N().
.decl A()
.decl B()
A() :- B().
B() :- A().
B() :- I().
.decl R()
R() :- R(), I().
"""

MODES = [{"mode": "incremental", "arranged": True}, {"mode": "incremental", "arranged": False},
         {"mode": "scratch"}]


@pytest.mark.parametrize("options", MODES, ids=["arranged", "spark", "scratch"])
def test_takeuchi_under_epochs_equals_the_function(spark, tmp_path, options):
    # Over -1..3 tak recurses (24 of 99 tuples, 5 rounds deep); 0..3 keeps 49 (9 recursive).
    # -3..3 ran 14 rounds per evaluation rather than 5: a minute on the Spark side. There, where
    # each round is a Spark job, -1..2 (9 of 49 recursive, 2 rounds deep) and 0..2 (2 of 20)
    # take the same epochs (a recursive tuple removed, then derived again) in half the time.
    top = 2 if options.get("arranged") is False else 3
    pt = build_tasks(parse_program(TAK.replace("{top}", str(top)), "tak.dl"))
    write_facts(tmp_path, {"low": {(-1,)}})
    session = IncrementalSession.bootstrap(spark, pt, tmp_path, **options)
    assert rows_of(session.relation("tak")) == takeuchi(-1, top)
    for old, new in ((-1, 0), (0, -1)):
        session.remove("low", (old,))
        session.insert("low", (new,))
        session.commit()
        assert rows_of(session.relation("tak")) == takeuchi(new, top), (old, new)
        assert session.size("tak") == len(takeuchi(new, top))


@pytest.mark.parametrize("options", MODES, ids=["arranged", "spark", "scratch"])
def test_recursive_nullary_relations_under_epochs(spark, tmp_path, options):
    pt = build_tasks(parse_program(NULLARY, "nullary.dl"))
    facts = {"I": {()}}
    write_facts(tmp_path / "f", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f", **options)
    for k, present in enumerate((True, False, True)):
        if k:
            (session.insert if present else session.remove)("I", ())
            session.commit()
            facts["I"] = {()} if present else set()
        write_facts(tmp_path / f"ref{k}", facts)
        expected = naive_evaluate(pt, tmp_path / f"ref{k}")
        assert expected["A"] == ({()} if present else set())  # the epochs matter
        for name in pt.program.decls:
            got = {() for _ in rows_of(session.relation(name))}
            assert got == expected[name], (k, name)


DEEP = """
.decl seed(x:number)
.input seed
.decl a(x:number)
.decl b(x:number)
.decl c(y:number)
c(1). c(2).
b(x) :- seed(x).
a(x) :- b(x), c(y), c(y).
b(x + 1) :- a(x), x < {top}.
"""


@pytest.mark.parametrize("options", MODES, ids=["arranged", "spark", "scratch"])
def test_a_deep_one_tuple_chain_under_epochs(spark, tmp_path, options):
    """Eighty one-tuple rounds (run one tuple at a time in a worker): the chain from the
    seed, then from a later seed, then from the first again. On the Spark side each round is
    a job of its own: 10 rounds there (a deletion still runs through the whole chain)."""
    top = 5 if options.get("arranged") is False else 40
    pt = build_tasks(parse_program(DEEP.replace("{top}", str(top)), "deep.dl"))
    write_facts(tmp_path, {"seed": {(0,)}})
    session = IncrementalSession.bootstrap(spark, pt, tmp_path, **options)
    assert rows_of(session.relation("a")) == {(x,) for x in range(top + 1)}
    for old, new in ((0, top * 5 // 8), (top * 5 // 8, 0)):
        session.remove("seed", (old,))
        session.insert("seed", (new,))
        session.commit()
        assert rows_of(session.relation("b")) == {(x,) for x in range(new, top + 1)}, (old, new)
        assert rows_of(session.relation("a")) == {(x,) for x in range(new, top + 1)}, (old, new)
        assert session.size("a") == top + 1 - new
