"""A session that opens a state loads its tasks' states onto the executors (backends/warm.py):
its first epoch is one job like the next ones, and every epoch equals the naive reference."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from levelflow.engine.incremental import IncrementalSession

sys.path.insert(0, str(Path(__file__).parent))
from test_arranged import _check, _commit, _epochs, _tc_session  # noqa: E402


class Phases:
    """A progress sink that records the phases it is told."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def phase(self, text: str) -> None:
        self.said.append(text)


def _cyclic_edges(rng: random.Random) -> set:
    """Return two rings with chords joined by one cross edge (deletions inside cycles)."""
    edges = {(i, (i + 1) % 12) for i in range(12)} | {(12 + i, 12 + (i + 1) % 12)
                                                       for i in range(12)}
    edges |= {(rng.randrange(12), rng.randrange(12)) for _ in range(6)}
    return edges | {(3, 15)}


def test_open_loads_the_state_and_the_first_epoch_is_one_job(spark, tmp_path):
    rng = random.Random(5)
    edges = _cyclic_edges(rng)
    state = tmp_path / "state"
    session, pt = _tc_session(spark, tmp_path, edges, statedir=state)
    session.close()
    phases = Phases()
    session = IncrementalSession.open(spark, state, mode="incremental", progress=phases,
                                      driver_rows=None)  # on the executors
    assert "path" in session.snap.arranged
    assert any("loading the state of task path" in p for p in phases.said)
    ring_edges = sorted(e for e in edges if e[0] < 12 and e[1] < 12)
    for k, (gone, fresh) in enumerate([((), [(5, 20)]), (ring_edges[:2], []),
                                       ([(3, 15)], [(0, 23), (7, 7)])], 1):
        edges = (edges - set(gone)) | set(fresh)
        result = _commit(session, gone, fresh)
        _check(session, pt, edges, tmp_path / f"ref{k}")
        assert result.strategies["path"] == "dred"
        assert result.spark_jobs["path"] == 1  # the state was there: no miss, no shipping
    session.close()


def test_open_without_warming_ships_the_state_in_the_first_epoch(spark, tmp_path):
    rng = random.Random(6)
    edges = _cyclic_edges(rng)
    state = tmp_path / "state"
    session, pt = _tc_session(spark, tmp_path, edges, statedir=state)
    session.close()
    session = IncrementalSession.open(spark, state, mode="incremental", warm=False,
                                      driver_rows=None)
    assert session.snap.arranged == {}
    for k, (gone, fresh, now) in enumerate(_epochs(rng, edges, 24, 3), 1):
        edges = now
        _commit(session, gone, fresh)
        _check(session, pt, edges, tmp_path / f"ref{k}")
        assert "path" in session.snap.arranged
    session.close()


def test_sql_and_rdd_jobs_share_one_python_worker_pool(spark):
    """A from-scratch run's Python workers (mapInArrow) and an arranged epoch's (an RDD job)
    come from one daemon: else the first epoch after a bootstrap started a second pool."""
    import os

    import pyarrow as pa

    def daemon_of_batches(batches):
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"d": [os.getppid()]})

    sql = {r.d for r in spark.range(2, numPartitions=2)
           .mapInArrow(daemon_of_batches, "d long").collect()}
    rdd = set(spark.sparkContext.parallelize(range(2), 2)
              .mapPartitions(lambda _: [os.getppid()]).collect())
    assert sql == rdd and len(sql) == 1
