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


def test_a_refused_first_epoch_leaves_the_path_as_it_was(cli, tmp_path, no_spark):
    """`run --state` refused in its epoch 0 (here --max-tuples: path derives 3 tuples from 2
    edges) leaves no half-made state: a directory it made is gone, parents too; one that was
    there keeps what it held; its locks are let go, and the next `run --state` makes it."""
    prog, facts = tmp_path / "tc.dl", tmp_path / "facts"
    prog.write_text(TC)
    facts.mkdir()
    (facts / "edge.facts").write_text("1\t2\n2\t3\n")
    new = tmp_path / "a" / "b" / "state"
    code, out, err = cli(["run", prog, "-F", facts, "-D", tmp_path / "o", "-q",
                          "--state", new, "--max-tuples", "2"])
    assert (code, out) == (1, "") and len(err.splitlines()) == 1 and "--max-tuples 2" in err
    assert not (tmp_path / "a").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine\n")
    (kept / "READERS").touch()  # as an earlier refused run left it
    code, _, err = cli(["run", prog, "-F", facts, "-D", tmp_path / "o", "-q",
                        "--state", kept, "--max-tuples", "2"])
    assert code == 1 and "--max-tuples 2" in err
    assert sorted(p.name for p in kept.iterdir()) == ["READERS", "notes.txt"]
    for argv in (["update", kept, "--insert", facts / "edge.facts"], ["state", "check", kept]):
        code, out, err = cli(argv)
        assert (code, out, err) == (1, "", f"{kept}: error: not a levelflow state directory "
                                           f"(no valid CURRENT file)\n")
    code, _, err = cli(["run", prog, "-F", facts, "-D", tmp_path / "o", "-q", "--state", kept])
    assert code == 0, err
    (tmp_path / "d.diff").write_text("+edge(3, 1)\n")
    code, _, err = cli(["update", kept, "--insert", tmp_path / "d.diff", "-D", tmp_path / "o1"])
    assert code == 0, err
    want = {(a, b) for a in (1, 2, 3) for b in (1, 2, 3)}  # 1 -> 2 -> 3 -> 1: all pairs
    assert {tuple(map(int, line.split("\t"))) for line in
            (tmp_path / "o1" / "path.csv").read_text().splitlines()} == want
    assert (kept / "notes.txt").read_text() == "mine\n"


def test_a_refused_bootstrap_lets_its_readers_lock_go(tmp_path):
    """A bootstrap refused in its epoch (the caller's StateDir still alive) holds no lock: a
    later commit's garbage collection (READERS exclusive) is not kept waiting by it."""
    import fcntl
    import os

    from levelflow.engine.guard import TupleLimit
    from levelflow.engine.session import DeferredSession

    def no_spark():
        raise AssertionError("Spark was asked for")

    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "edge.facts").write_text("1\t2\n2\t3\n")
    state = StateDir(tmp_path / "state")
    state.path.mkdir()
    (state.path / "READERS").touch()  # there before: it stays
    with pytest.raises(TupleLimit):
        IncrementalSession.bootstrap(DeferredSession(no_spark), parse_tc(), facts, state,
                                     max_tuples=2)
    assert sorted(p.name for p in state.path.iterdir()) == ["READERS"]
    fd = os.open(state.path / "READERS", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while still held
    finally:
        os.close(fd)


def test_a_lock_file_removed_before_it_was_locked_is_opened_again(tmp_path, monkeypatch):
    """A writer that opened LOCK just before a failed first epoch removed it locks the file
    the name holds, not the removed one: a third writer is refused."""
    import os

    state = StateDir(tmp_path / "state")
    opened = StateDir._lock_file

    def removed_once(self, name):
        fd = opened(self, name)
        if not removed:
            removed.append(name)
            os.unlink(self.path / name)  # as the failed first epoch does, after our open
        return fd

    removed: list[str] = []
    monkeypatch.setattr(StateDir, "_lock_file", removed_once)
    with state.lock():
        assert removed == ["LOCK"]
        with pytest.raises(StateError, match="locked by another writer"):
            with StateDir(state.path).lock():
                pass


def parse_tc():
    return build_tasks(parse_program(TC, "tc.dl"))
