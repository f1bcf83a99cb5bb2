"""Fact files reach Python workers as Arrow IPC pieces, not as Spark rows (in_spark.py).

A fact file is read and checked in the driver; its frame is built in Spark only where a plan
reads it there, and a task run in Python workers (local, partitioned, distributed plans) gets
the driver's table in `_blob` rows that worker.source_frames decodes. Results must equal the
naive reference's, the frame must stay unbuilt, and the pieces must round-trip exactly.
"""

from __future__ import annotations

import random

import polars as pl
import pyarrow as pa
import pytest
from naive_datalog import evaluate as naive_evaluate
from test_incremental_properties import write_facts

from levelflow.engine.incremental.backends import driver_rows
from levelflow.engine.plans import in_spark
from levelflow.engine.plans.worker import source_frames
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, parse_program

CLOSURE = """
.decl edge(x:number, y:number)
.input edge
.decl name(x:number, s:symbol)
.input name
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl named(s:symbol, t:symbol)
named(s, t) :- path(x, y), name(x, s), name(y, t), x < 5.
.output path
.output named
"""


@pytest.fixture
def made(monkeypatch) -> list:
    """Return the list of every fact file's frame made (shipped_later) while the test runs."""
    frames = []
    shipped_later = driver_rows.shipped_later

    def spied(table, ship):
        frames.append(shipped_later(table, ship))
        return frames[-1]

    monkeypatch.setattr(driver_rows, "shipped_later", spied)
    return frames


def test_pieces_round_trip_to_the_sources_rows(monkeypatch):
    monkeypatch.setattr(in_spark, "BLOB_MIN_ROWS", 100)
    table = pa.table({"c0": pa.array(range(1000), pa.int64()),
                      "c1": pa.array([f"v{i % 7}" for i in range(1000)])})
    pieces = in_spark.blob_pieces(1, table, parallelism=2)
    assert len(pieces) == 8  # 4 a core, each of at least BLOB_MIN_ROWS
    # What a worker gets: the marker row, another source's rows, and the pieces, in any order.
    rows = pl.DataFrame({"_src": [-1, 0, 0], "s0_c0": [None, 5, 6]},
                        schema={"_src": pl.Int32, "s0_c0": pl.Int64})
    blobs = pl.DataFrame({"_src": [s for s, _ in pieces], "_blob": [b for _, b in pieces]},
                         schema={"_src": pl.Int32, "_blob": pl.Binary})
    part = pl.concat([rows, blobs.sample(fraction=1.0, shuffle=True, seed=3)],
                     how="diagonal")
    lower, named = source_frames(part, [{"c0": pl.Int64}, {"c0": pl.Int64, "c1": pl.String}])
    assert sorted(lower["c0"].to_list()) == [5, 6]
    assert named.sort("c0").equals(pl.from_arrow(table))


def test_piece_sizes_follow_rows_bytes_and_cores(monkeypatch):
    table = pa.table({"c0": pa.array(range(10_000), pa.int64())})
    monkeypatch.setattr(in_spark, "BLOB_MIN_ROWS", 1000)
    assert len(in_spark.blob_pieces(0, table, parallelism=2)) == 8
    assert len(in_spark.blob_pieces(0, table.slice(0, 1500), parallelism=2)) == 1
    monkeypatch.setattr(in_spark, "BLOB_ROWS", 500)
    assert len(in_spark.blob_pieces(0, table, parallelism=2)) == 20
    monkeypatch.setattr(in_spark, "BLOB_BYTES", 8 * 250)
    assert len(in_spark.blob_pieces(0, table, parallelism=2)) == 40
    empty = in_spark.blob_pieces(0, table.slice(0, 0), parallelism=2)
    assert len(empty) == 1 and pa.ipc.open_stream(empty[0][1]).read_all().num_rows == 0


@pytest.mark.parametrize("plan", ["local", "partitioned", "distributed"])
def test_fact_files_reach_the_workers_unbuilt(spark, tmp_path, monkeypatch, made, plan):
    monkeypatch.setattr(in_spark, "BLOB_ROWS", 40)  # several pieces a file
    monkeypatch.setattr(in_spark, "BLOB_MIN_ROWS", 10)
    rng = random.Random(7)
    edges = {(rng.randrange(60), rng.randrange(60)) for _ in range(150)} | {(0, 1), (1, 0)}
    names = {(i, f"n{i % 9}") for i in range(60)}
    write_facts(tmp_path / "facts", {"edge": edges, "name": names})
    pt = build_tasks(parse_program(CLOSURE, "p.dl"))
    result = run_program(spark, pt, tmp_path / "facts", tmp_path / "out", plan=plan,
                         driver_rows=None)
    expected = naive_evaluate(pt, tmp_path / "facts")
    for name in ("path", "named"):
        got = {tuple(int(v) if v.isdigit() else v for v in line.split("\t"))
               for line in (tmp_path / "out" / f"{name}.csv").read_text().splitlines()}
        assert got == expected[name] and got, name
    assert {s.task: s.plan for s in result.task_stats if s is not None}["path"] == plan
    edge_frames = [f for f in made if driver_rows.driver_table(f).num_rows == len(edges)]
    assert edge_frames and all(f._df is None for f in edge_frames)  # never built in Spark


def test_each_piece_travels_in_a_task_of_its_own(spark, monkeypatch):
    # A task carrying every piece would be refused on a cluster past spark.rpc.message.maxSize.
    monkeypatch.setattr(in_spark, "BLOB_MIN_ROWS", 100)
    table = pa.table({"c0": pa.array(range(2000), pa.int64())})
    pieces = in_spark.blob_pieces(0, table, parallelism=2)
    frame = in_spark.blob_frame(spark, pieces)
    parts = frame.rdd.glom().map(lambda rows: [(r["_src"], bytes(r["_blob"])) for r in rows])
    assert len(pieces) == 8 and sorted(parts.collect()) == sorted([p] for p in pieces)


def test_a_fact_file_written_back_out_is_never_built(spark, tmp_path, made):
    # Its output is written from the driver's table (driver_rows.held_table), as a driver
    # task's relation is: fetching it from Spark would build and cut the frame first.
    names = {(i, f"n{(i * 7) % 13}") for i in range(200)}
    write_facts(tmp_path / "facts", {"name": names})
    text = ".decl name(x:number, s:symbol)\n.input name\n.output name\n"
    run_program(spark, build_tasks(parse_program(text, "p.dl")), tmp_path / "facts",
                tmp_path / "out", plan="global", driver_rows=None)
    lines = (tmp_path / "out" / "name.csv").read_text().splitlines()
    assert lines == [f"{i}\t{s}" for i, s in sorted(names)]
    assert len(made) == 1 and made[0]._df is None
