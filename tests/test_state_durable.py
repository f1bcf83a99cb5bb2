"""What a state survives: the fsync order of a commit, an epoch newer than CURRENT, edited
manifests and CURRENT (their checksums), states written before those checksums, and epochs that
garbage collection emptied (collected, not damaged).

A real state of a transitive closure over `edge` plus an input `label` that never changes
(so epoch 0's directory keeps its base while the rest of it is collected).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from levelflow.engine.incremental import IncrementalSession, StateDir, StateError
from levelflow.engine.incremental.state import durable
from levelflow.engine.incremental.state.files import COMMITTED
from levelflow.engine.incremental.state.repair import check_state, restore_epoch

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402

PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl label(x:number, s:symbol)
.input label
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl named(s:symbol, t:symbol)
named(s, t) :- path(x, y), label(x, s), label(y, t).
.output path
.output named
"""
EDGES = {(i, i + 1) for i in range(12)}
LABELS = {(i, f"n{i}") for i in range(0, 14, 3)}


def write_facts(path: Path, edges, labels=LABELS) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(edges)))
    (path / "label.facts").write_text("".join(f"{a}\t{s}\n" for a, s in sorted(labels)))
    return path


def rows_of(df):
    return {tuple(r) for r in df.collect()}


def files_of(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


def reference(edges, tmp: Path) -> dict:
    from levelflow.tasks import build_tasks, parse_program

    return naive_datalog.evaluate(build_tasks(parse_program(PROGRAM, "p.dl")),
                                  write_facts(tmp, edges))


@pytest.fixture(scope="module")
def pristine(spark, tmp_path_factory):
    """Return a state at epoch 2: epoch 0 from scratch, epochs 1 and 2 segments on it."""
    tmp = tmp_path_factory.mktemp("durable")
    (tmp / "p.dl").write_text(PROGRAM)
    state = tmp / "state"
    s = IncrementalSession.bootstrap(spark, tmp / "p.dl", write_facts(tmp / "f", EDGES), state)
    for edge in ((20, 21), (12, 20)):
        s.insert("edge", edge)
        s.commit(compact=False)
    s.close()
    return state


@pytest.fixture
def copy(pristine, tmp_path):
    dest = tmp_path / "state"
    shutil.copytree(pristine, dest)
    return dest


EDGES2 = EDGES | {(20, 21), (12, 20)}


def roll_back(state: Path, epoch: int) -> None:
    """Make CURRENT name `epoch` as a crash before its rename reached the disk could."""
    digest = StateDir(state).manifest(epoch)[durable.SUM_KEY]
    (state / "CURRENT").write_text(durable.current_text(epoch, digest))


# -- 33.4: fsync order, and never over an epoch newer than CURRENT -----------------------------

def test_a_commit_flushes_every_file_before_current_names_it(spark, copy, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(src), str(dst)))
        return real_replace(src, dst)

    s = IncrementalSession.open(spark, copy)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    s.insert("edge", (30, 31))
    s.commit(compact=False)
    monkeypatch.undo()
    final = copy / "epochs" / "3"
    moved = [e for e in events if e[0] == "replace" and e[2] == str(final)]
    assert len(moved) == 1, events
    tmp = Path(moved[0][1])
    switched = [i for i, e in enumerate(events) if e[0] == "replace"
                and e[2] == str(copy / "CURRENT")]
    assert len(switched) == 1
    before = {e[1] for e in events[:switched[0]] if e[0] == "fsync"}
    on_disk = {str(tmp / p.relative_to(final)) for p in final.rglob("*")
               if p.name != COMMITTED}
    assert on_disk and on_disk <= before, on_disk - before  # every file and directory
    assert str(copy / "epochs") in before  # the epoch's rename
    assert ("fsync", str(copy)) in events[switched[0]:]  # CURRENT's rename, before returning
    # Then the epoch records its commit (a new file), flushed before the commit returns.
    after = events[switched[0]:]
    assert ("fsync", str(final / COMMITTED)) in after and ("fsync", str(final)) in after
    assert ("fsync", str(final / COMMITTED)) not in events[:switched[0]]
    assert (final / COMMITTED).read_text() == (copy / "CURRENT").read_text()


def _tree(root: Path) -> set[str]:
    """Make a small epoch-like tree under root; return every path in it and root."""
    for kind, name in (("rel", "path"), ("base", "edge")):
        (root / "seg" / kind / name).mkdir(parents=True)
        (root / "seg" / kind / name / "part-0.parquet").write_bytes(b"x" * 100)
    (root / "manifest.json").write_text("{}")
    return {str(p) for p in root.rglob("*")} | {str(root)}


def test_fsync_tree_flushes_every_file_and_directory(tmp_path, monkeypatch):
    want, flushed = _tree(tmp_path / "t"), []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (flushed.append(
        os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    durable.fsync_tree(tmp_path / "t")
    assert sorted(flushed) == sorted(want)  # each once, all done when it returns


def test_fsync_tree_raises_when_one_flush_fails(tmp_path, monkeypatch):
    _tree(tmp_path / "t")
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("manifest.json"):
            raise OSError(5, "Input/output error")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match="Input/output error"):
        durable.fsync_tree(tmp_path / "t")


def test_an_epoch_newer_than_current_is_set_aside_never_deleted(spark, copy, tmp_path):
    newer = files_of(copy / "epochs" / "2")
    roll_back(copy, 1)
    ok, lines, _ = check_state(StateDir(copy))
    assert ok and any("epoch 2: newer than CURRENT (epoch 1)" in line for line in lines)
    s = IncrementalSession.open(spark, copy)
    s.insert("edge", (30, 31))
    result = s.commit()
    assert any("kept aside as" in n and "epochs/2" in n for n in result.notes)
    asides = list((copy / "epochs").glob(".aside-2-*"))
    assert len(asides) == 1 and files_of(asides[0]) == newer  # the acknowledged epoch, whole
    s.insert("edge", (31, 32))
    s.commit()  # garbage collection leaves it alone too
    assert files_of(asides[0]) == newer
    assert any(".aside-2-" in line for line in check_state(StateDir(copy))[1])


def test_repair_makes_an_epoch_newer_than_current_current_again(spark, copy, tmp_path):
    roll_back(copy, 1)
    StateDir(copy).collect_garbage()  # leaves the newer epoch alone
    assert (copy / "epochs" / "2" / "manifest.json").is_file()
    assert restore_epoch(StateDir(copy), 2) == 2
    ref = reference(EDGES2, tmp_path / "ref")
    again = IncrementalSession.open(spark, copy)
    for name in ("edge", "path", "named"):
        assert rows_of(again.relation(name)) == ref[name]


# -- 33.5: checksums of the manifest and of CURRENT ---------------------------------------------

def edit_manifest(state: Path, epoch: int, edit) -> None:
    path = state / "epochs" / str(epoch) / "manifest.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=1))


def drop_segment(data):
    data["relations"]["path"]["segments"].pop(0)


def off_by_one(data):
    data["relations"]["path"]["rows"] += 1


@pytest.mark.parametrize("edit", [drop_segment, off_by_one])
def test_a_manifest_edited_as_valid_json_is_refused(spark, copy, edit):
    edit_manifest(copy, 2, edit)
    before = files_of(copy)
    with pytest.raises(StateError) as e:
        IncrementalSession.open(spark, copy)
    assert "\n" not in str(e.value) and "manifest checksum differs" in str(e.value)
    assert str(copy / "epochs" / "2" / "manifest.json") in str(e.value)
    ok, lines, _ = check_state(StateDir(copy))
    assert not ok and "epoch 2 (current): damaged" in "\n".join(lines)
    assert files_of(copy) == before
    assert restore_epoch(StateDir(copy), 1) == 3  # an older whole epoch still serves


def test_another_epochs_manifest_in_place_of_the_current_one_is_refused(spark, copy):
    older = json.loads((copy / "epochs" / "1" / "manifest.json").read_text())
    older["epoch"] = 2
    text, _ = durable.manifest_text(older)  # a whole manifest, but not the one CURRENT names
    (copy / "epochs" / "2" / "manifest.json").write_text(text)
    with pytest.raises(StateError, match="not the one CURRENT names"):
        IncrementalSession.open(spark, copy)


def test_a_state_written_before_the_checksums_opens_and_gets_them(spark, copy, tmp_path):
    for epoch in (0, 1, 2):
        path = copy / "epochs" / str(epoch) / "manifest.json"
        if path.exists():
            edit_manifest(copy, epoch, lambda d: (d.pop(durable.SUM_KEY),
                                                  d.update(format="levelflow-state/5")))
    (copy / "CURRENT").write_text("2\n")
    s = IncrementalSession.open(spark, copy)
    s.insert("edge", (30, 31))
    s.commit()
    data = StateDir(copy).manifest()
    assert data["format"] == "levelflow-state/6"
    assert (copy / "CURRENT").read_text() == durable.current_text(3, data[durable.SUM_KEY])
    ref = reference(EDGES2 | {(30, 31)}, tmp_path / "ref")
    assert rows_of(IncrementalSession.open(spark, copy).relation("path")) == ref["path"]


# -- 32.7: collected epochs are not damaged ------------------------------------------------------

def test_check_tells_collected_epochs_from_damaged_ones(spark, copy):
    s = IncrementalSession.open(spark, copy)
    s.compact(force=True)  # epoch 2's own bases (label's stays epoch 0's)
    for edge in ((30, 31), (31, 32)):
        s.insert("edge", edge)
        s.commit(compact=False)
    s.close()
    assert (copy / "epochs" / "0" / "base" / "label").is_dir()
    assert not (copy / "epochs" / "0" / "rel" / "path").exists()  # collected
    ok, lines, _ = check_state(StateDir(copy))
    text = "\n".join(lines)
    assert ok and "epoch 0: collected (garbage collection deleted" in text, text
    assert "damaged" not in text
    victim = sorted((copy / "epochs" / "3" / "seg" / "rel" / "path").glob("*.parquet"))[0]
    victim.unlink()  # epoch 3 is kept: a file missing there is damage
    ok, lines, _ = check_state(StateDir(copy))
    text = "\n".join(lines)
    assert not ok and "epoch 3: damaged (" in text and "epoch 0: collected" in text


# -- 45: a bootstrap writes its base facts while its tasks run ------------------------------------

def test_a_bootstrap_writes_its_base_facts_early_and_flushes_them_before_current(
        spark, tmp_path, monkeypatch):
    """The base facts written while epoch 0 runs are the ones its manifest names, flushed
    before CURRENT names the epoch; the state opens, checks whole and equals from scratch."""
    from levelflow.engine.incremental.state import write as state_write

    (tmp_path / "p.dl").write_text(PROGRAM)
    taken, events = [], []
    real_take, real_fsync, real_replace = state_write.EarlyWrites.take, os.fsync, os.replace
    monkeypatch.setattr(state_write.EarlyWrites, "take", lambda self, table, path: real_take(
        self, table, path) and (taken.append(f"{path.parent.name}/{path.name}") or True))
    monkeypatch.setattr(os, "fsync", lambda fd: events.append(
        ("fsync", os.readlink(f"/proc/self/fd/{fd}"))) or real_fsync(fd))
    monkeypatch.setattr(os, "replace", lambda src, dst: events.append(
        ("replace", str(src), str(dst))) or real_replace(src, dst))
    state = tmp_path / "state"
    IncrementalSession.bootstrap(spark, tmp_path / "p.dl", write_facts(tmp_path / "f", EDGES),
                                 state).close()
    monkeypatch.undo()
    # The base facts and, as no rule adds to them, their relations (each fact counted once).
    assert sorted(taken) == ["base/edge", "base/label", "rel/edge", "rel/label"]
    switched = events.index(("replace", *[e[1:] for e in events if e[0] == "replace"
                                          and e[2] == str(state / "CURRENT")][0]))
    (moved,) = [e for e in events if e[0] == "replace" and e[2] == str(state / "epochs" / "0")]
    flushed = {e[1] for e in events[:switched] if e[0] == "fsync"}
    for kind, name in (("base", "edge"), ("base", "label"), ("rel", "edge"), ("rel", "label")):
        files = sorted((state / "epochs" / "0" / kind / name).glob("*.parquet"))
        assert len(files) == 1
        assert str(Path(moved[1]) / kind / name / files[0].name) in flushed
    ok, lines, _ = check_state(StateDir(state))
    assert ok, lines
    ref = reference(EDGES, tmp_path / "ref")
    s = IncrementalSession.open(spark, state)
    assert rows_of(s.relation("named")) == ref["named"]
    assert rows_of(s.relation("path")) == ref["path"]


@pytest.mark.parametrize("where", ["tasks", "commit", "disk"])
def test_a_first_epoch_refused_while_its_base_facts_are_written_leaves_no_state(
        spark, tmp_path, monkeypatch, where):
    """Refused while evaluating, in its commit, or with the disk full under the early write
    itself: no state directory is left (the early writes end before it is removed)."""
    import time

    import pyarrow.parquet as pq

    from levelflow.engine.incremental import epoch
    from levelflow.engine.incremental.state import write as state_write

    def refuse(*args, **kwargs):
        time.sleep(0.2)  # the early writes are under way
        raise StateError("refused")

    if where == "tasks":
        monkeypatch.setattr(epoch.Epoch, "run", refuse)
    elif where == "commit":
        monkeypatch.setattr(state_write, "_facts_within", refuse)
    else:
        real = pq.write_table

        def full(table, where, **kwargs):
            if "/base/" in str(where):
                raise OSError(28, "No space left on device")
            return real(table, where, **kwargs)

        monkeypatch.setattr(pq, "write_table", full)
    (tmp_path / "p.dl").write_text(PROGRAM)
    state = tmp_path / "state"
    with pytest.raises(StateError) as e:
        IncrementalSession.bootstrap(spark, tmp_path / "p.dl", write_facts(tmp_path / "f", EDGES),
                                     state)
    assert "\n" not in str(e.value)
    if where == "disk":
        assert "cannot write epoch 0 (" in str(e.value) and "No space left" in str(e.value)
    assert not state.exists()


def test_an_early_write_is_taken_only_for_the_same_rows(tmp_path):
    """A table the commit writes where an early write put other rows is written anew; an
    early write the commit does not write is removed; each read back verifies the file."""
    import numpy as np
    import pyarrow as pa

    from levelflow.engine.incremental.state import integrity
    from levelflow.engine.incremental.state import write as state_write

    same = pa.table({"c0": np.arange(1000), "c1": np.arange(1000) % 7})
    early = state_write.EarlyWrites(tmp_path, {tmp_path / n: same for n in ("a", "b", "c")},
                                    {tmp_path / "a"})  # a: hashed early too
    other = same.set_column(1, "c1", pa.array(np.arange(1000) % 5))
    frames = [(same, tmp_path / "a"), (other, tmp_path / "b")]
    state_write.write_all(frames, early)
    assert list(early.taken) == [tmp_path / "a"] and not (tmp_path / "c").exists()
    written = [({}, integrity.Stored(p.name, p, t.schema, t.num_rows, None, None), t)
               for t, p in frames]
    state_write.read_back(None, 0, written, early)
    for (entry, item, table) in written:
        (name, (_size, rows, checksum)), = entry["files"].items()
        assert (rows, checksum) == integrity.file_sums(item.path / name, item.schema)
        assert (rows, checksum) == state_write.checksums(table, [2])[0]


def test_an_input_that_rules_add_to_is_written_as_evaluated(spark, tmp_path):
    """An input relation that a rule adds to is not its base facts: the commit writes what
    the epoch derived, not an early guess (the state equals from-scratch evaluation)."""
    (tmp_path / "p.dl").write_text(PROGRAM + "edge(100, 101).\nedge(x, x) :- label(x, _).\n")
    state = tmp_path / "state"
    IncrementalSession.bootstrap(spark, tmp_path / "p.dl", write_facts(tmp_path / "f", EDGES),
                                 state).close()
    from levelflow.tasks import build_tasks, load_program

    ref = naive_datalog.evaluate(build_tasks(load_program(tmp_path / "p.dl")), tmp_path / "f")
    s = IncrementalSession.open(spark, state)
    assert rows_of(s.relation("edge")) == ref["edge"] and {(100, 101), (3, 3)} <= ref["edge"]
    assert rows_of(s.relation("path")) == ref["path"]
    assert check_state(StateDir(state))[0]
