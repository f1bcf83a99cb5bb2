"""A damaged state is never built on: every file is verified on open, against the manifest.

A real state (transitive closure plus a negation; epoch 0 from scratch, epoch 1 an update that
rewrote `path` and the base facts of `edge`) is copied, then one Parquet part file of the
current epoch is deleted, truncated to 0 bytes or has a byte flipped. Opening it is refused in
one line naming the relation and the file, and the directory stays byte-identical; `state
check` reports it; `state repair` makes a whole epoch current again, equal to a from-scratch
evaluation.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from levelflow.cli import main as cli_main
from levelflow.engine.incremental import IncrementalSession, StateDir, StateError
from levelflow.engine.incremental.state import integrity
from levelflow.engine.incremental.state import write as state_write
from levelflow.engine.incremental.state.repair import check_state, rebuild, restore_epoch

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402

PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl node(x:number)
node(x) :- edge(x, _).
node(y) :- edge(_, y).
.decl apart(x:number, y:number)
apart(x, y) :- node(x), node(y), !path(x, y).
.output path
.output apart
"""
EDGES0 = {(i, i + 1) for i in range(30)} | {(40, 41)}
EDGES1 = EDGES0 - {(10, 11)} | {(41, 42)}


def write_edges(path: Path, edges) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(edges)))
    return path


def rows_of(df):
    return {tuple(r) for r in df.collect()}


def files_of(root: Path) -> dict[str, bytes | None]:
    """Return every path under root with its bytes (None for a directory)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def pristine(spark, tmp_path_factory):
    """Return (program file, state dir): epoch 0 on EDGES0, epoch 1 on EDGES1."""
    tmp = tmp_path_factory.mktemp("integrity")
    prog = tmp / "p.dl"
    prog.write_text(PROGRAM)
    state = tmp / "state"
    s = IncrementalSession.bootstrap(spark, prog, write_edges(tmp / "f0", EDGES0), state)
    s.remove("edge", (10, 11))
    s.insert("edge", (41, 42))
    s.commit()
    s.compact(force=True)  # epoch 1 holds its own bases: damage to them spares epoch 0
    s.close()
    return prog, state


@pytest.fixture
def copy(pristine, tmp_path):
    """Return a fresh copy of the pristine state directory."""
    dest = tmp_path / "state"
    shutil.copytree(pristine[1], dest)
    return dest


def reference(pristine, edges, tmp: Path) -> dict:
    from levelflow.tasks import build_tasks, load_program

    return naive_datalog.evaluate(build_tasks(load_program(pristine[0])),
                                  write_edges(tmp, edges))


def part_file(state: Path, kind: str, name: str) -> Path:
    """Return the first part file of a relation as the current manifest places it."""
    info = StateDir(state).manifest()["relations" if kind == "rel" else "base"][name]
    return sorted((state / "epochs" / str(info["epoch"]) / kind / name).glob("*.parquet"))[0]


def damage(path: Path, how: str) -> None:
    if how == "delete":
        path.unlink()
    elif how == "truncate":
        path.write_bytes(b"")
    else:  # flip one byte inside the data, after the leading magic number
        data = bytearray(path.read_bytes())
        data[len(data) // 3] ^= 0xFF
        path.write_bytes(bytes(data))
        if how == "flip-nocrc":  # no Hadoop checksum file: only our content checksum sees it
            (path.parent / f".{path.name}.crc").unlink()


REL, BASE = ("rel", "path", "relation path"), ("base", "edge", "base facts of edge")
# Every kind of damage to a relation; the base facts go through the same checks under their
# own label and directory (a cut base file: test_update_refuses_a_cut_file_in_one_line...).
DAMAGES = [(*REL, how) for how in ("delete", "truncate", "flip", "flip-nocrc")] + [
    (*BASE, how) for how in ("delete", "flip-nocrc")]


@pytest.mark.parametrize("kind,name,label,how", DAMAGES)
def test_damage_is_refused_in_one_line_and_changes_nothing(spark, copy, how, kind, name,
                                                           label):
    victim = part_file(copy, kind, name)
    damage(victim, how)
    before = files_of(copy)
    with pytest.raises(StateError) as e:
        IncrementalSession.open(spark, copy)
    message = str(e.value)
    assert "\n" not in message and label in message
    assert str(victim) in message or (how == "flip-nocrc" and str(victim.parent) in message)
    assert files_of(copy) == before
    ok, lines, _ = check_state(StateDir(copy))
    assert not ok and any(str(victim.parent) in line and label in line for line in lines)
    assert files_of(copy) == before  # check changes nothing either


def test_rebuild_from_base_facts_recovers_a_damaged_relation(spark, copy, pristine, tmp_path):
    damage(part_file(copy, "rel", "path"), "flip")  # the rebuild reads no relation file
    result = rebuild(spark, StateDir(copy))
    assert result.epoch == 2 and StateDir(copy).current() == 2
    ref = reference(pristine, EDGES1, tmp_path / "ref")
    again = IncrementalSession.open(spark, copy)  # verifies: whole again
    for rel in ("edge", "path", "apart"):
        assert rows_of(again.relation(rel)) == ref[rel]
    again.insert("edge", (10, 11))  # and it can be built on
    again.commit()
    ref2 = reference(pristine, EDGES1 | {(10, 11)}, tmp_path / "ref2")
    assert rows_of(IncrementalSession.open(spark, copy).relation("apart")) == ref2["apart"]


def test_restoring_an_older_epoch_recovers_damaged_base_facts(spark, copy, pristine, tmp_path):
    damage(part_file(copy, "base", "edge"), "truncate")
    with pytest.raises(StateError, match="base facts of edge.*cannot be used"):
        rebuild(spark, StateDir(copy))  # the current epoch's base facts are gone
    ok, lines, _ = check_state(StateDir(copy))
    assert not ok and any("epoch 0: ok" in line for line in lines)
    assert restore_epoch(StateDir(copy), 0) == 2
    ref = reference(pristine, EDGES0, tmp_path / "ref")
    again = IncrementalSession.open(spark, copy)
    for rel in ("edge", "path", "apart"):
        assert rows_of(again.relation(rel)) == ref[rel]
    assert check_state(StateDir(copy))[0]


def test_restoring_a_damaged_epoch_is_refused(spark, copy):
    victim = sorted((copy / "epochs" / "0" / "rel" / "path").glob("*.parquet"))[0]
    damage(victim, "delete")  # epoch 0's path: kept as the previous epoch, not current
    before = files_of(copy)
    assert check_state(StateDir(copy))[0]  # the current epoch is whole
    with pytest.raises(StateError, match=f"{victim}: error: relation path: part file missing"):
        restore_epoch(StateDir(copy), 0)
    with pytest.raises(StateError, match="no epoch 7"):
        restore_epoch(StateDir(copy), 7)
    assert files_of(copy) == before


def test_a_missing_relation_directory_is_one_line(spark, copy):
    reldir = part_file(copy, "rel", "path").parent
    shutil.rmtree(reldir)
    with pytest.raises(StateError, match=f"{reldir}: error: relation path: directory missing"):
        IncrementalSession.open(spark, copy)


def test_garbage_collection_keeps_the_last_epochs(spark, copy):
    s = IncrementalSession.open(spark, copy)
    for i in range(2):  # epochs 2, 3 each rewrite every relation (compacted): 0, 1 go
        s.insert("edge", (50 + i, 51 + i))
        s.commit()
        s.compact(force=True)
    assert sorted(int(p.name) for p in (copy / "epochs").iterdir()) == [2, 3]
    assert (copy / "epochs" / "2" / "rel" / "path").is_dir()
    assert restore_epoch(StateDir(copy), 2) == 4  # the kept epoch is whole
    s.close()
    s = IncrementalSession.open(spark, StateDir(copy, keep=1))
    s.insert("edge", (60, 61))
    s.commit()  # epoch 5, a segment on epoch 2's bases
    s.compact(force=True)  # epoch 5's own bases; epoch 4 named epoch 2's files: they go too
    assert sorted(int(p.name) for p in (copy / "epochs").iterdir()) == [5]
    assert StateDir(copy).manifest()["keep"] == 1  # the setting stays with the state


def test_a_write_that_fails_leaves_the_state_as_it_was(spark, copy, monkeypatch):
    import pyarrow.parquet as pq
    from pyspark.sql.readwriter import DataFrameWriter

    s = IncrementalSession.open(spark, copy)
    before = files_of(copy)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(DataFrameWriter, "parquet", full)
    # A warm session's small change is written by the driver (pyarrow): full disk there too.
    monkeypatch.setattr(pq, "write_table", full)
    s.insert("edge", (70, 71))
    with pytest.raises(StateError) as e:
        s.commit()
    assert "\n" not in str(e.value) and "No space left on device" in str(e.value)
    assert "cannot write epoch 2" in str(e.value) and StateDir(copy).current() == 1
    assert files_of(copy) == before


def test_a_read_back_mismatch_switches_nothing(spark, copy, monkeypatch):
    s = IncrementalSession.open(spark, copy)
    before = files_of(copy)
    real = state_write.scan

    def lossy(spark, items):  # as if the disk lost a file between the write and the read
        found = real(spark, items)
        return {i: dict(list(files.items())[1:]) for i, files in found.items()}

    monkeypatch.setattr(state_write, "scan", lossy)
    # What Spark wrote is read back by Spark, not the driver (scan_here: its own test below).
    monkeypatch.setattr(integrity, "HERE_ROWS", 0)
    # A segment the driver wrote is read back by pyarrow: as if its file lost rows too.
    monkeypatch.setattr(state_write, "_holds", lambda path, table: False)
    s.insert("edge", (70, 71))
    with pytest.raises(StateError, match=r"read back as \d+ rows, \d+ were written; the "
                                         r"state is unchanged at epoch 1"):
        s.commit()
    assert StateDir(copy).current() == 1 and files_of(copy) == before


def test_the_driver_reads_back_what_spark_reads(spark, pristine, monkeypatch):
    """A commit's read back of what Spark wrote is the driver's (pyarrow, row_hash) where it
    is small: per part file, the rows and checksums Spark's own scan finds, on every stored
    relation of a state (with counts or ranks; base facts)."""
    from levelflow.engine.incremental.state.integrity import scan, scan_here
    from levelflow.tasks import build_tasks, load_program

    program = build_tasks(load_program(pristine[0])).program
    state = StateDir(pristine[1])
    items = [item for epoch in (0, 1)
             for item in state.stored(program, state.manifest(epoch))]
    assert {item.path.parent.name for item in items} == {"rel", "base"}
    found = scan(spark, items)
    for i, item in enumerate(items):
        assert scan_here(item) == found[i], item.label
        assert sum(rows for rows, _ in found[i].values()) == item.rows
    # Past HERE_ROWS rows in all, Spark's to read.
    monkeypatch.setattr(integrity, "HERE_ROWS", max(item.rows for item in items) - 1)
    assert [scan_here(item) is None for item in items] == \
        [item.rows > integrity.HERE_ROWS for item in items]


def test_a_bootstrap_whose_read_back_differs_leaves_no_state(spark, pristine, tmp_path,
                                                             monkeypatch):
    real = state_write.scan_here

    def lossy(item):  # the driver reads the part files back: one of them lost
        found = real(item)
        return found and dict(list(found.items())[1:])

    monkeypatch.setattr(state_write, "scan_here", lossy)
    state = tmp_path / "state"
    # On Spark (driver_rows=None): what the driver writes itself is read back whole instead.
    with pytest.raises(StateError, match=r"relation \w+ read back as \d+ rows"):
        IncrementalSession.bootstrap(spark, pristine[0], write_edges(tmp_path / "f", EDGES0),
                                     state, driver_rows=None)
    assert not StateDir(state).exists()


def cli(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        cli_main(argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_update_refuses_a_cut_file_in_one_line_before_spark(copy, tmp_path, capsys):
    victim = part_file(copy, "base", "edge")
    damage(victim, "truncate")
    before = files_of(copy)
    diff = tmp_path / "d.diff"
    diff.write_text("+edge(1,99)\n")
    code, out, err = cli(["update", str(copy), "--insert", str(diff)], capsys)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith(f"{victim}: error: base facts of edge: part file has 0 bytes")
    assert "levelflow state check" in err and files_of(copy) == before


def test_state_check_and_repair_commands(copy, pristine, tmp_path, capsys, cli_spark, spark):
    victim = part_file(copy, "rel", "path")
    damage(victim, "flip")
    code, out, err = cli(["state", "check", str(copy)], capsys)
    assert code == 1 and err.count("\n") == 1 and "state repair" in err
    # The driver reads it (no Spark): a flipped byte leaves it unreadable or its rows changed.
    found = [line for line in out.splitlines() if line.startswith(f"{victim}: error: ")]
    assert found and ("relation path: part file cannot be read" in found[0] or
                      "relation path: content differs from what was written" in found[0])
    assert "epoch 1 (current): damaged" in out and "epoch 0: ok" in out
    code, out, err = cli(["state", "repair", str(copy), "--from-epoch", "0"], capsys)
    assert code == 0 and "epoch 2 is a copy of epoch 0" in out
    code, out, err = cli(["state", "repair", str(copy)], capsys)
    assert code == 0 and "epoch 2 is whole; nothing to repair" in out
    code, out, err = cli(["state", "repair", str(copy), "--rebuild"], capsys)
    assert code == 0 and "epoch 3 rebuilt from the base facts of epoch 2" in out
    code, out, err = cli(["state", "check", str(copy)], capsys)
    assert code == 0 and "epoch 3 (current): ok" in out
    ref = reference(pristine, EDGES0, tmp_path / "ref")
    assert rows_of(IncrementalSession.open(spark, copy).relation("apart")) == ref["apart"]
    code, out, err = cli(["state", "repair", str(copy), "--from-epoch", "1"], capsys)
    assert code == 1 and err.count("\n") == 1 and "no epoch 1 on disk" in err  # collected
    code, out, err = cli(["state", "check", str(tmp_path / "nope")], capsys)
    assert code == 1 and "not a levelflow state directory" in err and err.count("\n") == 1


def test_update_on_a_flipped_byte_is_one_line_and_changes_nothing(copy, tmp_path, capsys,
                                                                  cli_spark):
    """The issue's case, end to end (in this process, on the tests' session): no epoch, no
    traceback."""
    victim = part_file(copy, "rel", "path")
    damage(victim, "flip-nocrc")
    before = files_of(copy)
    diff = tmp_path / "d.diff"
    diff.write_text("+edge(1,99)\n")
    code, out, err = cli(["update", str(copy), "--insert", str(diff), "--master", "local[1]",
                          "--driver-memory", "1g"], capsys)
    assert code == 1 and out == "", err
    assert err.count("\n") == 1 and "relation path" in err
    assert f"{victim.parent}" in err and files_of(copy) == before


# -- issue 45: an input's base facts hashed with its relation ------------------------------------

def _written(tmp_path: Path, tables: dict) -> list:
    """Return read_back's (entry, Stored, table) of each table, written as a commit writes."""
    import pyarrow.parquet as pq

    written = []
    for name, table in tables.items():
        path = tmp_path / name
        path.mkdir()
        pq.write_table(table, path / "part-00000-x.parquet", compression="lz4")
        written.append(({}, integrity.Stored(name, path, table.schema, table.num_rows, None,
                                             None), table))
    return written


def test_base_facts_that_are_the_relations_tuples_are_hashed_with_it(tmp_path, monkeypatch):
    """A bootstrap's input: its relation's tuple columns are its base facts (the same
    arrays), hashed in one pass with the relation; each checksum is what the file's own
    verification reads (integrity.file_sums), and a different base is hashed apart."""
    import numpy as np
    import pyarrow as pa

    rel = pa.table({"c0": np.arange(1000) * 7, "c1": np.arange(1000) % 13,
                    "_cnt": np.ones(1000, np.int64)})
    other = rel.select(["c0", "c1"]).set_column(1, "c1", pa.array(np.arange(1000)))
    calls = []
    real = state_write.checksums
    monkeypatch.setattr(state_write, "checksums",
                        lambda table, widths: calls.append(list(widths)) or real(table, widths))
    written = _written(tmp_path, {"rel": rel, "base": rel.select(["c0", "c1"]),
                                  "other": other})
    state_write.read_back(None, 0, written)
    assert sorted(calls) == [[2], [3, 2]]  # the base facts took no pass of their own
    for entry, item, _ in written:
        (name, (_size, rows, checksum)), = entry["files"].items()
        assert (rows, checksum) == integrity.file_sums(item.path / name, item.schema)
        assert entry["checksum"] == checksum
    assert written[0][0]["checksum"] != written[1][0]["checksum"]


def test_base_facts_hashed_with_their_relation_still_catch_a_bad_file(tmp_path):
    """Read back, the base facts' file is still compared with what was meant to be written."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rel = pa.table({"c0": np.arange(100), "_cnt": np.ones(100, np.int64)})
    written = _written(tmp_path, {"rel": rel, "base": rel.select(["c0"])})
    pq.write_table(pa.table({"c0": np.arange(1, 101)}), tmp_path / "base" / "part-00000-x.parquet")
    with pytest.raises(StateError, match="base read back as 100 rows"):
        state_write.read_back(None, 0, written)


def test_the_driver_writes_files_spark_reads_and_hashes_alike(spark, tmp_path):
    """A table the driver writes (integers delta-packed, text in dictionaries) reads back in
    Spark as the same rows, and Spark's checksum of the file is the driver's (row_hash)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from levelflow.engine.incremental.state.row_hash import checksum

    n = 5000
    rng = np.random.default_rng(3)
    table = pa.table({"c0": rng.integers(-2**62, 2**62, n), "c1": np.arange(n) % 7,
                      "c2": pa.array(rng.integers(-9, 9, n), pa.int32()),
                      "c3": pa.array([f"s{i % 50}" for i in range(n)]),
                      "c4": rng.random(n), "_cnt": np.ones(n, np.int64)})
    state_write.write_all([(table, tmp_path / "t")])
    (part,) = (tmp_path / "t").glob("*.parquet")
    meta = pq.read_metadata(part).row_group(0)
    assert "DELTA_BINARY_PACKED" in meta.column(0).encodings  # the encoding under test
    got = spark.read.parquet(str(tmp_path / "t")).collect()
    assert sorted(tuple(r) for r in got) == sorted(zip(*table.to_pydict().values(), strict=True))
    item = integrity.Stored("t", tmp_path / "t", table.schema, n, None, None)
    assert integrity.scan(spark, [item])[0] == {part.name: checksum(table)}
