"""Delete-and-rederive of a left-linear closure over dense (source, node) tables: the touched
sources' tuples (closure_epoch.py finds them), one block of sources at a time.

dred.py's phases, with each join a gather over a table instead of a hash join of frames:
  old  - each old tuple's rank (-1: none), cell = row << shift | node of the new edges;
  lost - the suspects: candidates are (x, v) for each removed edge (u, v), then the tuples one
         new edge on from a new suspect with a larger rank; a candidate is kept if an edge
         from x makes it, or an in-neighbour's tuple that is not suspect has a smaller rank.
Then the suspects and the tuples new edges make are searched again from what is kept: level 0
are the suspects with an edge from x or a kept in-neighbour, and (x, b) for a new edge (a, b)
with (x, a) kept or x = a; each level the next one edge on, kept tuples left out. Level k is
ranked top + 1 + k: its tuple derives from one of level k - 1, or from a kept one (rank <=
top), so the rank invariant of dred.py holds. What is kept is what DRed keeps (the greatest
well-founded set), and every step costs the suspects and their edges, not the relation.
"""

from __future__ import annotations

import numpy as np

from levelflow.engine.plans.closure import Adjacency, ranges
from levelflow.engine.plans.keys import distinct_sorted

# Cells (sources x nodes, rounded up to a power of two) of one block's tables.
BLOCK_CELLS = 1 << 22


def shift_for(nodes: int) -> int:
    """Return the bits a table's node part takes."""
    return max(1, (max(nodes, 1) - 1).bit_length())


def _step(adj: Adjacency, cells: np.ndarray, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (the cells one edge of `adj` on from each cell, each one's cell of origin's
    index): the same source row, the edge's other node."""
    node = cells & ((1 << shift) - 1)
    counts = adj.deg[node]
    nxt = adj.adj[ranges(adj.ptr[node], counts)]
    origin = np.repeat(np.arange(len(cells)), counts)
    return (cells[origin] >> shift << shift) | nxt, origin


def dense_ids(nodes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Return each value's index in the sorted `nodes`, or -1 where it is not one: a lookup
    table where the node values are dense (a gather, where a binary search per value costs
    5-10x more on a 1M-tuple block), else binary searches."""
    if not len(nodes):
        return np.full(len(values), -1, np.int64)
    top = int(nodes[-1])
    if top <= 8 * len(nodes) + 4096 and nodes[0] >= 0:
        table = np.full(top + 2, -1, np.int64)
        table[nodes] = np.arange(len(nodes))
        return table[np.clip(values, -1, top + 1)]
    at = np.minimum(np.searchsorted(nodes, values), len(nodes) - 1)
    return np.where(nodes[at] == values, at, -1)


class Tables:
    """One block's tables: the old ranks, the suspects, the edges out of each source."""

    def __init__(self, adj: Adjacency, back: Adjacency, sources: np.ndarray,
                 cells: np.ndarray, ranks: np.ndarray, shift: int) -> None:
        self.adj, self.back, self.shift = adj, back, shift
        size = len(sources) << shift
        # Rank + 1 (0: no old tuple): a zeroed table is pages the kernel maps on first touch,
        # where one filled with -1 is written whole (23 MB a block of 1,400 sources).
        wide = len(ranks) and int(ranks.max()) >= np.iinfo(np.int32).max - 1
        self.old = np.zeros(size, np.int64 if wide else np.int32)
        self.old[cells] = ranks + 1
        self.lost = np.zeros(size, bool)
        self.base = np.zeros(size, bool)  # an edge from the row's source to the node
        at = np.minimum(adj.ids(sources), len(adj.nodes) - 1)
        rows = np.flatnonzero(adj.nodes[at] == sources)
        out, _ = _step(adj, (rows << shift) | at[rows], shift)
        self.base[out] = True

    def kept(self, cells: np.ndarray) -> np.ndarray:
        """Return which cells hold an old tuple not suspect."""
        return (self.old[cells] > 0) & ~self.lost[cells]

    def supported(self, cells: np.ndarray, below: bool) -> np.ndarray:
        """Return which cells an edge from the source makes, or a kept in-neighbour's tuple
        (of a smaller rank than the cell's old one, with `below`)."""
        back, origin = _step(self.back, cells, self.shift)
        ok = self.kept(back)
        if below:
            ok &= self.old[back] < self.old[cells][origin]
        found = np.bincount(origin[ok], minlength=len(cells)) > 0
        return found | self.base[cells]

    def suspect(self, cands: np.ndarray) -> int:
        """Mark the suspects from the first candidates; return the rounds."""
        rounds = 0
        while len(cands):
            cands = cands[self.kept(cands)]
            lost = cands[~self.supported(cands, below=True)]
            if not len(lost):
                break
            rounds += 1
            self.lost[lost] = True
            # Tuples a new suspect may have supported: one edge on, of a larger old rank.
            nxt, origin = _step(self.adj, lost, self.shift)
            cands = distinct_sorted(nxt[self.kept(nxt) & (self.old[nxt] > self.old[lost][origin])])
        return rounds

    def rederived(self, seeds: np.ndarray) -> list[np.ndarray]:
        """Return per level the cells searched again from the kept tuples (see above)."""
        lost = np.flatnonzero(self.lost)
        first = np.concatenate([lost[self.supported(lost, below=False)], seeds])
        seen = np.zeros(len(self.old), bool)
        frontier = distinct_sorted(first[~self.kept(first)])
        levels = []
        while len(frontier):
            seen[frontier] = True
            levels.append(frontier)
            nxt, _ = _step(self.adj, frontier, self.shift)
            frontier = distinct_sorted(nxt[~seen[nxt] & ~self.kept(nxt)])
        return levels


def _edge_cells(sources: np.ndarray, tails: np.ndarray, heads: np.ndarray,
                nodes: np.ndarray, shift: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return, for every row and every edge whose head is a node of the new edges, the cell
    (row, head), the cell (row, tail) (-1 where the tail is no node) and whether the row's
    source is the tail."""
    at = np.minimum(np.searchsorted(nodes, heads), len(nodes) - 1)
    ok = nodes[at] == heads
    tails, heads = tails[ok], at[ok]
    tail_at = np.minimum(np.searchsorted(nodes, tails), len(nodes) - 1)
    tail_at = np.where(nodes[tail_at] == tails, tail_at, -1)
    rows = np.arange(len(sources))[:, None] << shift
    head_cells = (rows | heads[None, :]).ravel()
    tail_cells = np.where(tail_at[None, :] >= 0, rows | tail_at[None, :], -1).ravel()
    is_tail = (sources[:, None] == tails[None, :]).ravel()
    return head_cells, tail_cells, is_tail


def changed_pairs(adj: Adjacency | None, back: Adjacency | None, sources: np.ndarray,
             old_keys: np.ndarray, old_ranks: np.ndarray, counts: np.ndarray, top: int,
             bits: int, removed: tuple, added: tuple):
    """Return (removed keys, their ranks, which are net, added keys, their ranks, which are
    net, rounds) for one block of sources (sorted) with their old tuples as packed keys
    (source << bits | target, sorted) and ranks, `counts` per source, after the edges
    `removed` and `added` ((tails, heads)): the (tuple, rank) pairs that change; a removed
    pair is net unless its tuple is re-derived, an added one unless its tuple was there."""
    if adj is None:  # no edges left: every old tuple goes
        every = np.ones(len(old_keys), bool)
        return old_keys, old_ranks, every, old_keys[:0], old_ranks[:0], every[:0], 0
    nodes, shift = adj.nodes, shift_for(len(adj.nodes))
    at = dense_ids(nodes, old_keys & ((1 << bits) - 1))
    present = at >= 0  # a target no new edge touches is gone
    cells = ((np.repeat(np.arange(len(sources)), counts) << shift) | at)[present]
    tables = Tables(adj, back, sources, cells, old_ranks[present], shift)
    heads, _, _ = _edge_cells(sources, *removed, nodes, shift)
    rounds = tables.suspect(distinct_sorted(heads))
    heads, tails, is_tail = _edge_cells(sources, *added, nodes, shift)
    made = is_tail | ((tails >= 0) & tables.kept(np.maximum(tails, 0)))
    levels = tables.rederived(heads[made])
    gone = ~present
    gone[present] = tables.lost[cells]
    fresh = np.concatenate(levels) if levels else cells[:0]
    ranks = np.repeat(np.arange(len(levels), dtype=np.int64) + top + 1, [len(c) for c in levels])
    fresh_keys = (sources[fresh >> shift] << bits) | nodes[fresh & ((1 << shift) - 1)]
    again = np.zeros(len(tables.old), bool)
    again[fresh] = True
    gone_net = ~present  # a target gone is no node of the new edges: it is not re-derived
    gone_net[present] = ~again[cells]
    return (old_keys[gone], old_ranks[gone], gone_net[gone], fresh_keys, ranks,
            tables.old[fresh] == 0, rounds + len(levels))


def blocks(sources: np.ndarray, counts: np.ndarray, nodes: int):
    """Yield (source slice, old-tuple slice) per block of at most BLOCK_CELLS cells."""
    step = max(1, BLOCK_CELLS >> shift_for(nodes))
    ends = np.concatenate([[0], np.cumsum(counts)])
    for start in range(0, len(sources), step):
        stop = min(start + step, len(sources))
        yield slice(start, stop), slice(int(ends[start]), int(ends[stop]))
