"""A labelled closure's epoch over bit matrices: the change from the condensation, no ranks.

For the closure p = e+ of a graph of at most MAX_NODES nodes, row x of a bit matrix holds the
nodes x reaches. The matrix follows from the edges through the condensation: one row per
strongly connected component, filled sinks first, level by level (a component reaches its
successors, what they reach, and itself where it is a cycle). The epoch builds the old and the
new matrix from the old and the new edges and takes their difference: the tuples gone and the
tuples new. It costs the nodes squared over 64 words per matrix and the condensation's
edges, whatever the change; DRed costs the suspects' rounds (on rings of components, 150-250
rounds for 10 deleted edges), and it must keep every kept tuple's rank valid.

Its ranks are not kept valid: a tuple new is ranked above the state's top, a kept one keeps
its rank. That is what closure_labels allows for a labelled closure whose worker marks its
state `stale`: a later epoch that needs ranks (DRed, when the graph outgrows the matrices)
ranks the state anew from its edges first (dred_share).

Constant: the state's packed keys, sorted. Changes: `_KEPT`, the new matrix of each state an
epoch made, keyed by that state (the next epoch's old matrix, where the nodes are the same: one
matrix per epoch, not two).
"""

from __future__ import annotations

import weakref

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from levelflow.engine.incremental.strategies.arranged import RANK, Arranged, changed
from levelflow.engine.incremental.strategies.closure_labels import NO_LABELS, Labels, at_labels
from levelflow.engine.plans.closure import ranges
from levelflow.engine.plans.keys import bits_for, packable, unpack

BITS = bits_for(2)  # a packed pair: source << BITS | target
# Nodes at most: a matrix is nodes^2 / 8 bytes (8 MB at 8,192), its condensation's gathers a
# few times that; bench_shapes' graphs have 1,250-2,000 nodes at 1M pairs, 4,000-6,300 at 10M.
MAX_NODES = 8192
GATHER_BYTES = 1 << 26
# Levels of the condensation at most for an epoch that only inserts: a matrix costs about 30
# us a level (a chain of 8,192 nodes: 0.26 s), where semi-naive rounds from a few new edges
# cost their new tuples; a deletion has no such cheap alternative.
INSERT_LEVELS = 1024
# id(state) -> (a weak reference to it, its nodes, its full matrix): the matrix of a state's
# closure over those nodes, built by the epoch that made the state. Process-local: never
# shipped nor stored with the state.
_KEPT: dict[int, tuple] = {}


def reach_matrix(src: np.ndarray, dst: np.ndarray, n: int, levels: int | None = None
                 ) -> np.ndarray | None:
    """Return the (n, words) uint64 bit matrix whose row i holds the nodes a path of one edge
    or more leads to from node i (nodes are dense ids 0..n-1); None past `levels` levels of
    the condensation."""
    words = max(1, (n + 63) // 64)
    graph = csr_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(n, n))
    k, comp = connected_components(graph, directed=True, connection="strong")
    node = np.arange(n)
    members = np.zeros((k, words), np.uint64)
    bit = np.left_shift(np.uint64(1), (node & 63).astype(np.uint64))
    np.add.at(members, (comp, node >> 6), bit)  # one bit per node: adding is or-ing
    cyclic = np.bincount(comp, minlength=k) > 1
    cyclic[comp[src[src == dst]]] = True  # a self loop
    cu, cv = comp[src], comp[dst]
    pair = np.unique(cu[cu != cv].astype(np.int64) * k + cv[cu != cv])
    cu, cv = pair // k, pair % k  # the condensation's edges, sorted by their tail
    reach = _filled(members, cu, cv, k, levels)
    if reach is None:
        return None
    return (reach | np.where(cyclic[:, None], members, 0))[comp]


def _filled(members: np.ndarray, cu: np.ndarray, cv: np.ndarray, k: int,
            levels: int | None) -> np.ndarray | None:
    """Return per component the nodes of its successors and all they reach: sinks first, a
    level (the components whose successors are all done) at a time."""
    reach = np.zeros_like(members)
    ptr = np.searchsorted(cu, np.arange(k + 1))
    by_head = np.argsort(cv, kind="stable")
    in_ptr = np.searchsorted(cv[by_head], np.arange(k + 1))
    left = np.diff(ptr)  # successors not done yet
    frontier = np.flatnonzero(left == 0)
    # Successors' rows gathered at once at most (64 MB): a level of a dense graph can have
    # hundreds of thousands of edges, each a row of up to 128 words.
    per_gather = max(1, GATHER_BYTES // (8 * members.shape[1]))
    while len(frontier):
        if levels is not None and (levels := levels - 1) < 0:
            return None
        busy = frontier[ptr[frontier + 1] > ptr[frontier]]
        for part in np.array_split(busy, 1 + (ptr[busy + 1] - ptr[busy]).sum() // per_gather):
            deg = ptr[part + 1] - ptr[part]
            succ = cv[ranges(ptr[part], deg)]
            starts = np.cumsum(deg) - deg
            reach[part] = np.bitwise_or.reduceat(members[succ] | reach[succ], starts, axis=0)
        into = ranges(in_ptr[frontier], in_ptr[frontier + 1] - in_ptr[frontier])
        preds = cu[by_head[into]]
        np.subtract.at(left, preds, 1)
        frontier = np.unique(preds[left[preds] == 0])
    return reach


def _pairs(bits: np.ndarray, rows: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """Return the sorted packed keys (row's node, column's node) of a matrix's set bits: only
    the words holding one are unpacked (a change touches few of a row's words)."""
    r, w = np.nonzero(bits)
    flat = np.unpackbits(bits[r, w].view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    at, bit = np.nonzero(flat)
    return (rows[r[at]] << BITS) | nodes[w[at] * 64 + bit]


def epoch(state: Arranged, name: str, old_edges: pl.DataFrame, new_edges: pl.DataFrame,
          labels: Labels, share=None, levels: int | None = None):
    """Return (removed, added, new state, labels after) of the closure `name` whose edges go
    from old to new: each tuple gone at its stored label, each new one ranked above the
    state's top; None where the tuples do not pack, the nodes are too many, the condensation
    is deeper than `levels`, or the state is not the old edges' closure (then DRed, which
    checks nothing less, takes the epoch)."""
    keys = state.keys[name]
    if keys is None or not packable(old_edges) or not packable(new_edges):
        return None
    ends = [old_edges["c0"], old_edges["c1"], new_edges["c0"], new_edges["c1"]]
    nodes = pl.concat(ends).unique().sort().to_numpy()
    if len(nodes) > MAX_NODES:
        return None
    rows = nodes if share is None else np.sort(
        share(name, pl.DataFrame({"c0": nodes, "c1": nodes}))["c0"].to_numpy())
    at = np.searchsorted(nodes, rows)

    def matrix(edges: pl.DataFrame) -> np.ndarray | None:
        return reach_matrix(np.searchsorted(nodes, edges["c0"].to_numpy()),
                            np.searchsorted(nodes, edges["c1"].to_numpy()), len(nodes), levels)
    full = _kept(state, nodes)
    if full is None:
        full = matrix(old_edges)
    old = None if full is None else full[at]
    if old is None or int(np.bitwise_count(old).sum()) != len(keys):
        return None
    full = matrix(new_edges)
    if full is None:
        return None
    new = full[at]
    gone, fresh = _pairs(old & ~new, rows, nodes), _pairs(new & ~old, rows, nodes)
    pos = np.minimum(np.searchsorted(keys, gone), max(len(keys) - 1, 0))
    if len(gone) and not np.array_equal(keys[pos], gone):
        return None  # as many tuples as the closure, not the same ones: a broken state
    lkeys, lvals = labels.get(name, NO_LABELS)
    # A tuple gone takes its label with it.
    label, keep = at_labels(lkeys, lvals, gone, state.ranks_at(name, pos))
    cols = ["c0", "c1"]
    removed = unpack(gone, cols).with_columns(pl.Series(RANK, label, pl.Int64))
    added = unpack(fresh, cols).with_columns(
        pl.Series(RANK, np.full(len(fresh), state.top() + 1), pl.Int64))
    after = {n: v for n, v in labels.items() if n != name}
    if keep.any():
        after[name] = (lkeys[keep], lvals[keep])
    state = changed(state, name, pos, added)
    _keep(state, nodes, full)
    return {name: removed}, {name: added}, state, after


def _kept(state: Arranged, nodes: np.ndarray) -> np.ndarray | None:
    """Return the full matrix the epoch that made `state` left for it, if over `nodes`."""
    got = _KEPT.get(id(state))
    if got is None or got[0]() is not state or not np.array_equal(got[1], nodes):
        return None
    return got[2]


def _keep(state: Arranged, nodes: np.ndarray, full: np.ndarray) -> None:
    """Keep `state`'s full matrix over `nodes` for the next epoch, while the state lives
    (its entry goes with it; a state the next epoch does not start from is dropped then)."""
    key = id(state)
    _KEPT[key] = (weakref.ref(state, lambda _: _KEPT.pop(key, None)), nodes, full)
