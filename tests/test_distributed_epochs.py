"""Epochs of a task kept under the distributed plan: one barrier Spark job over its partitions,
DRed's phases exchanging only delta tuples (incremental/backends/worker/dist_job.py).

After every epoch (insertions, deletions, a mix, on graphs with cycles) each maintained relation
must equal the naive reference's evaluation of the same base facts (tests/naive_datalog.py).
"""

from __future__ import annotations

import random

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_distributed_plan import LEFT_TC, MUTUAL, NONLINEAR_TC, REACH
from test_incremental_properties import write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.incremental.backends.worker import dist_job
from levelflow.tasks import build_tasks, parse_program

# The recursive relation has base facts of its own (an `@base:path` stand-in), the program's
# own fact too, and a symbol column.
OWN_FACTS = """
.decl edge(x:symbol, y:symbol)
.input edge
.decl path(x:symbol, y:symbol)
.input path
path("s", "t").
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.output path
"""


def _edges(rng, nodes: int, count: int) -> set[tuple[int, int]]:
    return {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(count)}


def _rows(session, name: str) -> set[tuple]:
    return {tuple(r) for r in session.relation(name).collect()}


def _check(session, pt, facts: dict, tmp_path, step: str) -> None:
    write_facts(tmp_path / step, facts)
    expected = naive_evaluate(pt, tmp_path / step)
    for name in pt.program.outputs:
        assert _rows(session, name) == expected[name], (step, name)


def _epoch(session, facts: dict, relation: str, plus=(), minus=()):
    for row in plus:
        session.insert(relation, row)
        facts[relation].add(row)
    for row in minus:
        session.remove(relation, row)
        facts[relation].discard(row)
    return session.commit()


def _boot(spark, tmp_path, text: str, facts: dict):
    """Return (the tasks, a session bootstrapped with every recursive task distributed)."""
    write_facts(tmp_path / "facts", facts)
    (tmp_path / "p.dl").write_text(text)
    pt = build_tasks(parse_program(text, "p.dl"))
    # --strategy incremental: these small graphs' changes are past the elastic rule's large
    # change (recomputed), and a loaded machine may trip its switch: DRed is what is tested.
    return pt, IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "facts", None,
                                            driver_rows=None, plan="distributed",
                                            mode="incremental")


def _recursive(pt) -> list[str]:
    return [t.name for t in pt.tasks if t.recursive]


@pytest.fixture
def barrier_jobs(monkeypatch) -> list:
    """Return the list of the distributed epochs' barrier jobs as they run (their sources)."""
    jobs, run = [], dist_job._run

    def counted(ctx, spec, frames):
        jobs.append({kind for _, kind in spec.sources})
        return run(ctx, spec, frames)

    monkeypatch.setattr(dist_job, "_run", counted)
    return jobs


@pytest.mark.parametrize("text, seed", [(LEFT_TC, 1), (NONLINEAR_TC, 2), (MUTUAL, 3),
                                        (REACH, 4)])
def test_epochs_equal_the_reference(spark, tmp_path, text, seed, barrier_jobs):
    rng = random.Random(seed)
    edges = _edges(rng, 30, 45) | {(0, 1), (1, 2), (2, 0)}  # a cycle, whatever the draw
    facts = {"edge": edges, "src": {(0,)}}
    pt, s = _boot(spark, tmp_path, text, facts)
    try:
        tasks = _recursive(pt)
        assert all(s.snap.arranged[t].parts >= 2 for t in tasks)  # kept partitioned
        _check(s, pt, facts, tmp_path, "boot")
        present = sorted(facts["edge"])
        steps = [("insert", _edges(rng, 30, 6) - facts["edge"], ()),
                 ("delete", (), set(rng.sample(present, 6)) | {(1, 2)}),  # breaks the cycle
                 ("mix", {(1, 2), (5, 29)} - facts["edge"], set(rng.sample(present, 4)))]
        for step, plus, minus in steps:
            minus = {e for e in minus if e in facts["edge"]}
            before = len(barrier_jobs)
            r = _epoch(s, facts, "edge", plus, minus)
            _check(s, pt, facts, tmp_path, step)
            # One barrier job (per recursive task), its partitions found where they were left.
            assert len(barrier_jobs) - before == len(tasks), step
            assert all("state" not in kinds for kinds in barrier_jobs[before:]), step
            for t in tasks:
                assert r.strategies[t] == "dred", (step, r.strategies)
                assert r.spark_jobs[t] == 1, (step, r.spark_jobs)  # one barrier job
    finally:
        s.close()


def test_own_base_facts_and_symbols(spark, tmp_path):
    facts = {"edge": {("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")},
             "path": {("d", "x"), ("t", "u")}}
    pt, s = _boot(spark, tmp_path, OWN_FACTS, facts)
    try:
        _check(s, pt, facts, tmp_path, "boot")
        r = _epoch(s, facts, "path", plus={("x", "a")}, minus={("d", "x")})
        _check(s, pt, facts, tmp_path, "path")
        assert r.strategies["path"] == "dred" and r.spark_jobs["path"] == 1
        r = _epoch(s, facts, "edge", plus={("d", "e")}, minus={("c", "a")})
        _check(s, pt, facts, tmp_path, "edge")
        assert r.strategies["path"] == "dred" and r.spark_jobs["path"] == 1
    finally:
        s.close()


def test_a_partition_that_lost_its_copies_gets_them_shipped(spark, tmp_path, monkeypatch,
                                                            barrier_jobs):
    import dataclasses

    from levelflow.engine.incremental.backends.worker.share_job import next_token

    rng = random.Random(9)
    facts = {"edge": _edges(rng, 20, 30) | {(0, 1), (1, 0)}}
    pt, s = _boot(spark, tmp_path, LEFT_TC, facts)
    try:
        held = s.snap.arranged["path"]  # a version no worker holds: as if they had ended
        s.snap.arranged["path"] = dataclasses.replace(held, token=next_token(held.token))
        _epoch(s, facts, "edge", minus={(0, 1)})
        _check(s, pt, facts, tmp_path, "shipped")
        assert ["state" in kinds for kinds in barrier_jobs] == [False, True]  # miss, shipped
        r = _epoch(s, facts, "edge", plus={(0, 1)})
        _check(s, pt, facts, tmp_path, "resident")
        # The shipped run left the partitions in place: one job, the change only.
        assert r.spark_jobs["path"] == 1 and "state" not in barrier_jobs[-1]
        monkeypatch.setattr(dist_job, "SHIP_ALWAYS", True)
        _epoch(s, facts, "edge", plus={(3, 4)}, minus={(1, 0)})
        _check(s, pt, facts, tmp_path, "ship-always")
        assert "state" in barrier_jobs[-1]
    finally:
        s.close()


def test_run_state_plan_distributed_then_update(tmp_path, cli, cli_spark, barrier_jobs):
    # The state keeps the plan it was bootstrapped under: `update` (another command, a new
    # session) runs the closure's epoch as one barrier job too.
    from levelflow.engine.incremental import StateDir

    facts = {"edge": {(1, 2), (2, 3), (3, 1), (3, 4)}}
    write_facts(tmp_path / "facts", facts)
    (tmp_path / "p.dl").write_text(LEFT_TC)
    code, out, err = cli(["run", tmp_path / "p.dl", "-F", tmp_path / "facts", "-D",
                          tmp_path / "out0", "--state", tmp_path / "st", "--plan", "distributed",
                          "-q"])
    assert code == 0, err
    (tmp_path / "d.diff").write_text("-edge(3,1)\n+edge(4,5)\n")
    code, out, err = cli(["update", tmp_path / "st", "--insert", tmp_path / "d.diff", "-D",
                          tmp_path / "out1", "--strategy", "incremental"])
    assert code == 0, err
    facts["edge"] = {(1, 2), (2, 3), (3, 4), (4, 5)}
    write_facts(tmp_path / "ref", facts)
    expected = naive_evaluate(build_tasks(parse_program(LEFT_TC, "p.dl")), tmp_path / "ref")
    got = {tuple(map(int, line.split("\t")))
           for line in (tmp_path / "out1" / "path.csv").read_text().splitlines()}
    assert got == expected["path"]
    assert StateDir(tmp_path / "st").manifest()["plan"] == "distributed"  # carried on
    assert barrier_jobs  # the update's epoch of path: a barrier job (or two after the open)


def test_the_drivers_rendezvous_swaps_addresses_per_stage_with_a_jobs_token_only():
    import json
    import socket
    import threading

    from levelflow.engine.plans.exchange import _ASK, ExchangeError, Rendezvous, swap_at

    token = "k" * 32
    meeting = Rendezvous(timeout=5)
    meeting.expect(token, 2)
    got: dict = {}

    def task(key, said: str, stage: int, me: int, attempt: int = 0) -> None:
        try:
            got[key] = swap_at(("127.0.0.1", meeting.port), said, (stage, attempt),
                               json.dumps([me, f"h{stage}", 100 + attempt]), 5)
        except ExchangeError as e:
            got[key] = e

    def run(*tasks) -> None:
        threads = [threading.Thread(target=task, args=t) for t in tasks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)

    run(("x", "x" * 32, 3, 0))  # no such job
    # The same job run twice at once (two stages): each swaps its own tasks' lines.
    run(((3, 0), token, 3, 0), ((3, 1), token, 3, 1), ((4, 0), token, 4, 0),
        ((4, 1), token, 4, 1))
    # A retried stage: partition 0's first task is gone; its next one takes its place.
    body = json.dumps([5, 7, json.dumps([0, "h5", 107])]).encode()
    gone = socket.create_connection(("127.0.0.1", meeting.port))
    gone.sendall(_ASK.pack(len(token), len(body)) + token.encode() + body)
    gone.close()
    run(((5, 1), token, 5, 1, 9), ((5, 0), token, 5, 0, 8))
    meeting.close()
    assert isinstance(got["x"], ExchangeError)  # told nothing
    for stage in (3, 4):
        assert sorted(map(json.loads, got[stage, 0])) == \
            sorted(map(json.loads, got[stage, 1])) == [[0, f"h{stage}", 100], [1, f"h{stage}", 100]]
    assert sorted(map(json.loads, got[5, 0])) == [[0, "h5", 108], [1, "h5", 109]]
