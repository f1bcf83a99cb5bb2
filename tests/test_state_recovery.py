"""A damaged CURRENT is recovered to the last acknowledged epoch, and `state check` and `state
repair` run without Spark.

A real state made as a user makes one: `levelflow run --state` then three `levelflow update`s
(epochs 0 to 3) of a transitive closure over `edge`, with symbols (`name`) and floats
(`weight`) stored too. CURRENT is then damaged four ways (a hex digit of its manifest checksum
flipped, its epoch replaced by an older one's, emptied, deleted). `state check` says so and
which epoch `state repair` makes current; the repair makes the last committed epoch (3)
current, whose relations equal a from-scratch evaluation (tests/naive_datalog.py) of the
facts after the last update; nothing on disk is deleted. An epoch written but never made
current (a commit killed before its switch) is not recovered: it was never acknowledged
(state/files.py: only an epoch whose COMMITTED names its manifest was).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from levelflow.engine.incremental import IncrementalSession, StateDir, StateError
from levelflow.engine.incremental.state import files as state_files
from levelflow.engine.incremental.state.locks import DirLocks
from levelflow.tasks import build_tasks, parse_program

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl name(x:number, s:symbol)
.input name
.decl weight(x:number, w:float)
.input weight
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl named(s:symbol, t:symbol)
named(s, t) :- path(x, y), name(x, s), name(y, t).
.decl heavy(s:symbol)
heavy(s) :- name(x, s), weight(x, w), w > 1.5.
.output path
.output named
.output heavy
"""
EDGES = {(i, i + 1) for i in range(8)} | {(8, 0)}
NAMES = {(i, f"n{i}-é") for i in range(0, 10, 2)} | {(3, "a longer name, past 32 bytes")}
WEIGHTS = {(0, 2.5), (2, -0.0), (4, 1.25), (6, 1e300)}
# Epochs 1, 2, 3: one update each.
DIFFS = ["+edge(9,10)\n+name(10,\"ten\")\n", "-edge(3,4)\n+weight(8,7.5)\n",
         "+edge(3,4)\n-edge(8,0)\n+name(9,\"nine\")\n"]


def facts_after(updates: int) -> dict[str, set]:
    """Return the input facts after the first `updates` diffs (derived by hand from DIFFS)."""
    facts = {"edge": set(EDGES), "name": set(NAMES), "weight": set(WEIGHTS)}
    changes = [({"edge": {(9, 10)}, "name": {(10, "ten")}}, {}),
               ({"weight": {(8, 7.5)}}, {"edge": {(3, 4)}}),
               ({"edge": {(3, 4)}, "name": {(9, "nine")}}, {"edge": {(8, 0)}})]
    for added, removed in changes[:updates]:
        for rel, rows in removed.items():
            facts[rel] -= rows
        for rel, rows in added.items():
            facts[rel] |= rows
    return facts


def write_facts(folder: Path, facts: dict[str, set]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rel, rows in facts.items():
        (folder / f"{rel}.facts").write_text(
            "".join("\t".join(str(v) for v in row) + "\n" for row in sorted(rows)))
    return folder


def reference(updates: int, tmp: Path) -> dict[str, set]:
    return naive_datalog.evaluate(build_tasks(parse_program(PROGRAM, "p.dl")),
                                  write_facts(tmp, facts_after(updates)))


def rows_of(df) -> set:
    return {tuple(r) for r in df.collect()}


def assert_state_equals(spark, state: Path, updates: int, tmp: Path) -> None:
    """The state opens (every file verified) and holds a from-scratch evaluation's relations."""
    ref = reference(updates, tmp)
    s = IncrementalSession.open(spark, state)
    try:
        for name in ("edge", "name", "weight", "path", "named", "heavy"):
            assert rows_of(s.relation(name)) == ref[name], name
    finally:
        s.close()


def files_of(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*")) if p.name not in ("LOCK", "READERS")}


@pytest.fixture(scope="module")
def pristine(spark, tmp_path_factory):
    """Return a state at epoch 3 made by `levelflow run --state` and three `update`s."""
    import levelflow.cli.spark as cli_spark_module
    from levelflow.cli import main

    @contextlib.contextmanager
    def tests_session(master, driver_memory, log, clock=None, eager=True):
        yield spark

    tmp = tmp_path_factory.mktemp("recovery")
    (tmp / "p.dl").write_text(PROGRAM)
    state = tmp / "state"
    runs = [["run", tmp / "p.dl", "-F", write_facts(tmp / "f", facts_after(0)),
             "-D", tmp / "out", "--state", state]]
    for i, diff in enumerate(DIFFS):
        (tmp / f"d{i}.diff").write_text(diff)
        runs.append(["update", state, "--insert", tmp / f"d{i}.diff"])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli_spark_module, "spark_session", tests_session)
        for argv in runs:
            with pytest.raises(SystemExit) as e:
                main([str(a) for a in argv])
            assert e.value.code == 0, argv
    assert StateDir(state).current() == 3
    return state


@pytest.fixture
def copy(pristine, tmp_path):
    dest = tmp_path / "state"
    shutil.copytree(pristine, dest)
    return dest


def flip_digit(state: Path) -> None:
    """Change one hex digit of the manifest checksum CURRENT names."""
    epoch, digest = (state / "CURRENT").read_text().split("\n")[:2]
    at = len(digest) - 5
    digit = "0" if digest[at] != "0" else "1"
    (state / "CURRENT").write_text(f"{epoch}\n{digest[:at]}{digit}{digest[at + 1:]}\n")


def older_epoch(state: Path) -> None:
    """Make CURRENT's epoch line name epoch 2 (its checksum stays epoch 3's)."""
    text = (state / "CURRENT").read_text()
    (state / "CURRENT").write_text("2" + text[text.index("\n"):])


DAMAGES = {
    "flip": (flip_digit, "CURRENT names another manifest than the one epoch 3 committed"),
    "older": (older_epoch, "CURRENT names another manifest than the one epoch 2 committed"),
    "empty": (lambda s: (s / "CURRENT").write_text(""), "CURRENT is empty"),
    "delete": (lambda s: (s / "CURRENT").unlink(), "CURRENT is missing"),
}


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_current_is_recovered_to_the_last_epoch(spark, copy, cli, how, tmp_path):
    damage, problem = DAMAGES[how]
    damage(copy)
    before = files_of(copy)
    before.pop("CURRENT", None)
    code, out, err = cli(["state", "check", copy])
    assert code == 1 and err.count("\n") == 1, (out, err)
    assert problem in err and f"`levelflow state repair {copy}` makes epoch 3 current" in err
    assert f"{copy / 'CURRENT'}: error: {problem}" in out
    assert f"{copy}: epoch 3: ok, the last committed epoch" in out
    # Nothing builds on it meanwhile: one line, and the state is as it was.
    (tmp_path / "d.diff").write_text("+edge(20,21)\n")
    code, out, err = cli(["update", copy, "--insert", tmp_path / "d.diff"])
    assert code == 1 and err.count("\n") == 1 and "state repair" in err and problem in err
    assert {k: v for k, v in files_of(copy).items() if k != "CURRENT"} == before
    code, out, err = cli(["state", "repair", copy, "--rebuild"])  # needs a CURRENT first
    assert code == 1 and err.count("\n") == 1 and problem in err
    assert {k: v for k, v in files_of(copy).items() if k != "CURRENT"} == before
    code, out, err = cli(["state", "repair", copy])
    assert code == 0 and out.count("\n") == 1, (out, err)
    assert out == f"{copy}: {problem}: epoch 3, the last committed, is current again\n"
    after = files_of(copy)
    assert all(after[k] == v for k, v in before.items())  # nothing deleted or changed
    code, out, err = cli(["state", "check", copy])
    assert code == 0 and "epoch 3 (current): ok" in out
    assert_state_equals(spark, copy, 3, tmp_path / "ref")


def test_repair_from_any_whole_epoch_when_current_is_damaged(spark, copy, cli, cli_spark,
                                                             tmp_path):
    flip_digit(copy)
    code, out, err = cli(["state", "repair", copy, "--from-epoch", "2"])
    assert code == 0 and out == f"{copy}: epoch 2 is current again\n", (out, err)
    assert_state_equals(spark, copy, 2, tmp_path / "ref2")
    # The next update builds on epoch 2; epoch 3 (acknowledged once) is set aside, not lost.
    epoch3 = files_of(copy / "epochs" / "3")
    (tmp_path / "d.diff").write_text(DIFFS[2])
    code, out, err = cli(["update", copy, "--insert", tmp_path / "d.diff"])
    assert code == 0, err
    asides = list((copy / "epochs").glob(".aside-3-*"))
    assert len(asides) == 1 and files_of(asides[0]) == epoch3
    assert_state_equals(spark, copy, 3, tmp_path / "ref3")


class Crash(Exception):
    """A kill between a commit's steps."""


def crash():
    raise Crash


def test_an_epoch_never_made_current_is_not_recovered(spark, copy, cli, tmp_path):
    s = IncrementalSession.open(spark, copy)
    s.insert("edge", (10, 11))
    with pytest.raises(Crash):
        s.commit(before_switch=crash)  # epochs/4 written whole, CURRENT still names 3
    s.close()
    assert (copy / "epochs" / "4" / "manifest.json").is_file()
    assert not (copy / "epochs" / "4" / state_files.COMMITTED).exists()
    epoch4 = files_of(copy / "epochs" / "4")
    (copy / "CURRENT").unlink()
    code, out, err = cli(["state", "check", copy])
    assert code == 1 and "makes epoch 3 current" in err
    assert f"{copy}: epoch 4: never made current" in out and "whole" in out
    code, out, err = cli(["state", "repair", copy])
    assert code == 0 and "epoch 3, the last committed, is current again" in out
    assert files_of(copy / "epochs" / "4") == epoch4  # kept, never deleted
    assert_state_equals(spark, copy, 3, tmp_path / "ref")
    # Asked for by number, the whole epoch 4 can still be made current.
    code, out, err = cli(["state", "repair", copy, "--from-epoch", "4"])
    assert code == 0 and out == f"{copy}: epoch 4 is current again\n"
    ref = reference(3, tmp_path / "ref4")
    s = IncrementalSession.open(spark, copy)
    assert rows_of(s.relation("edge")) == ref["edge"] | {(10, 11)}
    s.close()


def test_an_epoch_whose_commit_record_was_not_written_is_not_recovered(spark, copy, cli,
                                                                       monkeypatch, tmp_path):
    """CURRENT switched, the update killed before it recorded COMMITTED (so before it
    answered): while CURRENT is whole, that epoch is current; once CURRENT is lost, the
    recovery goes back to the last epoch whose commit was recorded."""
    def killed(path, text):
        raise Crash

    s = IncrementalSession.open(spark, copy)
    s.insert("edge", (10, 11))
    monkeypatch.setattr(state_files, "create_durably", killed)  # a new epoch's COMMITTED
    with pytest.raises(Crash):
        s.commit()
    monkeypatch.undo()
    s.close()
    assert StateDir(copy).current() == 4
    assert cli(["state", "check", copy])[0] == 0
    (copy / "CURRENT").write_text("")
    code, out, err = cli(["state", "repair", copy])
    assert code == 0 and "epoch 3, the last committed, is current again" in out
    assert_state_equals(spark, copy, 3, tmp_path / "ref")


def test_an_epoch_compacted_in_place_is_still_recovered(spark, copy, cli, monkeypatch,
                                                      tmp_path):
    """A compaction replaces epoch 3's manifest, killed before CURRENT and COMMITTED name the
    new one: COMMITTED still names the manifest it replaced (`compacted_from`), so epoch 3 is
    still the one committed; its recovery records the new manifest."""
    s = IncrementalSession.open(spark, copy)
    monkeypatch.setattr(state_files.StateFiles, "switch", lambda *args: crash())
    with pytest.raises((StateError, Crash)):
        s.compact(force=True)
    monkeypatch.undo()
    s.close()
    data = StateDir(copy).manifest()
    assert data["compacted_from"] and data["compacted_from"] != data["manifest_sha256"]
    (copy / "CURRENT").unlink()
    code, out, err = cli(["state", "repair", copy])
    assert code == 0 and "epoch 3, the last committed, is current again" in out, err
    assert (copy / "epochs" / "3" / state_files.COMMITTED).read_text() == \
        (copy / "CURRENT").read_text()
    assert f"manifest sha256:{data['manifest_sha256']}" in (copy / "CURRENT").read_text()
    assert_state_equals(spark, copy, 3, tmp_path / "ref")


def test_a_first_run_killed_before_its_switch_leaves_no_state(spark, tmp_path, monkeypatch):
    """Nothing was acknowledged: the directory holds no state, and a new run makes one (the
    unswitched epoch 0 set aside, not deleted)."""
    write_facts(tmp_path / "f", facts_after(0))
    (tmp_path / "p.dl").write_text(PROGRAM)
    state = tmp_path / "state"
    monkeypatch.setattr(state_files.StateFiles, "switch", lambda *args: crash())
    # A killed process runs no handler: the refused first epoch's clean-up never happens.
    monkeypatch.setattr(DirLocks, "_remove_made", lambda *args: None)
    with pytest.raises(Crash):
        IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f", state)
    monkeypatch.undo()
    assert (state / "epochs" / "0" / "manifest.json").is_file()
    assert not StateDir(state).exists()
    s = IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f", state)
    s.close()
    assert len(list((state / "epochs").glob(".aside-0-*"))) == 1
    assert_state_equals(spark, state, 0, tmp_path / "ref")


def test_a_committed_epoch_whose_files_are_damaged_is_passed_over(spark, copy, cli, tmp_path):
    victim = sorted((copy / "epochs" / "3").rglob("*.parquet"))[0]
    victim.write_bytes(victim.read_bytes()[:-20])  # cut: epoch 3 is no longer whole
    (copy / "CURRENT").unlink()
    code, out, err = cli(["state", "check", copy])
    assert code == 1 and "makes epoch 2 current" in err
    assert f"{copy}: epoch 3: committed, damaged ({victim}" in out
    code, out, err = cli(["state", "repair", copy])
    assert code == 0 and "epoch 2, the last committed, is current again" in out
    assert victim.is_file()  # the damaged epoch stays for whoever wants to look
    assert_state_equals(spark, copy, 2, tmp_path / "ref")


def test_a_state_without_commit_records_names_the_epochs_to_choose_from(spark, copy, cli,
                                                                       tmp_path):
    """A state written before COMMITTED existed: no epoch is guessed; --from-epoch works."""
    for record in (copy / "epochs").glob(f"*/{state_files.COMMITTED}"):
        record.unlink()
    (copy / "CURRENT").write_text("")
    before = files_of(copy)
    code, out, err = cli(["state", "repair", copy])
    assert code == 1 and err.count("\n") == 1 and files_of(copy) == before
    assert "no whole epoch on disk records its commit" in err
    assert f"`levelflow state repair {copy} --from-epoch 3`" in err
    assert "no commit record" in cli(["state", "check", copy])[1]
    code, out, err = cli(["state", "repair", copy, "--from-epoch", "3"])
    assert code == 0 and "epoch 3 is current again" in out
    assert_state_equals(spark, copy, 3, tmp_path / "ref")


def test_a_directory_that_is_no_state_is_one_line(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    for argv in (["state", "check", tmp_path / "empty"], ["state", "repair", tmp_path / "x"]):
        code, out, err = cli(argv)
        assert code == 1 and err.count("\n") == 1 and "not a levelflow state directory" in err


# pyspark and py4j cannot be imported: a command that needed Spark would fail.
NO_SPARK = """
import sys

class NoSpark:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "py4j"):
            raise ImportError(f"{name}: no Spark in this test")

sys.meta_path.insert(0, NoSpark())
from levelflow.cli import main
main(sys.argv[1:])
"""


def levelflow_without_spark(*argv) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", NO_SPARK, *map(str, argv)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_check_and_repair_start_no_spark(copy):
    victim = sorted((copy / "epochs" / "3").rglob("*.parquet"))[0]
    ok = levelflow_without_spark("state", "check", copy)
    assert ok.returncode == 0 and "epoch 3 (current): ok" in ok.stdout, ok.stderr
    (copy / "CURRENT").write_text("")
    damaged = levelflow_without_spark("state", "check", copy)
    assert damaged.returncode == 1 and "makes epoch 3 current" in damaged.stderr
    repaired = levelflow_without_spark("state", "repair", copy)
    assert repaired.returncode == 0, repaired.stderr
    assert "epoch 3, the last committed, is current again" in repaired.stdout
    # Changed bytes in the column data are found by the driver (unreadable, or its checksum
    # differs). Bytes in the footer's statistics or Spark's schema note change no row: those
    # are left alone, so the last byte of each column chunk (its values) is flipped.
    group = pq.ParquetFile(victim).metadata.row_group(0)
    data = bytearray(victim.read_bytes())
    for i in range(group.num_columns):
        chunk = group.column(i)
        start = chunk.dictionary_page_offset or chunk.data_page_offset
        data[start + chunk.total_compressed_size - 1] ^= 0x01
    victim.write_bytes(bytes(data))
    found = levelflow_without_spark("state", "check", copy)
    assert found.returncode == 1 and f"{victim}: error: " in found.stdout, found.stdout
    assert "Traceback" not in found.stderr and found.stderr.count("\n") == 1


def test_opening_a_damaged_current_is_refused_in_one_line(spark, copy):
    (copy / "CURRENT").unlink()
    with pytest.raises(StateError) as e:
        IncrementalSession.open(spark, copy)
    assert "\n" not in str(e.value) and "CURRENT is missing" in str(e.value)
    assert "levelflow state repair" in str(e.value)
