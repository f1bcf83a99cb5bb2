"""The native closure operator: a path expression's `e+` as breadth-first search, vectorized.

Runs in a Python worker instead of fixpoint.run_task when the task is a generated closure
(tasks/regpath.py). The closure rules are
    @plus(x, y) :- E(x, y).            @plus(x, y) :- @plus(x, z), E(z, y).
so round k of semi-naive evaluation finds exactly the pairs (s, t) whose shortest path has
k + 1 edges: BFS layer k from each source s. The outcome has the same rounds (ranks) as
run_task's, which DRed and the incremental scratch path rely on.

Constant: E as CSR adjacency over dense node ids (np.unique, argsort). Changes: per block of
sources, a dense visited bitmap (sources x nodes) and the frontier of flat indices; each
round expands the whole frontier at once (np.repeat over CSR ranges), no per-tuple loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import numpy as np
import polars as pl

from levelflow.engine.guard import Limit
from levelflow.engine.plans.columnar import empty_frame
from levelflow.engine.plans.fixpoint import Share, TaskOutcome, base_tuples, run_task
from levelflow.engine.plans.keys import distinct_sorted
from levelflow.tasks.ast import Decl, Rule

# Cells (sources x nodes) of one block's visited bitmap: 32 MB of bools.
BLOCK_CELLS = 1 << 25
# More blocks of sources than this and the bitmap's per-block rounds cost more than the one
# sorted visited set's searches (sparse graphs with many sources and small closures).
BITMAP_BLOCKS = 4


class Adjacency:
    """E in compressed sparse rows over dense ids: neighbours of v are adj[ptr[v]:ptr[v+1]]."""

    __slots__ = ("nodes", "ptr", "adj", "deg")

    def __init__(self, src: np.ndarray, dst: np.ndarray) -> None:
        both = np.concatenate([src, dst])
        # Polars' hash unique, then binary search: 4x faster than np.unique(return_inverse).
        self.nodes = np.sort(pl.Series(both).unique().to_numpy())
        s, d = self.ids(src), self.ids(dst)
        order = np.argsort(s, kind="stable")
        self.adj = d[order].astype(np.int64)
        self.ptr = np.searchsorted(s[order], np.arange(len(self.nodes) + 1))
        self.deg = np.diff(self.ptr)

    def ids(self, values: np.ndarray) -> np.ndarray:
        """Return the dense ids of node values that occur in E."""
        return np.searchsorted(self.nodes, values)

    def expand(self, flat: np.ndarray, bits: int) -> np.ndarray:
        """Return the flat indices (row << bits | neighbour) one step from each flat index."""
        row, v = flat >> bits, flat & ((1 << bits) - 1)
        counts = self.deg[v]
        if not counts.sum():
            return np.empty(0, np.int64)
        nbr = self.adj[ranges(self.ptr[v], counts)]
        return (np.repeat(row, counts) << bits) | nbr


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Return the positions starts[i], starts[i] + 1, ..., starts[i] + counts[i] - 1, for each
    i in turn, as one array (no loop: run starts shifted by the runs before them)."""
    out = np.repeat(starts - (np.cumsum(counts) - counts), counts)
    out += np.arange(len(out))
    return out


def bfs_layers(adj: Adjacency, sources: np.ndarray, block_cells: int = BLOCK_CELLS
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Return per BFS layer k (paths of k + 1 edges) the pairs (source id, target id) new in it."""
    # Flat index row << bits | node: shifts and masks, where divmod by n costs a division.
    bits = max(1, (len(adj.nodes) - 1).bit_length())
    block = max(1, block_cells >> bits)
    if len(sources) > BITMAP_BLOCKS * block:  # many sparse sources: one sorted visited set
        return _layers_sorted(adj, sources, bits)
    layers: list[list[tuple[np.ndarray, np.ndarray]]] = []
    # One bitmap for every block, cleared cell by cell: a fresh one per block costs page faults.
    seen = np.zeros(min(len(sources), block) << bits, dtype=bool)
    for start in range(0, len(sources), block):
        srcs = sources[start:start + block]
        frontier = (np.arange(len(srcs), dtype=np.int64) << bits) | srcs
        k, marked = 0, []
        while len(frontier):
            cand = adj.expand(frontier, bits)
            cand = cand[~seen[cand]]
            if not len(cand):
                break
            cand = distinct_sorted(cand)
            seen[cand] = True
            marked.append(cand)
            if k == len(layers):
                layers.append([])
            layers[k].append((srcs[cand >> bits], cand & ((1 << bits) - 1)))
            frontier = cand
            k += 1
        if start + block < len(sources):  # the last block's marks go with the bitmap
            for cand in marked:
                seen[cand] = False
    return [_joined(layer) for layer in layers]


def _joined(pieces: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Return one layer's (source ids, target ids) from its blocks' pieces."""
    if len(pieces) == 1:  # one block of sources (the common case): no copy of its pairs
        return pieces[0]
    return np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces])


def _layers_sorted(adj: Adjacency, sources: np.ndarray, bits: int
                   ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Return bfs_layers' result with the visited pairs kept as one sorted int64 array."""
    mask = (1 << bits) - 1
    frontier = (sources.astype(np.int64) << bits) | sources
    visited = np.empty(0, np.int64)
    layers = []
    while len(frontier):
        cand = distinct_sorted(adj.expand(frontier, bits))
        if len(visited) and len(cand):
            pos = np.searchsorted(visited, cand)
            pos[pos == len(visited)] = 0
            cand = cand[visited[pos] != cand]
        if not len(cand):
            break
        layers.append((cand >> bits, cand & mask))
        visited = np.concatenate([visited, cand])
        visited.sort(kind="stable")  # two sorted runs: a linear merge
        frontier = cand
    return layers


def _grouped(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Return (how many times each wanted key occurs, the values at those keys' positions) as
    one CSR-style expansion: wanted[0]'s values, then wanted[1]'s, ... Keys are small
    non-negative integers (component labels): counted by bincount, not searched."""
    order = np.argsort(keys, kind="stable")
    sizes = np.bincount(keys, minlength=int(wanted.max(initial=0)) + 1)
    starts = np.cumsum(sizes) - sizes
    counts = sizes[wanted]
    return counts, values[order][ranges(starts[wanted], counts)]


def reached(adj: Adjacency, sources: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return every pair (source, target) of the closure from source ids, as node values.

    The nodes of a strongly connected component reach the same nodes, so the search runs over
    the components (an edge inside one means it reaches itself) and each pair of components
    (C, D) found becomes the sources in C times the nodes of D: a social graph's giant
    component is searched as one node.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(adj.nodes)
    graph = csr_matrix((np.ones(len(adj.adj), np.int8), adj.adj, adj.ptr), shape=(n, n))
    _, component = connected_components(graph, directed=True, connection="strong")
    tails = np.repeat(np.arange(n), adj.deg)
    condensed = np.unique(np.stack([component[tails], component[adj.adj]], 1), axis=0)
    cadj = Adjacency(condensed[:, 0], condensed[:, 1])
    found = bfs_layers(cadj, cadj.ids(np.unique(component[sources])))
    if not found:
        return adj.nodes[:0], adj.nodes[:0]
    c = cadj.nodes[np.concatenate([s for s, _ in found])]
    d = cadj.nodes[np.concatenate([t for _, t in found])]
    # (C, D) -> (s, D) for each source s in C -> (s, t) for each node t of D.
    counts, s = _grouped(component[sources], adj.nodes[sources], c)
    counts, t = _grouped(component, adj.nodes, np.repeat(d, counts))
    return np.repeat(s, counts), t


def run_closure(rules: tuple[Rule, ...], names: tuple[str, ...], decls: Mapping[str, Decl],
                lower: Mapping[str, pl.DataFrame], facts: Mapping[str, pl.DataFrame],
                share: Share | None = None, limit: Limit | None = None, ranked: bool = True
                ) -> TaskOutcome:
    """Return the closure task's outcome (as run_task's: tuples by round) computed by BFS;
    with `ranked=False`, every tuple in one round (its shortest path is not asked for)."""
    (name,) = names
    # Only the shape regpath generates (a base rule and a step rule, no facts) is a closure of
    # its base rule; anything else (floats too) goes to the generic evaluator.
    if len(rules) != 2 or name in facts or decls[name].choice:
        return run_task(rules, names, decls, lower, facts, share, limit)
    edges = base_tuples(rules, names, decls, lower, facts)[name]
    if edges.dtypes != [pl.Int64, pl.Int64]:
        return run_task(rules, names, decls, lower, facts, share, limit)
    adj = Adjacency(edges["c0"].to_numpy(), edges["c1"].to_numpy())
    starts = edges.select(pl.col("c0").unique().alias("c0"), pl.col("c0").unique().alias("c1"))
    if share is not None:  # this partition's sources: the carried key is the source
        starts = share(name, starts)
    sources = np.sort(adj.ids(starts["c0"].to_numpy()))
    if ranked:
        layers = [(adj.nodes[s], adj.nodes[t]) for s, t in bfs_layers(adj, sources)]
    else:
        s, t = reached(adj, sources)
        layers = [(s, t)] if len(s) else []
    rounds = [{name: pl.DataFrame({"c0": s, "c1": t}, schema=empty_frame(decls[name]).schema)}
              for s, t in layers] or [{name: empty_frame(decls[name])}]
    rows = {name: sum(r[name].height for r in rounds)}
    if limit is not None:  # checked once the search is done: it holds the pairs as arrays
        limit.check(rows[name])
    # run_task counts the last round too, the one that found nothing.
    return TaskOutcome(rounds=rounds, iterations=len(layers), rows=rows)


def task_evaluator(closure: bool, ranked: bool = True):
    """Return what evaluates a task in a worker: the native closure operator (ranked by BFS
    layers, or not) for a path expression's closure, else semi-naive run_task."""
    return partial(run_closure, ranked=ranked) if closure else run_task
