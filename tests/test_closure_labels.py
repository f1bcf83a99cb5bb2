"""A left-linear closure's stored ranks are labels: its worker sends the net change only
(strategies/closure_labels.py).

First in one process: a worker's epochs against a stored copy kept as the Spark-side log keeps
it (a removed row must match a stored (tuple, rank) row exactly), against a from-scratch
fixpoint; a stored copy shipped back is ranked anew. Then through Spark: epochs with deletions
on cycles, a reopened state, and the Spark-side DRed refused over labels.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import polars as pl
import pytest

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.incremental.backends.worker import dred_job
from levelflow.engine.incremental.state.directory import StateDir
from levelflow.engine.incremental.strategies.arranged import RANK, arrange
from levelflow.engine.incremental.strategies.closure_labels import labelled, ranked_anew, sent
from levelflow.engine.incremental.strategies.dred_polars import Inputs, update
from levelflow.engine.plans.fixpoint import run_task
from levelflow.engine.plans.planner import Plan

sys.path.insert(0, str(Path(__file__).parent))
from test_arranged import _check, _commit, _tc_session  # noqa: E402
from test_closure_epoch import TC, _assert_ranks_valid, _frame, _rings, _task  # noqa: E402


def _stored_after(stored: dict, out) -> None:
    """Apply a sent change to a stored copy {tuple: rank}: each removed row must be a stored
    row, rank and all; each added tuple must be new."""
    for *t, r in out.removed["path"].rows():
        assert stored.pop(tuple(t), None) == r, (t, r)
    for *t, r in out.added["path"].rows():
        assert tuple(t) not in stored, t
        stored[tuple(t)] = r


def _labels_hold(stored: dict, state, labels) -> None:
    """The stored copy is the worker's tuples, each at its label: the rank where none."""
    live = {tuple(t): r for *t, r in state.live("path").rows()}
    assert stored.keys() == live.keys()
    keys, vals = labels.get("path", (None, None))
    label = {} if keys is None else dict(zip(keys.tolist(), vals.tolist(), strict=True))
    for (a, b), r in live.items():
        assert stored[(a, b)] == label.get(a << 31 | b, r), (a, b)
    assert all(label[k] != live[(k >> 31, k & (1 << 31) - 1)] for k in label)


def random_epoch(rng: random.Random, edges: set, nodes: int, deletions: list, program, task,
                 rules, share) -> tuple[set, set, set, Inputs]:
    """Return an epoch's edges gone (one of `deletions` many) and new (0 or 2), the edges
    after it and the update's inputs."""
    gone = set(rng.sample(sorted(edges), min(len(edges), rng.choice(deletions))))
    fresh = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(rng.choice([0, 2]))}
    fresh -= edges
    now = (edges - gone) | fresh
    inp = Inputs(rules, task.relations, program.decls, {"edge": _frame(now)},
                 {"edge": _frame(fresh)}, {"edge": _frame(gone)}, {}, {}, {}, share)
    return gone, fresh, now, inp


@pytest.mark.parametrize("seed", range(4))
def test_the_stored_copy_follows_by_net_changes_at_labels(seed):
    program, task, rules = _task(TC)
    rng = random.Random(seed)
    edges = _rings(rng, rng.choice([2, 3]), rng.choice([5, 8]))
    nodes = 1 + max(max(e) for e in edges)
    share = (lambda name, df: df.filter(pl.col("c0") % 2 == 0)) if seed % 2 else None

    def scratch(now):
        out = run_task(rules, task.relations, program.decls, {"edge": _frame(now)}, {}, share)
        return out.relation("path", ranked=True)

    state = arrange({"path": scratch(edges)})
    stored = {tuple(t): r for *t, r in state.live("path").rows()}
    labels, relabelled = {}, 0
    for epoch in range(14):
        gone, fresh, now, inp = random_epoch(rng, edges, nodes, [1, 2, 4], program, task,
                                             rules, share)
        # Epochs 0-9 over tables or DRed; later ones may recompute the small share.
        out = update(state, inp, recompute_rows=0 if epoch < 10 else 10**6)
        sending, labels = sent(state, out, labels)
        removed = set(sending.removed["path"].drop(RANK).rows())
        assert not removed & set(sending.added["path"].drop(RANK).rows())  # net only
        _stored_after(stored, sending)
        assert set(stored) == set(scratch(now).drop(RANK).rows())
        _assert_ranks_valid(out.state.live("path"), now)
        _labels_hold(stored, out.state, labels)
        relabelled += bool(labels)
        state, edges = out.state, now
        if epoch == 6:  # shipped back from the stored copy: ranked anew from its edges
            shipped = pl.DataFrame([(*t, r) for t, r in stored.items()],
                                   schema={"c0": pl.Int64, "c1": pl.Int64, RANK: pl.Int64},
                                   orient="row")
            state, labels = ranked_anew(arrange({"path": shipped}), rules, task.relations,
                                        program.decls, _frame(edges), share)
            _assert_ranks_valid(state.live("path"), edges)
            _labels_hold(stored, state, labels)
    assert relabelled  # labels did differ from ranks


def test_tuples_that_stop_packing_move_every_label_to_its_rank():
    program, task, rules = _task(TC)
    # (0, 2) is found over 0 -> 1 -> 2, then over 0 -> 3 -> 4 -> 2: re-ranked.
    edges = {(0, 1), (1, 2), (0, 3), (3, 4), (4, 2), (2, 0)}
    out = run_task(rules, task.relations, program.decls, {"edge": _frame(edges)}, {})
    state = arrange({"path": out.relation("path", ranked=True)})
    stored = {tuple(t): r for *t, r in state.live("path").rows()}
    gone = {(1, 2)}
    inp = Inputs(rules, task.relations, program.decls, {"edge": _frame(edges - gone)},
                 {"edge": _frame(set())}, {"edge": _frame(gone)}, {}, {}, {})
    out = update(state, inp, recompute_rows=0)
    sending, labels = sent(state, out, {})
    assert labels  # re-ranked tuples kept their stored ranks
    _stored_after(stored, sending)
    state, edges = out.state, edges - gone
    fresh = {(-1, 0)}  # a negative node: the tuples no longer pack
    inp = Inputs(rules, task.relations, program.decls, {"edge": _frame(edges | fresh)},
                 {"edge": _frame(fresh)}, {"edge": _frame(set())}, {}, {}, {})
    out = update(state, inp, recompute_rows=0)
    sending, labels = sent(state, out, labels)
    assert labels == {}
    removed = sending.removed["path"]
    for *t, r in removed.rows():  # re-ranked pairs come as removed and added: apply both
        assert stored.pop(tuple(t)) == r
    for *t, r in sending.added["path"].rows():
        stored[tuple(t)] = r
    assert stored == {tuple(t): r for *t, r in out.state.live("path").rows()}


def test_which_tasks_keep_labels():
    program, task, rules = _task(TC)
    decls = program.decls
    assert labelled(rules, ("path",), decls, {}, {})
    assert not labelled(rules, ("path",), decls, {"path": [(1, 2)]}, {})  # its own facts
    assert not labelled(rules, ("path",), decls, {}, {"path": None})  # an input too
    symbols = TC.replace("number", "symbol")
    program, task, rules = _task(symbols)
    assert not labelled(rules, ("path",), program.decls, {}, {})
    doubling = TC.replace("path(x, z) :- path(x, y), edge(y, z).",
                          "path(x, z) :- path(x, y), path(y, z).")
    program, task, rules = _task(doubling)
    assert not labelled(rules, ("path",), program.decls, {}, {})


def _ring_edges(rng: random.Random) -> set:
    edges = {(i, (i + 1) % 10) for i in range(10)} | {(10 + i, 10 + (i + 1) % 10)
                                                       for i in range(10)}
    return edges | {(rng.randrange(10), rng.randrange(10)) for _ in range(4)} | {(4, 14)}


def test_a_closure_sends_net_changes_and_survives_reopen_and_spark_side_dred(
        spark, tmp_path, monkeypatch):
    rng = random.Random(11)
    edges = _ring_edges(rng)
    state = tmp_path / "state"
    session, pt = _tc_session(spark, tmp_path, edges, statedir=state)
    k = 0
    for gone, fresh in [([(2, 3)], []), ([(13, 14)], [(5, 2)]), ([(7, 8), (0, 1)], [])]:
        edges = (edges - set(gone)) | set(fresh)
        result = _commit(session, gone, fresh)
        k += 1
        _check(session, pt, edges, tmp_path / f"ref{k}")
        assert result.strategies["path"] == "dred"
        d = result.deltas["path"]
        assert (d.removed_rows, d.added_rows) == (len(rows := _set(d.removed)), len(_set(d.added)))
        assert not rows & _set(d.added)
    assert "path" in session.snap.labelled  # the ring's deletions re-ranked tuples
    session.close()
    assert StateDir(state).manifest()["labelled"] == ["path"]
    # Reopened: the stored copy is shipped to a worker, whose ranks are its labels (stale):
    # a deletion runs over bit matrices (closure_bits), which need no ranks.
    session = IncrementalSession.open(spark, state, mode="incremental", driver_rows=None)
    for gone, fresh in [([], [(9, 3)]), ([(4, 5)], []), ([(16, 17)], [])]:
        edges = (edges - set(gone)) | set(fresh)
        result = _commit(session, gone, fresh)
        k += 1
        _check(session, pt, edges, tmp_path / f"ref{k}")
        if not gone:  # ranked anew, the worker holds the labels that differ from BFS layers
            assert "path" in session.snap.labelled
    # On the Spark side (the global plan) a deletion over labels recomputes the task; then
    # the ranks are ranks again and DRed runs there.
    monkeypatch.setattr(dred_job, "fitting_plan", lambda *a, **o: Plan("global", "test"))
    for want in ("scratch", "dred"):
        gone = [sorted(e for e in edges if e[0] >= 10 and e[1] >= 10)[0]]
        edges -= set(gone)
        result = _commit(session, gone, [])
        k += 1
        _check(session, pt, edges, tmp_path / f"ref{k}")
        assert result.strategies["path"] == want
        assert "path" not in session.snap.labelled
    session.close()


def _set(frame) -> set:
    return {tuple(r) for r in frame.collect()}


def test_a_process_catching_up_on_stored_changes_rebuilds_the_labels():
    """Another Python worker applies an epoch's stored change (dred_share._applied): it must
    reach the labels the worker that ran the epoch sent by."""
    from levelflow.engine.incremental.backends.worker.dred_share import RankedShare, _applied

    program, task, rules = _task(TC)
    edges = {(0, 1), (1, 2), (0, 3), (3, 4), (4, 2), (2, 0), (2, 5), (5, 0)}
    out = run_task(rules, task.relations, program.decls, {"edge": _frame(edges)}, {})
    entry = RankedShare(arrange({"path": out.relation("path", ranked=True)}), pl.Series([]),
                        {"edge": _frame(edges)})
    labels, seen = {}, []
    for gone in ({(1, 2)}, {(5, 0)}, {(3, 4)}):
        edges -= gone
        inp = Inputs(rules, task.relations, program.decls, {"edge": _frame(edges)},
                     {"edge": _frame(set())}, {"edge": _frame(gone)}, {}, {}, {})
        out = update(entry.state, inp, recompute_rows=0)
        _, labels = sent(entry.state, out, labels)
        entry = _applied(entry, (out.removed, out.added, inp.lower_plus, inp.lower_minus, True,
                                  False))
        assert set(entry.state.live("path").rows()) == set(out.state.live("path").rows())
        assert entry.labels.keys() == labels.keys()
        for n in labels:
            assert (entry.labels[n][0] == labels[n][0]).all()
            assert (entry.labels[n][1] == labels[n][1]).all()
        seen.append(bool(labels))
    assert any(seen)
