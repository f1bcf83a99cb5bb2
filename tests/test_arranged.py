"""Epochs of recursive tasks run where their state lives (engine/incremental/arranged*.py).

The in-worker DRed (local_dred.update) against a from-scratch fixpoint over random epochs, with
packed keys and without; then through Spark: one job per task per epoch, a missing executor
copy re-shipped, partitioned shares, and a restart, each against the naive reference.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.incremental.backends.worker.dred_job import Held
from levelflow.engine.incremental.strategies.arranged import (
    RANK,
    Arranged,
    applied,
    arrange,
    changed,
    packed,
)
from levelflow.engine.incremental.strategies.dred_polars import Inputs, update
from levelflow.engine.plans.fixpoint import run_task
from levelflow.tasks import build_tasks, parse_program

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402
from test_incremental_properties import rows_of, write_facts  # noqa: E402

EDGE = ".decl edge(x:number, y:number)\n.input edge\n"
PROGRAMS = {
    "linear": EDGE + """.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
""",
    "doubling": EDGE + """.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), path(y, z).
""",
    "mutual": EDGE + """.decl a(x:number, y:number)
.decl b(x:number, y:number)
a(x, y) :- edge(x, y), x < y.
b(x, y) :- a(x, y).
b(x, z) :- a(x, y), b(y, z).
a(x, z) :- b(x, y), edge(y, z), x != z.
a(1, 2).
""",
}
TC = EDGE + """.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl cyclic(x:number)
cyclic(x) :- path(x, x).
"""


def _frame(edges) -> pl.DataFrame:
    return pl.DataFrame(sorted(edges), schema={"c0": pl.Int64, "c1": pl.Int64}, orient="row")


def _epochs(rng: random.Random, edges: set, nodes: int, count: int):
    """Yield (removed, added, new edges) of random mixed epochs."""
    for _ in range(count):
        gone = set(rng.sample(sorted(edges), min(rng.choice([0, 1, 3, 8]), len(edges))))
        fresh = {(rng.randrange(nodes), rng.randrange(nodes))
                 for _ in range(rng.choice([0, 1, 4]))} - edges
        edges = (edges - gone) | fresh
        yield gone, fresh, edges


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("offset", [0, 1 << 40])  # 2^40: tuples that do not pack in 63 bits
@pytest.mark.parametrize("recompute", [False, True])  # large deletions: DRed, or recomputed
@pytest.mark.parametrize("tombstones", [0.0, 0.9])  # removed rows compacted at once, or kept
def test_local_dred_matches_from_scratch(name, offset, recompute, tombstones, monkeypatch):
    from levelflow.engine.incremental.strategies import arranged
    from levelflow.engine.incremental.strategies import dred_polars as local_dred

    monkeypatch.setattr(arranged, "_CHUNKS", 4)  # appended chunks copied into one, too
    monkeypatch.setattr(arranged, "_TOMBSTONES", tombstones)
    held_tombstones = []
    recompute_rows = local_dred.RECOMPUTE_ROWS if recompute else 0
    recomputed = []
    monkeypatch.setattr(local_dred, "_recomputed",
                        lambda *a, f=local_dred._recomputed: recomputed.append(1) or f(*a))
    program = parse_program(PROGRAMS[name])
    task = max(build_tasks(program).tasks, key=lambda t: len(t.rules))
    rules = tuple(r for r in task.rules if r.body)
    facts = {"a": _frame({(1, 2)})} if "a" in task.relations else {}
    rng = random.Random(len(name) + offset)
    nodes = 25

    def shifted(edges):
        return _frame({(a + offset, b + offset) for a, b in edges})

    def scratch(edges):
        out = run_task(rules, task.relations, program.decls, {"edge": shifted(edges)}, facts)
        return {n: out.relation(n, ranked=True) for n in task.relations}

    edges = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(45)}
    state = arrange(scratch(edges))
    assert all((state.keys[n] is None) == bool(offset) for n in task.relations)
    for gone, fresh, now in _epochs(rng, edges, nodes, 20):
        edges = now
        inp = Inputs(rules, task.relations, program.decls, {"edge": shifted(edges)},
                     {"edge": shifted(fresh)}, {"edge": shifted(gone)}, facts, {}, {})
        out = update(state, inp, recompute_rows)
        expected = scratch(edges)
        for n in task.relations:
            got = out.state.live(n)
            assert set(got.drop(RANK).rows()) == set(expected[n].drop(RANK).rows()), n
            assert got.height == got.drop(RANK).unique().height == out.state.size(n), n
            _assert_index(out.state, n)
            # What came back is the change: old - removed + added is the new state.
            old = set(state.live(n).rows())
            assert (old - set(out.removed[n].rows())) | set(out.added[n].rows()) == \
                set(got.rows())
        # A process holding the old state rebuilds the new one from the stored change.
        rebuilt = applied(state, out.removed, out.added)
        for n in task.relations:
            assert set(rebuilt.live(n).rows()) == set(out.state.live(n).rows()), n
            _assert_index(rebuilt, n)
        state = out.state
        held_tombstones += [state.size(n) < state.ranked[n].height for n in task.relations]
    assert bool(recomputed) == recompute  # 8 of ~45 edges deleted: over RECOMPUTE_FRACTION
    # Tombstones exist where the tuples pack and they are not compacted at once.
    assert any(held_tombstones) == (tombstones > 0 and not offset) or recompute


def _assert_index(state, n: str) -> None:
    """Each sorted key of a packed relation names the row that holds its tuple."""
    keys, rows, ranked = state.keys[n], state.rows[n], state.ranked[n]
    if keys is not None:
        in_rows = packed(ranked.drop(RANK))
        assert (np.diff(keys) > 0).all(), n
        assert len(keys) == ranked.height if rows is None else len(np.unique(rows)) == len(keys)
        assert (in_rows[rows if rows is not None else slice(None)] == keys).all(), n


def _tc_session(spark, tmp_path, edges, **options):
    (tmp_path / "tc.dl").write_text(TC)  # a file: a state records the program's text
    write_facts(tmp_path / "f0", {"edge": edges})
    # On Spark: the executors keep the shares here (the driver would, for inputs this small:
    # tests/test_driver_epochs.py).
    options.setdefault("driver_rows", None)
    session = IncrementalSession.bootstrap(spark, tmp_path / "tc.dl", tmp_path / "f0",
                                           mode="incremental", **options)
    return session, session.pt


def _commit(session, gone, fresh):
    """Return the result of an epoch removing and inserting edges."""
    for e in gone:
        session.remove("edge", e)
    for e in fresh:
        session.insert("edge", e)
    return session.commit()


def _check(session, pt, edges, tmp: Path) -> None:
    write_facts(tmp, {"edge": edges})
    ref = naive_datalog.evaluate(pt, tmp)
    for name in ("path", "cyclic"):
        assert rows_of(session.relation(name)) == ref[name], name
        assert session.size(name) == len(ref[name]), name


@pytest.mark.parametrize("recompute", [True, False])  # deletions recomputed, or DRed
def test_one_spark_job_per_epoch_for_the_recursive_task(spark, tmp_path, monkeypatch,
                                                        recompute):
    from levelflow.engine.incremental.strategies import dred_polars as local_dred

    if not recompute:  # the workers get it with the epoch's Spec
        monkeypatch.setattr(local_dred, "RECOMPUTE_ROWS", 0)
    rng = random.Random(3)
    edges = {(rng.randrange(30), rng.randrange(30)) for _ in range(70)}
    session, pt = _tc_session(spark, tmp_path, edges)
    jobs = []
    for k, (gone, fresh, now) in enumerate(_epochs(rng, edges, 30, 5), 1):
        edges = now
        result = _commit(session, gone, fresh)
        _check(session, pt, edges, tmp_path / f"ref{k}")
        if "path" in result.strategies:
            assert result.arranged == ("path",)
            jobs.append(result.spark_jobs["path"])
    # The bootstrap left the state on the executors: every epoch, the first too, is one job
    # (a miss would take a second one to ship the state).
    assert len(jobs) >= 2 and set(jobs) == {1}


def test_small_epochs_run_direct_and_keep_their_log_in_the_driver(spark, tmp_path, monkeypatch):
    """Small epochs carry their input in the job and bring the change back to the driver; the
    Spark-side copy merges those changes into one table (to a limit, then unions and
    compaction), and a miss after many epochs is recovered from that copy."""
    from levelflow.engine.incremental.backends.worker import dred_job as arranged

    monkeypatch.setattr(arranged, "DRIVER_LOG_ROWS", 40)  # merged, then unioned pieces
    monkeypatch.setattr(arranged, "LOG_PIECES", 3)  # and compacted
    direct = []
    run_direct = arranged._run_direct
    monkeypatch.setattr(arranged, "_run_direct",
                        lambda *a: direct.append(1) or run_direct(*a))
    rng = random.Random(11)
    edges = {(rng.randrange(25), rng.randrange(25)) for _ in range(45)}
    session, pt = _tc_session(spark, tmp_path, edges)
    for k in range(1, 13):
        gone = set(rng.sample(sorted(edges), 2))
        fresh = {(rng.randrange(25), rng.randrange(25)) for _ in range(2)} - edges
        edges = (edges - gone) | fresh
        for e in gone:
            session.remove("edge", e)
        for e in fresh:
            session.insert("edge", e)
        if k == 12:  # a version no executor has: shipped from the Spark-side copy
            held = session.snap.arranged["path"]
            session.snap.arranged["path"] = Held(held.lineage, "9999999999-none", held.parts,
                                                 held.logs)
        session.commit()
        if k % 4 == 0:
            _check(session, pt, edges, tmp_path / f"ref{k}")
    assert len(direct) == 12


@pytest.mark.parametrize("driver_rows", [100_000, 10])  # the log held in the driver, or not
def test_a_recomputed_row_removed_before_comes_back_in_the_spark_side_copy(
        spark, tmp_path, monkeypatch, driver_rows):
    """Every deletion recomputes its share, ranked by the recompute's own rounds: a (tuple,
    rank) row an earlier epoch removed comes back, and the Spark-side copy must hold it."""
    from levelflow.engine.incremental.backends.worker import dred_job as arranged
    from levelflow.engine.incremental.strategies import dred_polars as local_dred

    monkeypatch.setattr(local_dred, "RECOMPUTE_FRACTION", 0.0)
    monkeypatch.setattr(arranged, "DRIVER_LOG_ROWS", driver_rows)
    # Every re-ranked row travels (a closure's would stay in its worker: closure_labels.py).
    monkeypatch.setattr(arranged, "labelled", lambda *a: False)
    cancelled = []

    def spy(added, removed):
        out = cancel(added, removed)
        cancelled.append(out[0] is not added)
        return out
    cancel = arranged._cancelled
    monkeypatch.setattr(arranged, "_cancelled", spy)
    rng = random.Random(13)
    edges = {(rng.randrange(15), rng.randrange(15)) for _ in range(30)}
    session, pt = _tc_session(spark, tmp_path, edges)
    # 5 epochs: rows removed earlier come back in the 1st and 3rd recomputes (measured)
    for k, (gone, fresh, now) in enumerate(_epochs(rng, edges, 15, 5), 1):
        edges = now
        _commit(session, gone, fresh)
        _check(session, pt, edges, tmp_path / f"ref{k}")
    assert sum(cancelled) >= 2


def test_a_missing_executor_copy_is_shipped_again(spark, tmp_path):
    rng = random.Random(5)
    edges = {(rng.randrange(20), rng.randrange(20)) for _ in range(40)}
    session, pt = _tc_session(spark, tmp_path, edges)
    for k, (gone, fresh, now) in enumerate(_epochs(rng, edges, 20, 3), 1):
        edges = now
        held = session.snap.arranged.get("path")
        if held is not None:  # a version no executor has: every share misses
            session.snap.arranged["path"] = Held(held.lineage, "9999999999-none", held.parts)
        for e in gone:
            session.remove("edge", e)
        for e in fresh:
            session.insert("edge", e)
        result = session.commit()
        _check(session, pt, edges, tmp_path / f"ref{k}")
        if "path" in result.strategies and held is not None:
            # The miss, then the job with the state shipped (plus a job per broadcast of
            # removed rows in the Spark-side copy that job reads).
            assert result.spark_jobs["path"] >= 2


def test_partitioned_shares_and_a_restart(spark, tmp_path, monkeypatch):
    from levelflow.engine.plans import planner

    monkeypatch.setattr(planner, "PARTITION_MIN_ROWS", 1)  # small inputs go partitioned too
    rng = random.Random(9)
    edges = {(rng.randrange(40), rng.randrange(40)) for _ in range(90)}
    state = tmp_path / "state"
    session, pt = _tc_session(spark, tmp_path, edges, statedir=state)
    epochs = list(_epochs(rng, edges, 40, 4))
    for k, (gone, fresh, now) in enumerate(epochs, 1):
        edges = now
        if k == 3:  # close, open, continue: the executors' copy is not trusted across opens
            old = session.snap.arranged["path"].lineage
            session.close()
            session = IncrementalSession.open(spark, state, mode="incremental",
                                              driver_rows=None)
            assert session.snap.arranged["path"].lineage != old  # shipped anew by open
        for e in gone:
            session.remove("edge", e)
        for e in fresh:
            session.insert("edge", e)
        session.commit()
        _check(session, pt, edges, tmp_path / f"ref{k}")
        held = session.snap.arranged.get("path")
        assert held is None or held.parts >= 2
    session.close()


def test_a_counted_task_over_driver_held_changes_counts_in_the_driver(spark, tmp_path,
                                                                         monkeypatch):
    """`loop` reads only path's change (back in the driver from a direct epoch) and its own
    facts: its count changes are summed in Polars and applied to the counts the driver keeps
    (by the share, which keeps no copy of path; where they sum to nothing, the share is left
    as it is), no job running either way, and every epoch equals the reference, counts
    crossing zero both ways included."""
    from levelflow.engine.incremental.backends.worker import counting_share

    program = EDGE + """.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl loop(x:number)
.input loop
loop(x) :- path(x, x).
"""
    (tmp_path / "p.dl").write_text(program)
    edges, loops = {(1, 2), (2, 3), (3, 4)}, {(7,)}
    write_facts(tmp_path / "f0", {"edge": edges, "loop": loops})
    session = IncrementalSession.bootstrap(spark, tmp_path / "p.dl", tmp_path / "f0",
                                           mode="incremental")
    local = []
    summed = counting_share.count_changes  # what the share the driver runs sums
    monkeypatch.setattr(counting_share, "count_changes",
                        lambda *a: local.append(out := summed(*a)) or out)
    epochs = [  # (edges in, out, loop facts in, out), whether loop's tuples, counts change
        ({(4, 5)}, set(), set(), set(), False, False),  # new paths, none a loop
        ({(4, 1)}, set(), set(), set(), True, True),  # a cycle: 1..4 loop
        (set(), set(), {(1,)}, set(), False, True),  # a fact for a derived tuple: count 2
        (set(), {(4, 1)}, set(), set(), True, True),  # the cycle goes; 1 stays, by its fact
        (set(), set(), set(), {(7,), (1,)}, True, True),
        ({(5, 6)}, set(), set(), set(), False, False),  # the share left at epoch 5's counts
        ({(6, 1)}, set(), set(), set(), True, True),  # and found there
    ]
    for k, (ins, outs, loop_in, loop_out, changes, counts) in enumerate(epochs, 1):
        edges, loops = (edges | ins) - outs, (loops | loop_in) - loop_out
        for e in ins:
            session.insert("edge", e)
        for e in outs:
            session.remove("edge", e)
        for t in loop_in:
            session.insert("loop", t)
        for t in loop_out:
            session.remove("loop", t)
        result = session.commit()
        write_facts(tmp_path / f"ref{k}", {"edge": edges, "loop": loops})
        ref = naive_datalog.evaluate(session.pt, tmp_path / f"ref{k}")
        for name in ("path", "loop"):
            assert rows_of(session.relation(name)) == ref[name], (k, name)
        ran = sum(c for *_, c in epochs[:k])
        assert len(local) == ran, k  # the share summed them, where they sum to something
        assert ("loop" in result.deltas) == changes, k
        assert result.strategies["loop"] == "counting", k
        if counts:
            assert any(df.height for df in local[-1].values()), k
        assert result.spark_jobs.get("loop", 0) == 0, k  # its counts are kept in the driver


def test_tuples_that_stop_packing_leave_the_removed_ones_out():
    """A state with tombstones (removed rows still in the frame) that gains a tuple out of the
    packed range is rebuilt from its live rows, not from every row."""
    ranked = pl.DataFrame({"c0": [1, 2, 3, 4], "c1": [5, 6, 7, 8], RANK: [0, 0, 1, 1]})
    state = arrange({"p": ranked})
    state = applied(state, {"p": ranked[:1]}, {"p": ranked.clear()})  # one tombstone
    assert state.ranked["p"].height == 4 and state.size("p") == 3
    far = pl.DataFrame({"c0": [-1], "c1": [5], RANK: [2]})
    state = applied(state, {"p": ranked.clear()}, {"p": far})
    assert sorted(state.live("p").rows()) == [(-1, 5, 2), (2, 6, 0), (3, 7, 1), (4, 8, 1)]


@pytest.mark.parametrize("seed", range(3))
def test_changed_at_known_positions_is_applied(seed):
    """arranged.changed (the positions of the tuples gone known) leaves the state applied
    leaves, over a state that already holds tombstones and appended chunks."""
    rng = np.random.default_rng(seed)

    def frame(keys, rank):
        return pl.DataFrame({"c0": keys // 100, "c1": keys % 100,
                             RANK: np.full(len(keys), rank)})
    state = arrange({"p": frame(np.unique(rng.integers(0, 10_000, 500)), 1)})
    for epoch in range(2, 6):
        keys = state.keys["p"]
        gone = np.sort(rng.choice(len(keys), rng.integers(0, 40), replace=False))
        added = frame(np.unique(rng.integers(0, 10_000, 30)), epoch)
        added = added.filter(pl.Series(~np.isin(packed(added.drop(RANK)), keys)))
        removed = state.live("p").filter(
            pl.Series(np.isin(packed(state.live("p").drop(RANK)), keys[gone])))
        want = applied(state, {"p": removed}, {"p": added})
        state = changed(state, "p", gone, added)
        assert np.array_equal(state.keys["p"], want.keys["p"])
        assert state.live("p").sort("c0", "c1").equals(want.live("p").sort("c0", "c1"))
        assert state.top() == Arranged(state.ranked, state.keys, state.rows).top() == epoch


@pytest.mark.parametrize("seed", range(4))
def test_a_log_collapsed_when_read_holds_every_epoch_in_order(seed):
    """rows_then's steps, folded when first read, give the rows applied epoch by epoch (a
    (tuple, rank) row removed and added back later, or added and removed later); nothing is
    read before then, and the row count is known without reading."""
    import pyarrow as pa
    from pyspark.sql.types import LongType, StructField, StructType

    from levelflow.engine.incremental.backends import driver_rows as dr

    rng = random.Random(seed)
    schema = StructType([StructField("c0", LongType()), StructField(RANK, LongType())])

    def table(rows):
        return pa.table({"c0": [r[0] for r in rows], RANK: [r[1] for r in rows]},
                        schema=pa.schema([("c0", pa.int64()), (RANK, pa.int64())]))
    now = {(rng.randrange(30), rng.randrange(3)) for _ in range(20)}
    df = dr.frame_of_table(None, table(sorted(now)), schema)
    reads = []
    real = dr._Then.__call__
    for k in range(10):
        gone = set(rng.sample(sorted(now), min(len(now), rng.choice([0, 1, 3]))))
        back = {(rng.randrange(30), rng.randrange(3)) for _ in range(rng.choice([0, 2, 4]))}
        added = back - now  # maybe a row an earlier epoch removed, back at its rank
        now = (now - gone) | added
        df = dr.rows_then(df, table(sorted(added)) if added else None,
                          table(sorted(gone)) if gone else None)
        assert dr.held_rows(df) == len(now), k
        if k % 4 == 3:
            got = real(dr._ROWS[df]._read)
            reads.append(k)
            assert set(zip(got["c0"].to_pylist(), got[RANK].to_pylist(), strict=True)) == now, k
            assert got.num_rows == len(now), k
    assert reads == [3, 7]
    assert dr.unread_file(df) is False and dr._ROWS[df]._table is None  # not read yet
    got = dr.rows_of(df)
    assert sorted(zip(got["c0"].to_pylist(), got[RANK].to_pylist(), strict=True)) == sorted(now)
