"""On a local master auto runs a task in the driver while its inputs fit the memory available.

The executors' Python workers of a local master run on the driver's machine: shipping a large
input to one of them is pure cost, so the driver plan's threshold there is the memory's rows
(engine/memory.py), past the tiny DRIVER_ROWS a cluster master keeps. The answers are checked
against a breadth-first search written here; that no Spark job ran is read from the session.
"""

from __future__ import annotations

import random
from collections import deque

import pytest

from levelflow.engine import memory
from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.memory import BYTES_PER_ROW, DRIVER_ROWS, memory_rows
from levelflow.engine.plans.driver import rows_on
from levelflow.engine.runner import run_program
from levelflow.engine.session import DeferredSession, jobs_started
from levelflow.tasks import build_tasks, parse_program

REACH = """
.decl edge(x:number, y:number)
.input edge
.decl reach(y:number)
.output reach
reach(y) :- edge(0, y).
reach(y) :- reach(x), edge(x, y).
"""
NODES, EDGES = 20_000, 60_000  # past DRIVER_ROWS and the state's HELD_ROWS


@pytest.fixture
def gigabyte(monkeypatch):
    """A machine with 1 GiB available: the driver holds 1M input rows."""
    monkeypatch.setattr(memory, "available_memory", lambda: 1 << 30)
    return (1 << 30) // 2 // BYTES_PER_ROW


def _graph(seed: int) -> set[tuple[int, int]]:
    rng = random.Random(seed)
    return {(rng.randrange(NODES), rng.randrange(NODES)) for _ in range(EDGES)}


def _reached(edges) -> set[tuple[int]]:
    """Return the nodes reachable from node 0 in one step or more (breadth-first)."""
    succ: dict[int, list[int]] = {}
    for x, y in edges:
        succ.setdefault(x, []).append(y)
    seen, todo = set(), deque(succ.get(0, []))
    while todo:
        y = todo.popleft()
        if y not in seen:
            seen.add(y)
            todo.extend(succ.get(y, []))
    return {(y,) for y in seen}


def _write(path, edges) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "edge.facts").write_text("".join(f"{x}\t{y}\n" for x, y in sorted(edges)))


def test_the_memory_rows_are_half_the_memory_available_at_bytes_per_row():
    assert memory_rows(1 << 30) == (1 << 30) // 2 // BYTES_PER_ROW
    assert memory_rows(1000) == DRIVER_ROWS  # never below the tiny threshold
    assert memory.available_memory() > 0


def test_the_threshold_follows_the_master_without_starting_it(gigabyte):
    def never():
        raise AssertionError("the session was started")

    local = DeferredSession(never, start=False, master="local[*]")
    cluster = DeferredSession(never, start=False, master="spark://head:7077")
    assert rows_on(local) == gigabyte and rows_on(cluster) == DRIVER_ROWS
    assert not local.in_use and not cluster.in_use


def test_a_large_input_runs_in_the_driver_with_no_spark_job(spark, tmp_path, gigabyte):
    edges = _graph(1)
    _write(tmp_path / "f", edges)
    before = jobs_started(spark)
    result = run_program(spark, build_tasks(parse_program(REACH, "reach.dl")), tmp_path / "f")
    assert jobs_started(spark) == before
    assert {s.plan for s in result.task_stats if s is not None} == {"driver"}
    assert {tuple(r) for r in result.relation("reach").collect()} == _reached(edges)
    # A cluster's threshold: the same input goes to Spark.
    result = run_program(spark, build_tasks(parse_program(REACH, "reach.dl")), tmp_path / "f",
                         driver_rows=DRIVER_ROWS)
    assert "driver" not in {s.plan for s in result.task_stats if s is not None}


def test_a_reopened_large_state_takes_its_epochs_in_the_driver(spark, tmp_path, gigabyte):
    edges = _graph(2)
    _write(tmp_path / "f", edges)
    (tmp_path / "reach.dl").write_text(REACH)
    before = jobs_started(spark)
    session = IncrementalSession.bootstrap(spark, tmp_path / "reach.dl", tmp_path / "f",
                                           tmp_path / "state")
    session.close()
    rng = random.Random(3)
    epoch = 0
    for _ in range(2):
        # A session just opened reads its stored relations in the driver; its second epoch
        # starts from the rows the first left there, not the files it wrote.
        session = IncrementalSession.open(spark, tmp_path / "state")
        for _ in range(2):
            gone = rng.sample(sorted(edges), 10)
            fresh = {(rng.randrange(NODES), rng.randrange(NODES)) for _ in range(10)} - edges
            for e in gone:
                session.remove("edge", e)
            for e in fresh:
                session.insert("edge", e)
            edges = (edges - set(gone)) | fresh
            epoch += 1
            assert session.commit().epoch == epoch
            assert {tuple(r) for r in session.relation("reach").collect()} == _reached(edges)
        session.close()
    assert jobs_started(spark) == before  # bootstrap, opens, epochs and reads: none on Spark


def test_parquet_and_dataframe_inputs_run_in_the_driver_each_tuple_once(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import levelflow

    rows = [(1, 2), (2, 3), (1, 2), (3, 1), (2, 3)]  # two tuples repeated
    pq.write_table(pa.table({"x": [r[0] for r in rows], "y": [r[1] for r in rows]}),
                   tmp_path / "edge.parquet")
    program = (".decl edge(x:number, y:number)\n"
               '.input edge(IO=parquet, filename="edge.parquet")\n'
               ".decl path(x:number, y:number)\n.output path\n"
               "path(x, y) :- edge(x, y).\npath(x, z) :- path(x, y), edge(y, z).\n")
    (tmp_path / "p.dl").write_text(program)
    closure = {(a, b) for a in (1, 2, 3) for b in (1, 2, 3)}  # one cycle through all three
    for inputs in (None, {"edge": spark.createDataFrame(rows, "x long, y long")}):
        result = levelflow.run(tmp_path / "p.dl", tmp_path, spark=spark, inputs=inputs)
        assert {s.plan for s in result.task_stats if s is not None} == {"driver"}
        assert result.relation("edge").count() == 3
        assert {tuple(r) for r in result.relation("path").collect()} == closure


def test_a_fact_files_lines_are_estimated_from_its_first_bytes(tmp_path):
    import gzip

    from levelflow.engine.memory import estimated_lines

    text = "".join(f"{100_000 + i}\t{200_000 + i}\n" for i in range(100_000))  # 14 B a line
    (tmp_path / "e.facts").write_text(text)
    assert abs(estimated_lines(tmp_path / "e.facts") - 100_000) <= 1_000
    (tmp_path / "short.facts").write_text("1\t2\n3\t4\n")
    assert estimated_lines(tmp_path / "short.facts") == 2
    (tmp_path / "e.gz").write_bytes(gzip.compress(text.encode()))  # unknown: 4 bytes a line
    assert estimated_lines(tmp_path / "e.gz") == (tmp_path / "e.gz").stat().st_size // 4
