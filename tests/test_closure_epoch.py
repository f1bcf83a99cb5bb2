"""A left-linear closure's deletions through cycles, by delete-and-rederive over dense tables
of the touched sources (strategies/closure_epoch.py, closure_tables.py).

Small seeded graphs of rings with chords and cross edges: epochs of deletions inside the rings
and mixed changes, each updated over the tables or by DRed over frames in turn, against a
from-scratch fixpoint; the ranks kept must stay valid (each tuple of rank r > 0 derived from
one of rank < r) and change no more than DRed's would.
"""

from __future__ import annotations

import random

import polars as pl
import pytest

from levelflow.engine.incremental.strategies import closure_epoch, closure_tables, dred_polars
from levelflow.engine.incremental.strategies.arranged import RANK, arrange
from levelflow.engine.incremental.strategies.closure_epoch import closure_edges
from levelflow.engine.incremental.strategies.dred_polars import Inputs, update
from levelflow.engine.plans.fixpoint import run_task
from levelflow.tasks import build_tasks, parse_program

TC = """.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
"""


def _frame(edges) -> pl.DataFrame:
    return pl.DataFrame(sorted(edges), schema={"c0": pl.Int64, "c1": pl.Int64}, orient="row")


def _task(text: str):
    program = parse_program(text)
    task = max(build_tasks(program).tasks, key=lambda t: len(t.rules))
    return program, task, tuple(r for r in task.rules if r.body)


def _rings(rng: random.Random, rings: int, size: int) -> set:
    """Return rings of `size` nodes with chords, joined by cross edges to later rings."""
    edges = set()
    for c in range(rings):
        base = c * size
        edges |= {(base + i, base + (i + 1) % size) for i in range(size)}
        edges |= {(base + rng.randrange(size), base + rng.randrange(size)) for _ in range(3)}
        if c + 1 < rings:
            edges.add((base + rng.randrange(size), (c + 1) * size + rng.randrange(size)))
    return edges


def _assert_ranks_valid(ranked: pl.DataFrame, edges: set) -> None:
    """Each tuple of rank r > 0 has a derivation from a tuple of smaller rank, or is an edge."""
    rank = {(a, b): r for a, b, r in ranked.select("c0", "c1", RANK).rows()}
    preds: dict[int, list[int]] = {}
    for a, b in edges:
        preds.setdefault(b, []).append(a)
    for (x, y), r in rank.items():
        if (x, y) in edges:
            continue
        assert any(rank.get((x, z), r) < r for z in preds.get(y, [])), (x, y, r)


def _assert_net(out) -> None:
    """An update's net flags: a removed pair is net unless its tuple is added back at another
    rank, an added one unless its tuple was removed at another."""
    removed, added = out.removed["path"].drop(RANK).rows(), out.added["path"].drop(RANK).rows()
    assert list(out.net["path"][0]) == [t not in set(added) for t in removed]
    assert list(out.net["path"][1]) == [t not in set(removed) for t in added]


@pytest.mark.parametrize("seed", range(6))
def test_tables_match_from_scratch_and_dred(seed, monkeypatch):
    program, task, rules = _task(TC)
    rng = random.Random(seed)
    size = rng.choice([4, 6, 9])
    edges = _rings(rng, rng.choice([2, 3, 4]), size)
    nodes = 1 + max(max(e) for e in edges)
    if seed % 2:  # some sources hashed to another share: the partitioned plan's
        def share(name, df):
            return df.filter(pl.col("c0") % 2 == 0)
    else:
        share = None

    def scratch(now):
        out = run_task(rules, task.relations, program.decls, {"edge": _frame(now)}, {}, share)
        return out.relation("path", ranked=True)

    if seed >= 3:  # tables of a few sources each: several blocks per epoch
        monkeypatch.setattr(closure_tables, "BLOCK_CELLS", 40)
        monkeypatch.setattr(closure_epoch, "BLOCK_CELLS", 40)
        monkeypatch.setattr(closure_epoch, "MAX_BLOCKS", 1000)
    planned = []  # per epoch, the closure epoch planned (None: not a deletion on a cycle)
    plan = dred_polars._closure_epoch
    monkeypatch.setattr(dred_polars, "_closure_epoch",
                        lambda *a: planned.append(p := plan(*a) if by_tables else None) or p)
    ran = []
    run = closure_epoch.ClosureEpoch.run
    monkeypatch.setattr(closure_epoch.ClosureEpoch, "run", lambda self: ran.append(1) or run(self))
    state = arrange({"path": scratch(edges)})
    for epoch in range(12):
        # Even epochs use the tables whenever a deletion lies on a cycle, odd ones DRed: each
        # starts from the ranks the other left.
        by_tables = epoch % 2 == 0
        gone = set(rng.sample(sorted(edges), min(len(edges), rng.choice([1, 2, 3]))))
        fresh = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(rng.choice([0, 1, 3]))}
        fresh -= edges
        now = (edges - gone) | fresh
        inp = Inputs(rules, task.relations, program.decls, {"edge": _frame(now)},
                     {"edge": _frame(fresh)}, {"edge": _frame(gone)}, {}, {}, {}, share)
        out = update(state, inp, recompute_rows=0)  # not the small share's recompute
        dred = dred_polars._dred(state, inp)  # the same epoch by DRed, for its change's size
        got = out.state.live("path")
        if out.net is not None:
            _assert_net(out)
        assert set(got.drop(RANK).rows()) == set(scratch(now).drop(RANK).rows())
        assert got.height == out.state.size("path")
        _assert_ranks_valid(got, now)
        if planned[-1] is not None:  # else DRed over frames
            assert out.removed["path"].height <= dred.removed["path"].height
        old = set(state.live("path").rows())
        assert (old - set(out.removed["path"].rows())) | set(out.added["path"].rows()) == \
            set(got.rows())
        state, edges = out.state, now
    assert ran  # the tables ran, not only DRed over frames


def test_only_a_left_linear_closure_runs_over_tables():
    assert closure_edges(_task(TC)[2], ("path",)) == "edge"
    spelled = TC.replace("path(x, z) :- path(x, y), edge(y, z).",
                         "path(a, c) :- path(a, b), edge(b, c).")
    assert closure_edges(_task(spelled)[2], ("path",)) == "edge"
    for other in ("path(x, z) :- edge(x, y), path(y, z).",  # right-linear
                  "path(x, z) :- path(x, y), path(y, z).",  # doubling
                  "path(x, z) :- path(x, y), edge(y, z), x != z."):
        text = TC.replace("path(x, z) :- path(x, y), edge(y, z).", other)
        assert closure_edges(_task(text)[2], ("path",)) is None, other


def test_what_stays_with_dred_over_frames(monkeypatch):
    """A deletion on no cycle (a chain) runs over the tables too; a change too large for the
    first candidates' table is left to DRed over frames."""
    program, task, rules = _task(TC)
    edges = {(i, i + 1) for i in range(6)}
    out = run_task(rules, task.relations, program.decls, {"edge": _frame(edges)}, {})
    state = arrange({"path": out.relation("path", ranked=True)})
    gone = {(2, 3)}
    inp = Inputs(rules, task.relations, program.decls, {"edge": _frame(edges - gone)},
                 {"edge": _frame(set())}, {"edge": _frame(gone)}, {}, {}, {})
    assert dred_polars._closure_epoch(state, inp) is not None
    got = update(state, inp, recompute_rows=0).state.live("path")
    assert set(got.drop(RANK).rows()) == {(a, b) for a in range(6) for b in range(a + 1, 7)
                                          if not a < 3 <= b}
    monkeypatch.setattr(closure_epoch, "EDGE_CELLS", 2)  # 3 touched sources x 1 edge
    assert dred_polars._closure_epoch(state, inp) is None


@pytest.mark.parametrize("sharing", [False, True])
def test_a_closure_share_is_recomputed_by_the_native_operator(sharing, monkeypatch):
    """A large deletion in a small share recomputes it: a left-linear closure by BFS, with
    the ranks (rounds) a semi-naive run gives."""
    program, task, rules = _task(TC)
    edges = _rings(random.Random(5), 3, 6)
    share = (lambda name, df: df.filter(pl.col("c0") % 2 == 0)) if sharing else None
    old = run_task(rules, task.relations, program.decls, {"edge": _frame(edges)}, {}, share)
    state = arrange({"path": old.relation("path", ranked=True)})
    gone = set(sorted(edges)[::4])
    now = edges - gone
    calls = []
    monkeypatch.setattr(dred_polars, "run_closure",
                        lambda *a, f=dred_polars.run_closure: calls.append(1) or f(*a))
    inp = Inputs(rules, task.relations, program.decls, {"edge": _frame(now)},
                 {"edge": _frame(set())}, {"edge": _frame(gone)}, {}, {}, {}, share)
    out = update(state, inp)
    want = run_task(rules, task.relations, program.decls, {"edge": _frame(now)}, {}, share)
    assert calls
    _assert_net(out)
    assert any(out.net["path"][0]) and not all(out.net["path"][0])  # gone, and re-ranked
    assert set(out.state.live("path").rows()) == set(want.relation("path", ranked=True).rows())
