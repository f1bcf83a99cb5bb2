"""A labelled closure's deletions over bit matrices of its condensation (closure_bits.py),
checked against a plain closure, a from-scratch run and a stored copy kept at labels; and the
share's epoch around it (dred_share._epoch): stale ranks are ranked anew before DRed deletes.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from levelflow.engine.incremental.backends.worker.dred_share import RankedShare, _applied, _epoch
from levelflow.engine.incremental.strategies import closure_bits
from levelflow.engine.incremental.strategies.arranged import RANK, arrange
from levelflow.engine.incremental.strategies.closure_bits import epoch, reach_matrix
from levelflow.engine.incremental.strategies.dred_polars import RECOMPUTE_ROWS, Inputs
from levelflow.engine.plans.fixpoint import run_task

sys.path.insert(0, str(Path(__file__).parent))
from test_closure_epoch import TC, _assert_ranks_valid, _frame, _rings, _task  # noqa: E402
from test_closure_labels import _labels_hold, _stored_after, random_epoch  # noqa: E402


def _closure(edges: set) -> set:
    """Return the transitive closure by plain iteration to a fixpoint."""
    pairs = set(edges)
    while True:
        more = {(a, d) for a, b in pairs for c, d in edges if b == c} - pairs
        if not more:
            return pairs
        pairs |= more


@pytest.mark.parametrize("seed", range(6))
def test_the_reach_matrix_is_the_closure(seed, monkeypatch):
    if seed % 2:  # a successor's row gathered at a time
        monkeypatch.setattr(closure_bits, "GATHER_BYTES", 8)
    rng = random.Random(seed)
    n = rng.choice([1, 5, 40, 70, 130])  # one word, several, a partial last one
    edges = {(rng.randrange(n), rng.randrange(n)) for _ in range(rng.choice([0, n, 2 * n]))}
    if edges:
        src, dst = (np.array(c) for c in zip(*sorted(edges), strict=True))
    else:
        src = dst = np.empty(0, np.int64)
    bits = np.unpackbits(reach_matrix(src, dst, n).view(np.uint8), axis=1, count=n,
                         bitorder="little")
    assert {(int(a), int(b)) for a, b in zip(*np.nonzero(bits), strict=True)} == _closure(edges)


def _scratch(program, task, rules, edges, share=None):
    out = run_task(rules, task.relations, program.decls, {"edge": _frame(edges)}, {}, share)
    return out.relation("path", ranked=True)


SPEC = SimpleNamespace(labels=True, recompute_rows=RECOMPUTE_ROWS)


@pytest.mark.parametrize("seed", range(4))
def test_share_epochs_follow_a_stored_copy_at_labels(seed, monkeypatch):
    """Changes over matrices; where they do not fit, insertions by semi-naive rounds and
    deletions by DRed over a stale state ranked anew first: every removed row is a stored
    (tuple, label) row, and the stored copy is the from-scratch closure after every epoch."""
    program, task, rules = _task(TC)
    rng = random.Random(seed)
    edges = _rings(rng, rng.choice([2, 3]), rng.choice([5, 8]))
    nodes = 1 + max(max(e) for e in edges)
    share = (lambda name, df: df.filter(df["c0"] % 2 == 0)) if seed % 2 else None
    entry = RankedShare(arrange({"path": _scratch(program, task, rules, edges, share)}), None,
                        {})
    stored = {tuple(t): r for *t, r in entry.state.live("path").rows()}
    kinds, max_nodes = set(), closure_bits.MAX_NODES
    for k in range(12):
        gone, fresh, now, inp = random_epoch(rng, edges, nodes, [0, 1, 3], program, task,
                                             rules, share)
        small = k in (5, 9)  # the matrices do not fit: DRed over ranks found anew
        monkeypatch.setattr(closure_bits, "MAX_NODES", 0 if small else max_nodes)
        done = _epoch(SPEC, entry, inp)
        changed = bool(gone or fresh)
        kinds.add(("bits" if done.stale and changed and not small else "dred", done.ranked_anew))
        _stored_after(stored, done.sending)
        assert set(stored) == set(_scratch(program, task, rules, now, share).drop(RANK).rows())
        _labels_hold(stored, done.out.state, done.labels)
        if done.ranked_anew or not done.stale:
            _assert_ranks_valid(done.out.state.live("path"), now)
        assert done.stale == (changed and not small or not gone and entry.stale)
        assert done.ranked_anew == (small and bool(gone) and entry.stale)
        entry = RankedShare(done.out.state, None, {}, done.labels, done.stale)
        edges = now
    assert ("bits", False) in kinds and ("dred", True) in kinds


def test_a_stale_share_keeps_each_stored_label():
    """After matrices' epochs the worker's ranks are the stored labels: a tuple gone later is
    removed at the label it was stored with, whichever epoch stored it."""
    program, task, rules = _task(TC)
    edges = {(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 2), (0, 3)}
    state = arrange({"path": _scratch(program, task, rules, edges)})
    stored = {tuple(t): r for *t, r in state.live("path").rows()}
    labels = {}
    for gone, fresh in [({(0, 3)}, set()), (set(), {(4, 5)}), ({(2, 3)}, {(1, 3)}),
                        ({(1, 2)}, set())]:
        now = (edges - gone) | fresh
        found = epoch(state, "path", _frame(edges), _frame(now), labels)
        assert found is not None
        removed, added, state, labels = found
        _stored_after(stored, SimpleNamespace(removed=removed, added=added))
        assert set(stored) == _closure(now)
        assert stored == {tuple(t): r for *t, r in state.live("path").rows()}
        edges = now


def test_an_epoch_starts_from_the_matrix_the_last_one_left(monkeypatch):
    """Over the same nodes, an epoch from the state the last one made builds one matrix (the
    new edges'), and still finds the closure; new nodes (or a state no epoch made) build
    both."""
    program, task, rules = _task(TC)
    built = []
    real = closure_bits.reach_matrix
    monkeypatch.setattr(closure_bits, "reach_matrix",
                        lambda *a, **k: built.append(1) or real(*a, **k))
    rng = random.Random(3)
    edges = {(i, (i + 1) % 9) for i in range(9)} | {(rng.randrange(9), rng.randrange(9))
                                                   for _ in range(6)}
    state = arrange({"path": _scratch(program, task, rules, edges)})
    labels = {}
    per_epoch = []
    for k in range(8):
        gone = set(rng.sample(sorted(edges - {(i, (i + 1) % 9) for i in range(9)}),
                              min(2, len(edges) - 9)))
        now = (edges - gone) | {(rng.randrange(9), rng.randrange(9)) for _ in range(2)}
        if k == 6:
            now |= {(8, 9)}  # a new node: the kept matrix is over other nodes
        built.clear()
        found = epoch(state, "path", _frame(edges), _frame(now), labels)
        removed, added, state, labels = found
        per_epoch.append(len(built))
        assert set(state.live("path").drop(RANK).rows()) == _closure(now), k
        edges = now
    assert per_epoch == [2, 1, 1, 1, 1, 1, 2, 1], per_epoch


def test_what_the_matrices_leave_to_dred(monkeypatch):
    program, task, rules = _task(TC)
    edges = {(0, 1), (1, 2), (2, 0)}
    state = arrange({"path": _scratch(program, task, rules, edges)})
    now = _frame(edges - {(1, 2)})
    assert epoch(state, "path", _frame(edges), now, {}) is not None
    # A state that is not the old edges' closure (here: one edge short) is not trusted.
    assert epoch(state, "path", _frame(edges - {(2, 0)}), now, {}) is None
    # As many tuples as the closure of 0 -> 1 -> 2, but not the same ones.
    chain = {(0, 1), (1, 2)}
    wrong = arrange({"path": _scratch(program, task, rules, {(0, 1), (1, 2), (2, 0)})
                     .filter(pl.col("c0") != pl.col("c1")).head(3)})
    assert wrong.size("path") == 3
    assert set(wrong.live("path").drop(RANK).rows()) != _closure(chain)
    assert epoch(wrong, "path", _frame(chain), _frame({(0, 1)}), {}) is None
    negative = _frame(edges | {(-1, 0)})  # does not pack
    assert epoch(state, "path", negative, now, {}) is None
    monkeypatch.setattr(closure_bits, "MAX_NODES", 2)
    assert epoch(state, "path", _frame(edges), now, {}) is None


def test_a_process_catching_up_through_a_matrix_epoch_is_stale():
    program, task, rules = _task(TC)
    edges = {(0, 1), (1, 2), (2, 0), (2, 3), (3, 0)}
    entry = RankedShare(arrange({"path": _scratch(program, task, rules, edges)}), None,
                        {"edge": _frame(edges)})
    gone = {(1, 2)}
    inp = Inputs(rules, task.relations, program.decls, {"edge": _frame(edges - gone)},
                 {"edge": _frame(set())}, {"edge": _frame(gone)}, {}, {}, {})
    done = _epoch(SPEC, entry, inp)
    assert done.stale and not done.ranked_anew
    caught = _applied(entry, (done.out.removed, done.out.added, inp.lower_plus,
                              inp.lower_minus, True, done.stale))
    assert caught.stale
    assert set(caught.state.live("path").rows()) == set(done.out.state.live("path").rows())


def test_an_insertion_into_a_deep_condensation_is_left_to_semi_naive_rounds(monkeypatch):
    program, task, rules = _task(TC)
    chain = {(i, i + 1) for i in range(6)}  # six levels
    src, dst = (np.array(c) for c in zip(*sorted(chain), strict=True))
    assert reach_matrix(src, dst, 7, levels=5) is None
    assert reach_matrix(src, dst, 7, levels=7) is not None
    monkeypatch.setattr(closure_bits, "INSERT_LEVELS", 3)
    entry = RankedShare(arrange({"path": _scratch(program, task, rules, chain)}), None, {})
    for gone, fresh, over_matrices in [(set(), {(6, 7)}, False), ({(2, 3)}, set(), True)]:
        now = (chain - gone) | fresh
        inp = Inputs(rules, task.relations, program.decls, {"edge": _frame(now)},
                     {"edge": _frame(fresh)}, {"edge": _frame(gone)}, {}, {}, {})
        done = _epoch(SPEC, entry, inp)
        assert done.stale == over_matrices  # semi-naive rounds keep the ranks valid
        assert set(done.out.state.live("path").drop(RANK).rows()) == _closure(now)
        entry, chain = RankedShare(done.out.state, None, {}, done.labels, done.stale), now
