"""A large change to an arranged task (strategies/in_place.py) and to a stored relation
(segments.rewrite_whole): recomputed where the state lives in the epoch's one job, equal to
the naive reference."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from test_arranged import TC, _check, _commit, _tc_session, write_facts  # noqa: E402


def test_a_large_deletion_recomputes_where_the_state_lives(spark, tmp_path, monkeypatch):
    from levelflow.engine.incremental.strategies import dred_polars as local_dred

    monkeypatch.setattr(local_dred, "RECOMPUTE_ROWS", 0)  # no share is small enough by itself
    rng = random.Random(4)
    edges = {(i, (i + 1) % 15) for i in range(15)} | {(rng.randrange(30), rng.randrange(30))
                                                      for _ in range(30)}
    session, pt = _tc_session(spark, tmp_path, edges)
    session.mode = "elastic"
    # The large-change rule, not the timer: on a loaded machine the recompute's own job can
    # pass the switch's budget, and a switch recomputes on the Spark side instead.
    session.switch_floor = 3600.0
    gone = set(rng.sample(sorted(edges), len(edges) // 3))  # a third of the edges out
    fresh = {(rng.randrange(30), rng.randrange(30)) for _ in range(5)} - edges
    result = _commit(session, gone, fresh)
    edges = (edges - gone) | fresh
    _check(session, pt, edges, tmp_path / "ref1")
    assert result.strategies["path"] == "bootstrap"  # recomputed at once ...
    assert result.spark_jobs["path"] == 1  # ... in the epoch's one job, not on Spark's side
    assert "path" in result.arranged
    gone = {e for e in edges if e[0] < 15}  # and again, then an epoch on what it left
    result = _commit(session, gone, [])
    edges -= gone
    _check(session, pt, edges, tmp_path / "ref2")
    assert result.strategies["path"] == "bootstrap" and result.spark_jobs["path"] == 1
    _commit(session, [], [(0, 1), (1, 20)])  # the state it left serves the next epoch
    _check(session, pt, edges | {(0, 1), (1, 20)}, tmp_path / "ref3")
    session.close()


def test_large_insertions_recompute_on_the_spark_side(spark, tmp_path):
    edges = {(i, i + 1) for i in range(20)}
    session, pt = _tc_session(spark, tmp_path, edges)
    session.mode = "elastic"
    fresh = {(i, i + 2) for i in range(10)}  # half as many edges again, none removed
    result = _commit(session, [], fresh)
    _check(session, pt, edges | fresh, tmp_path / "ref")
    assert result.strategies["path"] == "bootstrap" and "path" not in result.arranged \
        or result.spark_jobs["path"] > 1
    session.close()


def test_a_change_past_the_chain_policy_is_written_as_a_new_base(spark, tmp_path, monkeypatch):
    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.incremental.state import segments

    monkeypatch.setattr(segments, "SEGMENT_FLOOR_ROWS", 0)  # the policy on a small graph
    edges = {(i, (i + 1) % 12) for i in range(12)} | {(20 + i, 21 + i) for i in range(11)}
    (tmp_path / "tc.dl").write_text(TC)
    write_facts(tmp_path / "f0", {"edge": edges})
    IncrementalSession.bootstrap(spark, tmp_path / "tc.dl", tmp_path / "f0",
                                 statedir=tmp_path / "state", driver_rows=None).close()
    session = IncrementalSession.open(spark, tmp_path / "state", mode="incremental",
                                      driver_rows=None)

    def path_entry():
        return session.statedir.manifest()["relations"]["path"]

    _commit(session, [], [(31, 32)])  # 12 pairs more of 222: a segment on the chain
    assert len(path_entry()["segments"]) == 1
    result = _commit(session, [], [(11, 20)])  # 156 pairs more: past the policy
    entry = path_entry()
    assert entry["segments"] == [] and entry["epoch"] == result.epoch  # a new base ...
    assert session.compact() == []  # ... and nothing left to compact
    edges |= {(31, 32), (11, 20)}
    _check(session, pt := session.pt, edges, tmp_path / "ref1")
    session.close()
    session = IncrementalSession.open(spark, tmp_path / "state")  # read back from the files
    _check(session, pt, edges, tmp_path / "ref2")
    session.close()
