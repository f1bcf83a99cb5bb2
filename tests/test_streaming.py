"""levelflow.streaming: a file-source stream's micro-batches as epochs, each applied once.

A stream of three micro-batches (one JSON file each) of inserts and deletes is interrupted twice:
once just after an epoch committed (Spark replays that batch: it must be skipped), once just
before one (Spark replays it: it must be applied). After the restarts, the state must equal a
from-scratch run on the final facts, every batch applied exactly once, and the manifest must
name the last batch.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

import levelflow
from levelflow.engine.incremental.session import IncrementalSession
from levelflow.engine.incremental.state.directory import StateDir
from levelflow.engine.spark_io import InputError
from levelflow.streaming import batch_function, maintain

TC = Path(__file__).parent.parent / "examples" / "tc" / "program.dl"
SCHEMA = "x long, y long, op string"
# The stream's batches, the one whose epoch commits before a crash, the one a crash precedes.
BATCHES, AFTER, BEFORE = 3, 0, 2


class Crash(Exception):
    """Stands for the process dying at that point."""


def write_batches(folder: Path, initial: set, count: int, seed: int = 7) -> set:
    """Write `count` batch files of consistent inserts/deletes; return the final edges."""
    rng = random.Random(seed)
    edges = set(initial)
    folder.mkdir()
    for i in range(count):
        rows = []
        for _ in range(rng.randint(1, 4)):
            if edges and rng.random() < 0.4:
                x, y = rng.choice(sorted(edges))
                edges.discard((x, y))
                rows.append({"x": x, "y": y, "op": rng.choice(["-1", "delete", "-"])})
            else:
                x, y = rng.randint(0, 9), rng.randint(0, 9)
                if (x, y) not in edges:
                    edges.add((x, y))
                    rows.append({"x": x, "y": y, "op": rng.choice(["1", "insert", "+"])})
        # A tuple inserted and deleted within the batch nets to nothing.
        rows += [{"x": 50, "y": 51, "op": "insert"}, {"x": 50, "y": 51, "op": "delete"}]
        path = folder / f"batch-{i:02d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the source's order
    return edges


def relations(session) -> dict:
    return {n: {tuple(r) for r in session.relation(n).collect()} for n in ("path", "cyclic")}


def scratch(spark, edges) -> dict:
    df = spark.createDataFrame(sorted(edges), "x long, y long")
    result = levelflow.run(TC, spark=spark, inputs={"edge": df})
    return {n: {tuple(r) for r in result.relation(n).collect()} for n in ("path", "cyclic")}


def test_batches_interrupted_twice_are_each_applied_once(spark, tmp_path):
    initial = {(1, 2), (2, 3), (3, 4)}
    final = write_batches(tmp_path / "in", initial, BATCHES)
    state, chk = tmp_path / "state", str(tmp_path / "chk")
    edges = spark.createDataFrame(sorted(initial), "x long, y long")
    session = IncrementalSession.bootstrap(spark, TC, statedir=state, inputs={"edge": edges})
    stream = (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
              .json(str(tmp_path / "in")))
    applied = []

    def crash_after(batch_id, result):  # the epoch of batch AFTER is committed, Spark's is not
        applied.append(batch_id)
        if batch_id == AFTER:
            raise Crash(f"after the commit of batch {AFTER}")

    query = maintain(stream, session, checkpoint=chk, trigger={"availableNow": True},
                     on_epoch=crash_after)
    with pytest.raises(Exception, match=f"after the commit of batch {AFTER}"):
        query.awaitTermination()
    assert session.epoch == AFTER + 1
    assert StateDir(state).manifest()["streams"] == {"default": AFTER}
    session.close()

    # Restart: a new session on the state, the documented foreachBatch form, a crash before
    # batch BEFORE is applied.
    session = IncrementalSession.open(spark, state)
    apply = batch_function(session, on_epoch=lambda b, _: applied.append(b))

    seen = []

    def crash_before(df, batch_id):
        seen.append(batch_id)
        if batch_id == BEFORE:
            raise Crash(f"before batch {BEFORE}")
        apply(df, batch_id)

    query = (stream.writeStream.foreachBatch(crash_before).option("checkpointLocation", chk)
             .trigger(availableNow=True).start())
    with pytest.raises(Exception, match=f"before batch {BEFORE}"):
        query.awaitTermination()
    assert seen[0] == AFTER and applied.count(AFTER) == 1  # Spark replayed batch AFTER: skipped
    session.close()

    session = IncrementalSession.open(spark, state)
    apply = batch_function(session, on_epoch=lambda b, _: applied.append(b))
    query = (stream.writeStream.foreachBatch(lambda df, b: (seen.append(b), apply(df, b)))
             .option("checkpointLocation", chk).trigger(availableNow=True).start())
    query.awaitTermination()
    resumed = list(range(AFTER, BEFORE + 1))
    assert seen[:len(resumed)] == resumed and seen[len(resumed)] == BEFORE  # BEFORE replayed
    assert applied == list(range(BATCHES))  # AFTER's replay skipped, BEFORE's applied
    assert session.epoch == BATCHES
    assert StateDir(state).manifest()["streams"] == {"default": BATCHES - 1}
    assert {tuple(r) for r in session.relation("edge").collect()} == final
    assert relations(session) == scratch(spark, final)
    session.close()


def test_a_bad_batch_stops_with_one_line_and_applies_nothing(spark, tmp_path):
    edges = spark.createDataFrame([(1, 2)], "x long, y long")
    session = IncrementalSession.bootstrap(spark, TC, statedir=tmp_path / "s",
                                           inputs={"edge": edges})
    apply = batch_function(session)
    bad = spark.createDataFrame([(2, 3, "1"), (3, 4, "upsert")], SCHEMA)
    with pytest.raises(InputError, match=r"relation edge \(stream\): error: op 'upsert' in "
                                         r"column 'op' is not an insert or delete marker"):
        apply(bad, 0)
    no_op = spark.createDataFrame([(2, 3)], "x long, y long")
    with pytest.raises(InputError, match=r"error: no op column 'op'"):
        apply(no_op, 0)
    assert session.epoch == 0 and session.streams == {} and not session.pending
    assert relations(session)["path"] == {(1, 2)}
    session.close()
