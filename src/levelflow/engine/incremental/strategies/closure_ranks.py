"""A closure's touched sources ranked again after their edges changed, as few ranks changing as
delete-and-rederive would change (closure_search.py finds the sources).

Per block of sources, dense tables over (source, node of the new edges):
  old   - each old tuple's rank (-1: none),
  dist  - its BFS layer over the new edges (-1: unreached): the new closure,
  kept  - the old tuples still well-founded at their old rank: a new edge from the source, or
          a kept tuple of smaller rank and a new edge to it. Found by ranks ascending, each
          kept tuple marking the old tuples of larger rank one edge on.
A kept tuple keeps its rank; any other tuple of the new closure is ranked top + 1 + its layer:
its predecessor on a shortest path is kept (rank <= top) or ranked one below it, so the
invariant of dred.py holds. The kept tuples are the greatest well-founded set, exactly those
delete-and-rederive would not suspect: the change written back is no larger than its.
"""

from __future__ import annotations

import numpy as np

from levelflow.engine.plans.closure import Adjacency, bfs_layers, ranges

# Cells (sources x nodes) of one block's tables: 4M cells, 72 MB of them.
BLOCK_CELLS = 1 << 22


def _rows_of(adj: Adjacency, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the sources that are nodes of the edges: their dense ids and their rows."""
    at = np.minimum(adj.ids(sources), len(adj.nodes) - 1)
    rows = np.flatnonzero(adj.nodes[at] == sources)
    return at[rows], rows


def _distances(adj: Adjacency, ids: np.ndarray, rows: np.ndarray, size: int
               ) -> tuple[np.ndarray, int]:
    """Return the BFS layer of each (row, node) cell from the sources (-1: unreached), and the
    layers searched."""
    n = len(adj.nodes)
    dist = np.full(size, -1, np.int64)
    layers = bfs_layers(adj, ids) if len(ids) else []
    row_of = np.zeros(n, np.int64)
    row_of[ids] = rows * n  # a gather per pair, where a binary search cost 3x more
    for k, (s, t) in enumerate(layers):
        dist[row_of[s] + t] = k
    return dist, len(layers)


def _kept(adj: Adjacency, ids: np.ndarray, rows: np.ndarray, old: np.ndarray,
          cells: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Return the mask of cells whose old tuple is still well-founded at its old rank; `cells`
    and `ranks` are the old tuples' cells and ranks."""
    n = len(adj.nodes)
    kept = np.zeros(len(old), bool)
    counts = adj.deg[ids]
    base = np.repeat(rows * n, counts) + adj.adj[ranges(adj.ptr[ids], counts)]
    kept[base] = old[base] >= 0  # an edge from the source derives it, whatever its rank
    # Ranks as 16 bits where they fit: numpy sorts those by radix, in linear time.
    small = len(ranks) and ranks.max() < np.iinfo(np.int16).max
    order = np.argsort(ranks.astype(np.int16) if small else ranks, kind="stable")
    cells, ranks = cells[order], ranks[order]
    starts = np.flatnonzero(np.diff(ranks, prepend=-1))  # ranks are >= 0
    ends = [*starts[1:], len(ranks)] if len(starts) else []
    for start, end in zip(starts, ends, strict=True):
        level = cells[start:end]
        level = level[kept[level]]
        if not len(level):
            continue
        row, v = level // n, level % n
        counts = adj.deg[v]
        nxt = np.repeat(row * n, counts) + adj.adj[ranges(adj.ptr[v], counts)]
        kept[nxt[old[nxt] > ranks[start]]] = True
    return kept


def reranked(adj: Adjacency | None, sources: np.ndarray, old_keys: np.ndarray,
             old_ranks: np.ndarray, counts: np.ndarray, top: int, bits: int):
    """Return (removed keys, their ranks, added keys, their ranks, layers) for one block of
    sources (sorted) with their old tuples as packed keys (source << bits | target, sorted)
    and ranks, `counts` per source: the (tuple, rank) pairs that change."""
    if adj is None:  # no edges left: every old tuple goes
        return old_keys, old_ranks, old_keys[:0], old_ranks[:0], 0
    n = len(adj.nodes)
    size = len(sources) * n
    target = old_keys & ((1 << bits) - 1)
    at = np.minimum(np.searchsorted(adj.nodes, target), n - 1)
    present = adj.nodes[at] == target  # a target no new edge touches is gone
    cells = (np.repeat(np.arange(len(sources)), counts) * n + at)[present]
    old = np.full(size, -1, np.int64)
    old[cells] = old_ranks[present]
    ids, rows = _rows_of(adj, sources)
    dist, layers = _distances(adj, ids, rows, size)
    kept = _kept(adj, ids, rows, old, cells, old_ranks[present])
    gone = ~present
    gone[present] = ~kept[cells]
    fresh = np.flatnonzero((dist >= 0) & ~kept)
    added_keys = (sources[fresh // n] << bits) | adj.nodes[fresh % n]
    return old_keys[gone], old_ranks[gone], added_keys, top + 1 + dist[fresh], layers


def blocks(sources: np.ndarray, counts: np.ndarray, nodes: int):
    """Yield (source slice, old-tuple slice) per block of at most BLOCK_CELLS cells."""
    step = max(1, BLOCK_CELLS // max(nodes, 1))
    ends = np.concatenate([[0], np.cumsum(counts)])
    for start in range(0, len(sources), step):
        stop = min(start + step, len(sources))
        yield slice(start, stop), slice(int(ends[start]), int(ends[stop]))
