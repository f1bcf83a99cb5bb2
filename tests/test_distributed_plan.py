"""The distributed plan: a recursive task's relations hash-partitioned over P barrier tasks of
one Spark job, each round's delta exchanged worker to worker (engine/plans/distributed.py).

Results must equal the naive reference's (tests/naive_datalog.py) for every recursion shape the
routing serves, and the recursive task must cost the same few Spark jobs whatever its rounds.
"""

from __future__ import annotations

import random
import socket
import threading

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_incremental_properties import write_facts

from levelflow.engine.memory import BYTES_PER_ROW
from levelflow.engine.plans import PlanError, choose_plan
from levelflow.engine.plans.exchange import Exchange, ExchangeError
from levelflow.engine.plans.planner import worker_rows
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, parse_program

EDGE = ".decl edge(x:number, y:number)\n.input edge\n"

REACH = EDGE + """
.decl src(x:number)
.input src
.decl reach(x:number)
reach(y) :- src(x), edge(x, y).
reach(y) :- reach(x), edge(x, y).
.output reach
"""

LEFT_TC = EDGE + """
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.output path
"""

NONLINEAR_TC = EDGE + """
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), path(y, z).
.output path
"""

# Paths of odd and even length: two relations of one task, each read by the other's rule.
MUTUAL = EDGE + """
.decl odd(x:number, y:number)
.decl even(x:number, y:number)
odd(x, y) :- edge(x, y).
even(x, z) :- odd(x, y), edge(y, z).
odd(x, z) :- even(x, y), edge(y, z).
.output odd
.output even
"""

# Above the distributed task: a negation and aggregates (each a task of its own); symbols and
# the program's own facts inside the recursive relation.
ABOVE = """
.decl link(a:symbol, b:symbol)
.input link
.decl node(a:symbol)
node(a) :- link(a, _).
node(b) :- link(_, b).
.decl path(a:symbol, b:symbol)
path("s", "t").
path(a, b) :- link(a, b).
path(a, c) :- path(a, b), link(b, c).
.decl unreached(a:symbol)
unreached(b) :- node(b), !path("n0", b).
.decl fanout(a:symbol, n:number)
fanout(a, n) :- node(a), n = count : { path(a, _) }.
.decl total(n:number)
total(n) :- n = count : { path(_, _) }.
.output path
.output unreached
.output fanout
.output total
"""


def _edges(seed: int, nodes: int, edges: int) -> set[tuple[int, int]]:
    rng = random.Random(seed)
    return {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)}


def _read(path) -> set[tuple]:
    def value(v: str):
        return int(v) if v.lstrip("-").isdigit() else v
    return {tuple(value(v) for v in line.split("\t"))
            for line in path.read_text().splitlines()}


def _run(spark, tmp_path, text: str, facts: dict, plan: str = "distributed"):
    """Return (the run's result, its outputs, the naive reference's relations)."""
    write_facts(tmp_path / "facts", facts)
    pt = build_tasks(parse_program(text, "p.dl"))
    expected = naive_evaluate(pt, tmp_path / "facts")
    result = run_program(spark, pt, tmp_path / "facts", tmp_path / "out", plan=plan,
                         driver_rows=None)
    got = {name: _read(tmp_path / "out" / f"{name}.csv") for name in pt.program.outputs}
    return result, got, expected


def _plans(result) -> dict[str, str]:
    return {s.task: s.plan for s in result.task_stats if s is not None}


@pytest.mark.parametrize("text, seed", [(REACH, 1), (LEFT_TC, 2), (NONLINEAR_TC, 3),
                                        (MUTUAL, 4)])
def test_recursion_equals_the_reference(spark, tmp_path, text, seed):
    edges = _edges(seed, 40, 70) | {(0, 1), (1, 2), (2, 0)}  # a cycle, whatever the draw
    result, got, expected = _run(spark, tmp_path, text, {"edge": edges, "src": {(0,)}})
    recursive = [t.name for t in build_tasks(parse_program(text, "p.dl")).tasks if t.recursive]
    assert recursive and all(_plans(result)[t] == "distributed" for t in recursive)
    for name, rows in got.items():
        assert rows == expected[name], name
        assert rows  # each case derives something


def test_negation_and_aggregates_above_a_distributed_task(spark, tmp_path):
    links = {(f"n{a}", f"n{b}") for a, b in _edges(5, 25, 40)} | {("n0", "n1")}
    result, got, expected = _run(spark, tmp_path, ABOVE, {"link": links})
    assert _plans(result)["path"] == "distributed"
    assert ("s", "t") in got["path"]
    assert got["unreached"]  # n0 does not reach every node in this draw
    for name, rows in got.items():
        assert rows == expected[name], name


def test_auto_on_a_cluster_reads_one_workers_rows_once_a_run(spark, tmp_path, monkeypatch):
    from levelflow.engine import session
    from levelflow.engine.plans import planner

    calls = []

    def worker_rows(conf):
        calls.append(conf)
        return 10  # fewer than path's inputs: auto distributes it

    monkeypatch.setattr(session, "on_local_master", lambda spark: False)
    monkeypatch.setattr(planner, "worker_rows", worker_rows)
    text = LEFT_TC + ".decl loop(x:number)\nloop(x) :- path(x, x).\n.output loop\n"
    result, got, expected = _run(spark, tmp_path, text, {"edge": _edges(7, 20, 40)}, plan="auto")
    plans = _plans(result)
    assert plans["path"] == "distributed" and len(plans) == 3  # edge, path, loop
    assert len(calls) == 1  # the conf read once a run, not once a task
    for name, rows in got.items():
        assert rows == expected[name], name


def test_empty_inputs(spark, tmp_path):
    # The task runs on its own fact alone: every partition but one starts with nothing.
    text = NONLINEAR_TC.replace(".output", "path(7, 7).\n.output")
    result, got, expected = _run(spark, tmp_path, text, {"edge": set()})
    assert _plans(result)["path"] == "distributed"
    assert got["path"] == expected["path"] == {(7, 7)}


def test_one_partition_and_two_give_the_reference(spark, tmp_path):
    from levelflow.engine.plans import evaluate_planned
    from levelflow.engine.plans.planner import Plan
    from levelflow.engine.types import relation_schema

    edges = _edges(6, 30, 60)
    write_facts(tmp_path / "facts", {"edge": edges})
    pt = build_tasks(parse_program(NONLINEAR_TC, "p.dl"))
    expected = naive_evaluate(pt, tmp_path / "facts")["path"]
    frame = spark.createDataFrame(sorted(edges), relation_schema(pt.program.decls["edge"]))
    for parts in (1, 2):
        out = evaluate_planned(spark, pt.program, pt.task_of("path"), {"edge": frame},
                               plan=Plan("distributed", "forced"), parts=parts)
        assert {tuple(r) for r in out["path"].collect()} == expected, parts


def test_an_unstored_result_runs_its_barrier_job_again_when_read(spark, tmp_path):
    """store=False: the counts' job, then each read (a query of its own) another barrier job
    of the same frame, its addresses swapped anew at the driver's rendezvous (a stage each)."""
    from levelflow.engine.plans import evaluate_planned
    from levelflow.engine.plans.planner import Plan
    from levelflow.engine.types import relation_schema

    edges = _edges(7, 30, 60)
    write_facts(tmp_path / "facts", {"edge": edges})
    pt = build_tasks(parse_program(NONLINEAR_TC, "p.dl"))
    expected = naive_evaluate(pt, tmp_path / "facts")["path"]
    frame = spark.createDataFrame(sorted(edges), relation_schema(pt.program.decls["edge"]))
    out = evaluate_planned(spark, pt.program, pt.task_of("path"), {"edge": frame},
                           plan=Plan("distributed", "forced"), parts=2, store=False)
    assert out.stats.rows["path"] == out["path"].count() == len(expected)
    assert {tuple(r) for r in out["path"].collect()} == expected


def test_the_recursive_task_is_one_job_whatever_its_rounds(spark, tmp_path):
    jobs = {}
    for n in (4, 40):  # a chain: n rounds of the left-linear closure
        chain = {(i, i + 1) for i in range(n)}
        result, got, expected = _run(spark, tmp_path / str(n), LEFT_TC, {"edge": chain})
        assert got["path"] == expected["path"]
        path = build_tasks(parse_program(LEFT_TC, "p.dl")).task_of("path").id
        assert result.task_stats[path].iterations >= n - 1
        jobs[n] = result.trace.extra[path]["spark_jobs"]
    # The input's shuffle, the barrier stage, the result's cut: whatever the rounds.
    assert jobs[4] == jobs[40] <= 3, jobs


def test_a_forced_distributed_plan_that_does_not_apply_is_one_line(spark, tmp_path):
    text = """
.decl pair(x:number, y:number)
pair(1, 2).
pair(x, y) :- pair(x, _), pair(_, y).
.output pair
"""
    pt = build_tasks(parse_program(text, "p.dl"))
    with pytest.raises(PlanError, match=r"^task pair: the distributed plan does not apply "
                                        r"\(the rule at line 4 joins its own relations on no "
                                        r"one variable\)$"):
        run_program(spark, pt, tmp_path, tmp_path / "out", plan="distributed")
    assert not (tmp_path / "out").exists()


def test_auto_spreads_only_past_one_workers_rows_on_a_cluster():
    pt = build_tasks(parse_program(NONLINEAR_TC, "p.dl"))
    task, decls = pt.task_of("path"), pt.program.decls
    # On a local master (no spread rows) auto keeps its choices; on a cluster past one
    # worker's rows (or --local-rows) a task the routing serves is distributed.
    assert choose_plan(task, decls, 10**9).kind == "global"
    assert choose_plan(task, decls, 10**9, spread_rows=10**6).kind == "distributed"
    assert choose_plan(task, decls, 10**5, spread_rows=10**6).kind == "local"
    assert choose_plan(task, decls, 3 * 10**5, threshold=10**6,
                       spread_rows=2 * 10**5).kind == "distributed"
    # 1 GiB of executor memory over 2 cores at the evaluator's bytes a row; the Python memory
    # if set.
    assert worker_rows({"spark.executor.memory": "1g", "spark.executor.cores": "2"}) == \
        (1 << 30) // 2 // BYTES_PER_ROW
    assert worker_rows({"spark.executor.pyspark.memory": "512m"}) == (512 << 20) // BYTES_PER_ROW


def _peers(tokens: list[str], timeout: float, act=None) -> list:
    """Connect len(tokens) exchanges in threads, task i presenting tokens[i] but expecting
    tokens[0]; `act(i, exchange)` runs on each; return per task its result or exception."""
    servers = [socket.create_server(("127.0.0.1", 0)) for _ in tokens]
    where = {i: ("127.0.0.1", s.getsockname()[1]) for i, s in enumerate(servers)}
    out: list = [None] * len(tokens)

    def task(i: int) -> None:
        try:
            net = Exchange.connect(i, where, servers[i], tokens[0], timeout) if i == 0 else \
                Exchange.connect(i, where, servers[i], tokens[i], timeout)
            out[i] = act(i, net) if act else net
        except Exception as e:  # noqa: BLE001 - the test reads it
            out[i] = e

    threads = [threading.Thread(target=task, args=(i,)) for i in range(len(tokens))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)  # nobody hangs
    for s in servers:
        s.close()
    return out


def test_an_exchange_refuses_another_jobs_token():
    out = _peers(["a" * 32, "b" * 32], timeout=5)
    assert isinstance(out[0], ExchangeError)
    assert "presented another job's token" in str(out[0])


def test_an_exchange_fails_on_a_silent_or_dead_peer():
    import polars as pl

    def act(i, net):
        if i == 1:  # dies before its first message
            net.close()
            return None
        return net.swap({1: {0: [pl.DataFrame({"c0": [1, 2]})]}}, (2, 2))

    token = "t" * 32
    out = _peers([token, token], timeout=2, act=act)
    assert isinstance(out[0], ExchangeError)
    assert "task 1" in str(out[0])

    def silent(i, net):
        if i == 1:  # alive but never speaks: the other gives up after the timeout
            threading.Event().wait(4)
            net.close()
            return None
        return net.swap({}, (0, 0))

    out = _peers([token, token], timeout=1, act=silent)
    assert isinstance(out[0], ExchangeError)
    assert "task 1 sent nothing for 1 s" in str(out[0])

