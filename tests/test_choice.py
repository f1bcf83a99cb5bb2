"""choice-domain: the smallest candidate per key (non-key attributes in declaration order),
written out by hand and checked against every plan, and kept under random epochs equal to
from-scratch evaluation."""

from __future__ import annotations

import random

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_incremental_properties import rows_of, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.errors import DatalogError

CHOICE = """
.decl edge(x: number, y: number)
.input edge
.decl pick(x: number, y: number) choice-domain x
pick(x, y) :- edge(x, y).
.decl two(a: number, b: symbol, c: number) choice-domain (a, b)
two(x, "s", y) :- edge(x, y).
two(x, "t", z) :- edge(x, y), edge(y, z).
.decl out(x: number, y: number)
out(y, x) :- pick(x, y).
.output pick
.output two
"""
EDGES = {(1, 5), (1, 3), (2, 1), (2, 9), (3, 2)}


def _tasks(text: str):
    return build_tasks(parse_program(text, "c.dl"))


def _smallest(rows, key: int) -> set:
    """The choice written out directly: per key prefix, the smallest tuple."""
    best: dict = {}
    for row in rows:
        k = row[:key]
        if k not in best or row < best[k]:
            best[k] = row
    return set(best.values())


@pytest.mark.parametrize("plan", ["local", "global"])
def test_choice_keeps_the_smallest_candidate_per_key(spark, tmp_path, plan):
    pt = _tasks(CHOICE)
    write_facts(tmp_path, {"edge": EDGES})
    result = run_program(spark, pt, tmp_path, tmp_path / "out", jobs=2, plan=plan)
    assert (tmp_path / "out" / "pick.csv").read_text() == "1\t3\n2\t1\n3\t2\n"
    two = {(1, "s", 3), (1, "t", 2), (2, "s", 1), (2, "t", 3), (3, "s", 2), (3, "t", 1)}
    assert rows_of(result.relation("two")) == two
    assert rows_of(result.relation("out")) == {(3, 1), (1, 2), (2, 3)}
    paths = {(x, "t", z) for x, y in EDGES for y2, z in EDGES if y == y2}
    assert two == _smallest({(x, "s", y) for x, y in EDGES} | paths, 2)


def test_epochs_rechoose_and_equal_from_scratch(spark, tmp_path):
    pt = _tasks(CHOICE)
    rng = random.Random(5)
    facts = {"edge": {(rng.randrange(6), rng.randrange(9)) for _ in range(20)}}
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    for k in range(1, 3):
        for row in rng.sample(sorted(facts["edge"]), 4):  # often a chosen tuple
            session.remove("edge", row)
            facts["edge"].discard(row)
        for _ in range(3):
            row = (rng.randrange(6), rng.randrange(9))
            session.insert("edge", row)
            facts["edge"].add(row)
        session.commit()
        write_facts(tmp_path / f"ref{k}", facts)
        ref = naive_evaluate(pt, tmp_path / f"ref{k}")
        assert rows_of(session.relation("pick")) == _smallest(facts["edge"], 1), k
        for name in ("pick", "two", "out"):
            assert rows_of(session.relation(name)) == ref[name], (k, name)


@pytest.mark.parametrize("text,message", [
    (".decl r(x: number, y: number) choice-domain z\nr(1, 2).",
     r"c\.dl:1:31: error: choice-domain of 'r' names 'z'"),
    (".decl r(x: number, y: number) choice-domain x\n.input r",
     r"c\.dl:1:31: error: choice-domain of 'r', an \.input relation, is not supported"),
    (".decl r(x: number, y: number) choice-domain x,\n",
     r"c\.dl:1:46: error: expected a directive"),
])
def test_choice_refusals_are_one_located_line(text, message):
    with pytest.raises(DatalogError, match=message) as info:
        _tasks(text)
    assert "\n" not in str(info.value)


def test_first_epochs_after_bootstrap_and_open_find_the_counts(spark, tmp_path, monkeypatch):
    """A bootstrap that counts `pick` on the Spark side (as past BOOTSTRAP_COUNT_ROWS) and an
    open both leave its counts in a worker: no epoch misses them (a miss runs a second job
    shipping the old versions), and every epoch equals the naive reference."""
    from levelflow.engine.incremental import epoch

    monkeypatch.setattr(epoch, "BOOTSTRAP_COUNT_ROWS", 0)
    pt = _tasks(CHOICE)
    rng = random.Random(6)
    facts = {"edge": {(rng.randrange(6), rng.randrange(9)) for _ in range(20)}}
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", tmp_path / "state",
                                           mode="incremental")
    try:
        for k in range(1, 3):  # the first epoch after the bootstrap, the first after the open
            if k == 2:
                session.close()
                session = IncrementalSession.open(spark, tmp_path / "state", mode="incremental")
            assert "pick" in session.snap.arranged, k  # counted where its epochs run
            for row in rng.sample(sorted(facts["edge"]), 3):
                session.remove("edge", row)
                facts["edge"].discard(row)
            row = (rng.randrange(6), rng.randrange(9))
            session.insert("edge", row)
            facts["edge"].add(row)
            result = session.commit()
            assert result.strategies["pick"] == "counting", k
            assert result.spark_jobs.get("pick", 0) <= 1, (k, result.spark_jobs)
            write_facts(tmp_path / f"ref{k}", facts)
            ref = naive_evaluate(pt, tmp_path / f"ref{k}")
            for name in ("pick", "two", "out"):
                assert rows_of(session.relation(name)) == ref[name], (k, name)
    finally:
        session.close()
