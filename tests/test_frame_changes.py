"""DataFrames into an incremental session: bootstrap inputs and `session.apply` epochs.

Each state is checked against a from-scratch run on the facts it should hold, and a bad
DataFrame must leave the state at its epoch with nothing queued.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import levelflow
from levelflow.engine.incremental.session import IncrementalSession
from levelflow.engine.spark_io import InputError

TC = Path(__file__).parent.parent / "examples" / "tc" / "program.dl"
EDGES = [(1, 2), (2, 3), (3, 1), (4, 5)]


def scratch(spark, edges) -> dict:
    df = spark.createDataFrame(edges or [], "x long, y long")
    result = levelflow.run(TC, spark=spark, inputs={"edge": df})
    return {n: {tuple(r) for r in result.relation(n).collect()} for n in ("path", "cyclic")}


def bootstrap(spark, tmp_path):
    edges = spark.createDataFrame(EDGES, "x long, y long")
    return IncrementalSession.bootstrap(spark, TC, statedir=tmp_path / "state",
                                        inputs={"edge": edges})


def state_of(session) -> dict:
    return {n: {tuple(r) for r in session.relation(n).collect()} for n in ("path", "cyclic")}


def test_bootstrap_keeps_a_snapshot_of_a_dataframe_over_files(spark, tmp_path):
    src = tmp_path / "edges"
    spark.createDataFrame(EDGES, "x long, y long").write.parquet(str(src))
    lazy = spark.read.parquet(str(src))  # a plan over files the user may change later
    session = IncrementalSession.bootstrap(spark, TC, statedir=tmp_path / "state",
                                           inputs={"edge": lazy})
    assert state_of(session) == scratch(spark, EDGES)
    assert session.relation("path").columns == ["x", "y"]
    spark.createDataFrame([(7, 8)], "x long, y long").write.mode("overwrite").parquet(str(src))
    session.insert("edge", (5, 6))
    session.commit()  # builds on the facts read at bootstrap, not on the changed files
    assert state_of(session) == scratch(spark, EDGES + [(5, 6)])
    session.close()


def test_apply_removes_then_inserts_as_one_epoch(spark, tmp_path):
    session = bootstrap(spark, tmp_path)
    inserts = spark.createDataFrame([(5, 1), (3, 4)], "y int, x int")  # by name
    removes = spark.createDataFrame([(3, 1), (1, 5)], "a long, b long")  # by position
    result = session.apply(inserts={"edge": inserts}, removes={"edge": removes})
    assert session.epoch == 1 and result is session.last
    final = [(1, 2), (2, 3), (4, 5), (1, 5), (4, 3)]
    assert state_of(session) == scratch(spark, final)
    # One removal and one insertion of the same tuple: the insertion wins (removes go first).
    same = spark.createDataFrame([(1, 2)], "x long, y long")
    session.apply(inserts={"edge": same}, removes={"edge": same})
    assert state_of(session) == scratch(spark, final)
    session.close()


@pytest.mark.parametrize("inserts, message", [
    ({"edge": "x long"}, r"relation edge \(inserts DataFrame\): error: expects 2 columns"),
    ({"edge": "x long, y string"}, r"column 'y' is string, edge.y is number"),
    ({"path": "x long, y long"}, r"inserts: error: 'path' is not an input relation"),
])
def test_a_bad_apply_applies_nothing(spark, tmp_path, inserts, message):
    session = bootstrap(spark, tmp_path)
    before = state_of(session)
    frames = {name: spark.createDataFrame([], schema) for name, schema in inserts.items()}
    good = spark.createDataFrame([(9, 9)], "x long, y long")
    with pytest.raises(InputError, match=message) as e:
        session.apply(inserts=frames, removes={"edge": good})
    assert "\n" not in str(e.value)
    assert session.epoch == 0 and not session.pending
    assert state_of(session) == before
    nulls = spark.createDataFrame([(1, None)], "x long, y long")
    with pytest.raises(InputError, match=r"a row holds null in edge.y \(column 2\)"):
        session.apply(inserts={"edge": nulls})
    assert session.epoch == 0 and not session.pending
    session.close()
