"""The on-disk state: epochs are atomic, unchanged relations are not copied, one writer at a time.

A failure injected in a task, or a crash after the new epoch is written but before CURRENT is
switched, leaves the previous epoch current and intact, and the next update works.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from levelflow.engine.incremental import IncrementalSession, StateDir, StateError
from levelflow.engine.incremental import epoch as maintain
from levelflow.engine.incremental.results import EpochError
from levelflow.tasks import build_tasks, parse_program

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402

TC = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl cyclic(x:number)
cyclic(x) :- path(x, x).
.output path
.output cyclic
"""


def rows_of(df):
    return {tuple(r) for r in df.collect()}


def reference(pt, edges, tmp: Path):
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(edges)))
    return naive_datalog.evaluate(pt, tmp)


@pytest.fixture
def tc(spark, tmp_path):
    prog = tmp_path / "tc.dl"
    prog.write_text(TC)
    facts = tmp_path / "facts"
    facts.mkdir()
    edges = {(1, 2), (2, 3), (3, 1), (4, 5)}
    (facts / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(edges)))
    state = tmp_path / "state"
    session = IncrementalSession.bootstrap(spark, prog, facts, state, mode="incremental")
    return session, state, edges


def test_epoch_zero_is_written_and_reloads(spark, tc, tmp_path):
    session, state, edges = tc
    sd = StateDir(state)
    assert sd.current() == 0
    pt = build_tasks(parse_program(TC, "tc.dl"))
    again = IncrementalSession.open(spark, state)
    ref = reference(pt, edges, tmp_path / "ref")
    for name in ("edge", "path", "cyclic"):
        assert rows_of(again.relation(name)) == ref[name]
        assert again.size(name) == len(ref[name])


def test_unchanged_relations_are_not_copied(tc):
    session, state, _ = tc
    session.insert("edge", (5, 6))  # path changes; cyclic does not
    result = session.commit()
    assert "cyclic" not in result.deltas
    sd = StateDir(state)
    assert sd.current() == 1
    manifest = sd.manifest()
    assert manifest["relations"]["cyclic"]["epoch"] == 0
    # path changed: its base stays, the epoch's change is a segment on its chain
    assert manifest["relations"]["path"]["epoch"] == 0
    assert [s["epoch"] for s in manifest["relations"]["path"]["segments"]] == [1]
    assert (state / "epochs" / "1" / "seg" / "rel" / "path").exists()
    assert not (state / "epochs" / "1" / "rel" / "path").exists()
    assert not (state / "epochs" / "1" / "rel" / "cyclic").exists()
    assert (state / "epochs" / "0" / "rel" / "cyclic").exists()  # still referenced: kept


def test_failure_in_a_task_leaves_previous_epoch_current(spark, tc, tmp_path, monkeypatch):
    session, state, edges = tc
    before = {n: rows_of(session.relation(n)) for n in ("edge", "path", "cyclic")}

    def boom(*args, **kwargs):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(maintain, "dred_update", boom)
    monkeypatch.setattr(maintain, "arranged_update", boom)  # path's epochs run arranged
    session.remove("edge", (3, 1))
    with pytest.raises(EpochError, match="task path failed: injected failure"):
        session.commit()
    assert StateDir(state).current() == 0
    assert session.epoch == 0 and len(session.pending) == 1  # the ops stay queued
    reopened = IncrementalSession.open(spark, state)
    for name, rows in before.items():
        assert rows_of(session.relation(name)) == rows
        assert rows_of(reopened.relation(name)) == rows
    monkeypatch.undo()
    session.commit()  # the next update works
    assert StateDir(state).current() == 1
    ref = reference(session.pt, edges - {(3, 1)}, tmp_path / "ref")
    for name in ("edge", "path", "cyclic"):
        assert rows_of(session.relation(name)) == ref[name]


def test_crash_before_the_switch_keeps_old_epoch(spark, tc, tmp_path):
    session, state, edges = tc

    def crash():
        raise KeyboardInterrupt  # as if killed after writing the epoch, before CURRENT

    session.insert("edge", (5, 1))
    with pytest.raises(KeyboardInterrupt):
        session.commit(before_switch=crash)
    assert StateDir(state).current() == 0
    fresh = IncrementalSession.open(spark, state, mode="incremental")
    ref0 = reference(fresh.pt, edges, tmp_path / "ref0")
    assert rows_of(fresh.relation("path")) == ref0["path"]
    fresh.insert("edge", (5, 1))
    fresh.commit()
    assert StateDir(state).current() == 1
    ref1 = reference(fresh.pt, edges | {(5, 1)}, tmp_path / "ref1")
    assert rows_of(IncrementalSession.open(spark, state).relation("path")) == ref1["path"]


def test_second_writer_is_refused(tc):
    session, state, _ = tc
    session.insert("edge", (7, 8))
    with StateDir(state).lock():
        with pytest.raises(StateError, match="locked by another writer"):
            session.commit()
    assert StateDir(state).current() == 0


def test_stale_session_is_refused(spark, tc):
    session, state, _ = tc
    other = IncrementalSession.open(spark, state)
    other.insert("edge", (7, 8))
    other.commit()
    session.insert("edge", (8, 9))
    with pytest.raises(StateError, match="moved to epoch 1"):
        session.commit()


def test_missing_state_is_one_line(tmp_path):
    with pytest.raises(StateError) as e:
        StateDir(tmp_path / "nope").manifest()
    assert "\n" not in str(e.value) and "not a levelflow state directory" in str(e.value)


def test_open_reader_keeps_its_epoch_while_another_session_commits(spark, tc, tmp_path):
    session, state, edges = tc
    reader = IncrementalSession.open(spark, state)
    ref0 = reference(session.pt, edges, tmp_path / "ref0")
    session.remove("edge", (4, 5))  # rewrites edge's base facts and path: epoch 0's go stale
    session.commit()
    # The reader still sees epoch 0, whose files the commit left in place for it.
    for name in ("edge", "path"):
        assert rows_of(reader.relation(name)) == ref0[name]
    assert (state / "epochs" / "0" / "rel" / "path").is_dir()
    # Its own commit is refused in one line before it reads anything, its ops stay queued.
    reader.insert("edge", (7, 8))
    with pytest.raises(StateError, match="moved to epoch 1") as e:
        reader.commit()
    assert "\n" not in str(e.value) and len(reader.pending) == 1
    reader.close()
    assert sorted(session.compact(force=True)) == ["base/edge", "rel/edge", "rel/path"]
    session.insert("edge", (6, 7))
    session.commit()
    # With no other reader, the commit deleted what no kept manifest (epochs 2 and 1: the
    # last two) names any more: epoch 0's path and edge, but not its cyclic, which no epoch
    # since has rewritten.
    assert not (state / "epochs" / "0" / "rel" / "path").exists()
    assert not (state / "epochs" / "0" / "base" / "edge").exists()
    assert (state / "epochs" / "1" / "rel" / "path").is_dir()
    assert (state / "epochs" / "0" / "rel" / "cyclic").is_dir()
    ref2 = reference(session.pt, (edges - {(4, 5)}) | {(6, 7)}, tmp_path / "ref2")
    reopened = IncrementalSession.open(spark, state)
    for name in ("edge", "path", "cyclic"):
        assert rows_of(reopened.relation(name)) == ref2[name]
