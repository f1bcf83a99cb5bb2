"""Durable state in O(change): epochs append segments, chains compact, kills lose nothing.

Random mixed epochs on a state directory, reopened as they go, must equal from-scratch
evaluation (the naive reference every epoch; stored counts equal recounted ones). An epoch
writes segments, not whole relations; the compaction policy bounds the chains. A process
killed (SIGKILL) while writing an epoch, before its switch, or in a compaction before the
manifest's rename leaves the previous state readable and whole, and the next epoch works.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_incremental_properties import (
    check_against_reference,
    random_epochs,
    rows_of,
    start_family,
    write_facts,
)

from levelflow.engine.incremental import IncrementalSession, StateDir, StateError
from levelflow.engine.incremental.state import segments
from levelflow.engine.incremental.state.snapshot import COUNT
from levelflow.tasks import build_tasks, parse_program

ROOT = Path(__file__).resolve().parent.parent

DEGREE = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl out(x:number)
out(x) :- edge(x, _).
.output path
.output out
"""


def durable(spark, tmp_path, family, seed):
    """Return start_family's tuple with the session bootstrapped into a state directory."""
    from test_incremental_properties import FAMILIES

    _, pt, facts, gens, rng = start_family(spark, tmp_path, family, seed)
    prog = tmp_path / f"{family}.dl"  # the state keeps the program's text
    prog.write_text(FAMILIES[family][0])
    state = tmp_path / "state"
    s = IncrementalSession.bootstrap(spark, prog, tmp_path / "f0", state, mode="incremental")
    return s, pt, facts, gens, rng, state


def stored_rows(session, name) -> set[tuple]:
    return {tuple(r) for r in session.snap.rel[name].collect()}


def test_reopened_segments_match_from_scratch(spark, tmp_path, monkeypatch):
    # pointsto: symbol columns, recursion through two relations and a counted one (alias);
    # the numeric segments of a closure are the subject of the tests below.
    monkeypatch.setattr(segments, "MAX_SEGMENTS", 2)  # compactions happen within the run
    session, pt, facts, gens, rng, state = durable(spark, tmp_path, "pointsto", 12)
    chains = set()
    for k, ops in enumerate(random_epochs(rng, gens, facts, 4), 1):
        for sign, name, row in ops:
            (session.insert if sign > 0 else session.remove)(name, row)
        session.commit()
        data = StateDir(state).manifest()
        chains |= {len(i.get("segments", [])) for i in data["relations"].values()}
        assert max(chains) <= 2  # the policy holds after every commit
        if k % 2:  # reopen: read base plus segments from disk
            session.close()
            session = IncrementalSession.open(spark, state, mode="incremental")
        check_against_reference(session, pt, facts, tmp_path / f"ref{k}")
    assert chains & {1, 2}  # segments were written and read
    # Stored counts are the derivation counts a from-scratch evaluation finds.
    write_facts(tmp_path / "last", facts)
    fresh = IncrementalSession.bootstrap(spark, pt, tmp_path / "last")
    for name in session.snap.counted:
        assert stored_rows(session, name) == stored_rows(fresh, name), name


def test_a_count_change_is_a_replacement_in_the_segment(spark, tmp_path):
    (tmp_path / "p.dl").write_text(DEGREE.replace("out(x) :- edge(x, _).",
                                                  "out(x) :- edge(x, y), y > 0."))
    write_facts(tmp_path / "f", {"edge": {(1, 2), (2, 3)}})
    state = tmp_path / "state"
    s = IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f", state,
                                     mode="incremental")
    s.insert("edge", (1, 3))  # out(1)'s count goes 1 -> 2: same tuples, new stored row
    s.commit(compact=False)
    seg = StateDir(state).manifest()["relations"]["out"]["segments"]
    assert [x["epoch"] for x in seg] == [1] and seg[0]["rows"] == 2  # old row out, new in
    again = IncrementalSession.open(spark, state)
    assert stored_rows(again, "out") == {(1, 2), (2, 1)}
    again.remove("edge", (1, 2))
    again.remove("edge", (1, 3))  # out(1) goes: removed only
    again.commit(compact=False)
    assert stored_rows(IncrementalSession.open(spark, state), "out") == {(2, 1)}
    assert COUNT in again.snap.rel["out"].columns


def test_an_epoch_writes_its_change_not_the_relation(spark, tmp_path):
    write_facts(tmp_path / "f", {"edge": {(i, i + 1) for i in range(60)}})
    (tmp_path / "p.dl").write_text(DEGREE)
    state = tmp_path / "state"
    s = IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f", state,
                                     mode="incremental")
    s.insert("edge", (100, 0))  # 61 new paths out of 1,891
    s.commit()
    info = StateDir(state).manifest()["relations"]["path"]
    assert info["epoch"] == 0 and info["rows"] == 1830 + 61
    assert [x["rows"] for x in info["segments"]] == [61]


def test_a_change_past_the_policy_is_written_as_a_new_base(spark, tmp_path, monkeypatch):
    from levelflow.engine.incremental.backends.worker import share_job

    monkeypatch.setattr(segments, "SEGMENT_FLOOR_ROWS", 0)
    # Epochs on Spark's side: a change the driver holds stays a segment (written without a
    # job; the compaction comes after the epoch).
    monkeypatch.setattr(share_job, "DIRECT_ROWS", 0)
    chain = {(i, i + 1) for i in range(60)}
    write_facts(tmp_path / "f", {"edge": chain})
    (tmp_path / "p.dl").write_text(DEGREE)
    state = tmp_path / "state"
    s = IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f", state,
                                     mode="incremental")
    s.insert("edge", (100, 0))  # 61 new paths of 1,891: a segment
    s.commit(compact=False)
    segs = StateDir(state).manifest()["relations"]["path"]["segments"]
    assert [(x["epoch"], x["rows"]) for x in segs] == [(1, 61)]
    s.remove("edge", (30, 31))  # 960 of the 1,891 paths go: the relation written whole
    s.commit(compact=False)
    info = StateDir(state).manifest()["relations"]["path"]
    assert info["epoch"] == 2 and info["segments"] == [] and info["rows"] == 931
    edges = (chain | {(100, 0)}) - {(30, 31)}
    want = {(a, b) for a, _ in edges for b in range(a + 1, 61)
            if all((x, x + 1) in edges for x in range(max(a, 0), b))}
    want |= {(100, b) for b in range(0, 31)}
    again = IncrementalSession.open(spark, state)
    assert rows_of(again.relation("path")) == want
    s.close()
    again.close()


def test_a_change_the_driver_holds_is_written_from_it_and_checked(spark, tmp_path, monkeypatch):
    import pyarrow.parquet as pq
    from pyspark.sql import DataFrameWriter

    from levelflow.engine.session import jobs_started

    write_facts(tmp_path / "f", {"edge": {(i, i + 1) for i in range(20)}})
    (tmp_path / "p.dl").write_text(DEGREE)
    state = tmp_path / "state"
    s = IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f", state,
                                     mode="incremental")
    spark_writes = []
    real_parquet = DataFrameWriter.parquet
    monkeypatch.setattr(DataFrameWriter, "parquet",
                        lambda self, *a, **k: spark_writes.append(a) or real_parquet(self, *a, **k))
    s.insert("edge", (30, 0))
    s.remove("edge", (5, 6))
    before = jobs_started(spark)
    r = s.commit(compact=False)
    assert not spark_writes  # every segment (edge's facts and counts, path, out) from the driver
    # No job writes or reads back: the files are checked by pyarrow, hashed in numpy.
    assert jobs_started(spark) - before == sum(r.spark_jobs.values())
    segs = StateDir(state).manifest()["relations"]
    assert all(segs[n]["segments"][-1]["epoch"] == 1 for n in ("edge", "path", "out"))
    again = IncrementalSession.open(spark, state)  # verified on open: checksums recorded
    edges = {(i, i + 1) for i in range(20)} - {(5, 6)} | {(30, 0)}
    assert rows_of(again.relation("edge")) == edges
    assert rows_of(again.relation("path")) == rows_of(s.relation("path"))
    again.close()

    real_write = pq.write_table
    monkeypatch.setattr(pq, "write_table", lambda table, where, **k: real_write(
        table.slice(1), where, **k))  # a write that loses a row
    s.insert("edge", (31, 30))
    with pytest.raises(StateError, match="read back"):
        s.commit(compact=False)
    assert StateDir(state).current() == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=6),
                min_size=1, max_size=6), st.sets(st.integers(0, 5), max_size=4))
def test_a_chain_netted_in_the_driver_does_what_its_segments_do_in_order(epochs, base_keys):
    """Each epoch sets some tuples' ranks (a present tuple: old row out, new row in; rank 0
    removes it); the netted chain applied to the base must give the rows applied in order."""
    import pyarrow as pa

    rows = {k: 9 for k in base_keys}
    base = dict(rows)
    tables = []
    for epoch in epochs:
        removed, added = [], []
        for key, rank in dict(epoch).items():
            if key in rows:
                removed.append((key, None))
                del rows[key]
            if rank:
                added.append((key, rank))
                rows[key] = rank
        seg = [(k, r, -1) for k, r in removed] + [(k, r, 1) for k, r in added]
        tables.append(pa.table({"c0": pa.array([k for k, _, _ in seg], pa.int64()),
                                "_it": pa.array([r for _, r, _ in seg], pa.int64()),
                                "_op": pa.array([o for _, _, o in seg], pa.int32())}))
    touched, added = segments.net_of_chain(tables, ["c0"])
    kept = {k: r for k, r in base.items() if k not in set(touched["c0"].to_list())}
    assert {**kept, **dict(added.select("c0", "_it").iter_rows())} == rows
    assert added.height == len(rows) - len(kept)  # each tuple once


def test_compaction_policy(monkeypatch):
    entry = {"epoch": 0, "rows": 100, "base_rows": 100_000, "segments": [{"rows": 1}] * 16}
    assert not segments.needs_compaction(entry)
    assert segments.needs_compaction({**entry, "segments": [{"rows": 1}] * 17})
    big = {**entry, "segments": [{"rows": 30_000}]}
    assert segments.needs_compaction(big)
    assert not segments.needs_compaction({**big, "base_rows": 200_000})
    assert not segments.needs_compaction({**entry, "base_rows": 10, "segments": [{"rows": 9}]})


def test_a_damaged_segment_is_refused_and_rebuilt(spark, tmp_path):
    from levelflow.engine.incremental.state.repair import check_state, rebuild

    write_facts(tmp_path / "f", {"edge": {(1, 2), (2, 3)}})
    (tmp_path / "p.dl").write_text(DEGREE)
    state = tmp_path / "state"
    s = IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f", state,
                                     mode="incremental")
    s.insert("edge", (3, 4))
    s.commit(compact=False)
    s.close()
    victim = sorted((state / "epochs" / "1" / "seg" / "rel" / "path").glob("*.parquet"))[0]
    victim.write_bytes(b"")
    with pytest.raises(StateError) as e:
        IncrementalSession.open(spark, state)
    assert "\n" not in str(e.value) and "segment of epoch 1" in str(e.value)
    ok, lines, _ = check_state(StateDir(state))
    assert not ok and any(str(victim) in line for line in lines)
    rebuild(spark, StateDir(state))  # the base facts' segments are whole
    again = IncrementalSession.open(spark, state)
    assert rows_of(again.relation("path")) == {(1, 2), (2, 3), (3, 4), (1, 3), (2, 4), (1, 4)}


def test_a_format_4_state_is_still_read(spark, tmp_path):
    write_facts(tmp_path / "f", {"edge": {(1, 2)}})
    (tmp_path / "p.dl").write_text(DEGREE)
    state = tmp_path / "state"
    IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f", state,
                                     mode="incremental").close()
    path = state / "epochs" / "0" / "manifest.json"
    data = json.loads(path.read_text())
    data["format"] = "levelflow-state/4"
    data.pop("manifest_sha256")  # as written then: no checksums, CURRENT the number alone
    (state / "CURRENT").write_text("0\n")
    for table in (data["relations"], data["base"]):
        for info in table.values():
            info.pop("base_rows", None)
            info.pop("segments", None)
    path.write_text(json.dumps(data))
    s = IncrementalSession.open(spark, state)
    s.insert("edge", (2, 3))
    s.commit()
    assert rows_of(IncrementalSession.open(spark, state).relation("path")) == {
        (1, 2), (2, 3), (1, 3)}


# -- kills -------------------------------------------------------------------------------------

# Each killed `update` is a process of its own. Its epoch is tiny, so it runs in the driver and
# starts no JVM (a JVM start per kill made this module's setup a minute of CPU); the points it
# dies at are the state's own steps, the same in the driver as after Spark jobs. A process
# killed while its Spark jobs ran is tested in tests/test_serve.py.
KILLER = """
import os, signal, sys
from levelflow.engine.incremental.state import compact
from levelflow.engine.incremental.state import directory as state

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

point = sys.argv[1]
if point == "write":  # the epoch's segments are written, not yet read back nor named
    state.StateDir.read_back = die
elif point == "switch":  # the epoch is complete on disk, CURRENT not yet replaced
    state.StateDir.switch = die
else:  # the commit is done; compaction (forced) moved its bases in, the manifest is not renamed
    real = compact.compact
    compact.compact = lambda *a, **k: real(*a, **{**k, "force": True, "before_swap": die})
from levelflow.cli import main
main(sys.argv[2:])
"""
POINTS = ("write", "switch", "compact")
EDGES = {(1, 2), (2, 3), (3, 1)}


def start_killed_update(spark, tmp: Path, point: str) -> subprocess.Popen:
    """Bootstrap a state with a segment chain in `tmp`; start `levelflow update` on it in a
    process that SIGKILLs itself at `point`."""
    write_facts(tmp / "f", {"edge": EDGES})
    (tmp / "p.dl").write_text(DEGREE)
    s = IncrementalSession.bootstrap(spark, tmp / "p.dl", tmp / "f", tmp / "state",
                                     mode="incremental")
    s.insert("edge", (3, 4))
    s.commit(compact=False)  # a chain for the compaction to fold
    s.close()
    (tmp / "more.diff").write_text("+edge(4,5)\n-edge(1,2)\n")
    return subprocess.Popen(
        [sys.executable, "-c", KILLER, point, "update", str(tmp / "state"), "--insert",
         str(tmp / "more.diff"), "--strategy", "incremental"],
        cwd=tmp, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def killed(spark, tmp_path_factory):
    """Return {point: (tmp dir, exit code, stderr)} of the three killed updates, run at once."""
    procs = {}
    try:
        for point in POINTS:  # each starts while the next state is bootstrapped
            tmp = tmp_path_factory.mktemp(f"kill-{point}")
            procs[point] = tmp, start_killed_update(spark, tmp, point)
        done = {}
        for p, (tmp, proc) in procs.items():
            _, err = proc.communicate(timeout=300)
            done[p] = (tmp, proc.returncode, err)
        return done
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_loses_nothing(spark, killed, point):
    tmp, code, stderr = killed[point]
    state = tmp / "state"
    assert code == -signal.SIGKILL, stderr[-2000:]
    edges = EDGES - {(1, 2)} | {(3, 4), (4, 5)} if point == "compact" else EDGES | {(3, 4)}
    assert StateDir(state).current() == (2 if point == "compact" else 1)
    pt = build_tasks(parse_program(DEGREE, "p.dl"))
    again = IncrementalSession.open(spark, state)  # verifies every file it reads
    check_against_reference(again, pt, {"edge": edges}, tmp / "ref1")
    again.insert("edge", (9, 9))  # and the next epoch, with its compaction, works
    again.commit()
    again.compact(force=True)
    again.close()
    final = IncrementalSession.open(spark, state)
    check_against_reference(final, pt, {"edge": edges | {(9, 9)}}, tmp / "ref2")
    final.close()
