"""A left-linear closure's epoch with a deletion, over the sources it touches.

For the closure rules
    p(x, y) :- e(x, y).            p(x, z) :- p(x, y), e(y, z).
a tuple p(x, _) and its derivations read only e and p tuples of the same source x. A source
that reached no tail of a changed edge before the epoch keeps its tuples and their ranks: each
derivation it used reads edges out of nodes it reaches, none of them changed (and a path it
gains would start with an old path to a changed tail). So the epoch finds the touched sources
(the changed edges' tails and every node with an old path to one: a reverse search of the old
edges) and runs delete-and-rederive for them over dense (source, node) tables
(closure_tables.py), where DRed over frames pays a hash join of the relation per round: in a
cycle, deleting an edge suspects every tuple whose support ran through it, many rounds deep.

Constant: the state's packed keys, sorted (a source's tuples are one run of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from levelflow.engine.incremental.strategies.arranged import RANK, Arranged, applied, reranked
from levelflow.engine.incremental.strategies.closure_tables import (
    BLOCK_CELLS,
    blocks,
    changed_pairs,
    shift_for,
)
from levelflow.engine.plans.closure import Adjacency, ranges
from levelflow.engine.plans.keys import bits_for, packable, unpack
from levelflow.tasks.ast import Atom, Rule, Var

BITS = bits_for(2)  # a packed pair: source << BITS | target
MAX_BLOCKS = 16  # blocks of touched sources at most (each costs its rounds' numpy calls)
EDGE_CELLS = 1 << 23  # touched sources x changed edges at most (the first candidates)


def closure_edges(rules, names) -> str | None:
    """Return the edge relation when the rules are exactly a left-linear closure of it (the
    bench's `tc`, a path expression's `e+`), else None."""
    if len(names) != 1 or len(rules) != 2:
        return None
    (name,) = names
    x, y, z = Var("x"), Var("y"), Var("z")
    shapes = []
    for rule in rules:
        if len(rule.heads) != 1 or not all(isinstance(lit, Atom) for lit in rule.body):
            return None
        shapes.append(_renamed(rule))
    base = next((r for r in shapes if len(r.body) == 1), None)
    step = next((r for r in shapes if len(r.body) == 2), None)
    if base is None or step is None or base.heads[0] != Atom(name, (x, y)):
        return None
    edge = base.body[0].relation
    if edge == name or base.body[0] != Atom(edge, (x, y)):
        return None
    want = Rule((Atom(name, (x, y)),), (Atom(name, (x, z)), Atom(edge, (z, y))))
    return edge if step.heads == want.heads and step.body == want.body else None


def _renamed(rule: Rule) -> Rule:
    """Return the rule with its variables renamed x, y, z.. in order of first occurrence (head
    first), so two spellings of one rule compare equal; a non-variable argument stays."""
    names: dict[str, Var] = {}

    def term(t):
        if not isinstance(t, Var) or t.name == "_":
            return t
        return names.setdefault(t.name, Var("xyzuvw"[len(names)] if len(names) < 6 else t.name))

    def atom(a: Atom) -> Atom:
        return Atom(a.relation, tuple(term(t) for t in a.args))
    heads = tuple(atom(h) for h in rule.heads)
    return Rule(heads, tuple(atom(lit) for lit in rule.body))


def _edges(df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return df["c0"].to_numpy(), df["c1"].to_numpy()


def reaching(src: np.ndarray, dst: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Return the nodes with a path of edges src -> dst to any target, the targets included."""
    targets = np.unique(targets)
    if not len(src):
        return targets
    back = Adjacency(dst, src)
    at = np.minimum(back.ids(targets), len(back.nodes) - 1)
    frontier = at[back.nodes[at] == targets]  # targets no edge enters have no predecessor
    seen = np.zeros(len(back.nodes), bool)
    seen[frontier] = True
    while len(frontier):
        nxt = back.adj[ranges(back.ptr[frontier], back.deg[frontier])]
        frontier = np.unique(nxt[~seen[nxt]])
        seen[frontier] = True
    return np.union1d(targets, back.nodes[seen])


def _old_runs(state: Arranged, name: str, sources: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the sorted packed keys and ranks of the sources' live tuples (one run each), and
    each source's count of them."""
    keys = state.keys[name]
    start = np.searchsorted(keys, sources << BITS)
    counts = np.searchsorted(keys, (sources + 1) << BITS) - start
    pos = ranges(start, counts)
    return keys[pos], state.ranks_at(name, pos), counts


def _ranked(keys: np.ndarray, ranks: np.ndarray) -> pl.DataFrame:
    return unpack(keys, ["c0", "c1"]).with_columns(pl.Series(RANK, ranks, pl.Int64))


@dataclass(slots=True)
class ClosureEpoch:
    """An epoch of the closure `name`, planned: the touched sources and their old tuples
    (sorted packed keys, ranks), the new edges and the change."""

    state: Arranged
    name: str
    new_edges: pl.DataFrame
    sources: np.ndarray
    old_keys: np.ndarray
    old_ranks: np.ndarray
    counts: np.ndarray  # per source, its old tuples
    nodes: int  # of the new edges
    removed_edges: pl.DataFrame
    added_edges: pl.DataFrame

    def run(self) -> tuple[Arranged, dict, dict, int, dict]:
        """Return (new state, removed, added, rounds, net): the touched sources' (tuple, rank)
        pairs that changed (closure_tables), and per relation which removed and which added
        pairs are a net change (the others are a tuple re-ranked)."""
        src, dst = _edges(self.new_edges)
        adj, back = (Adjacency(src, dst), Adjacency(dst, src)) if len(src) else (None, None)
        top = self.state.top()
        pieces, rounds = [], 0
        for rows, tuples in blocks(self.sources, self.counts, self.nodes):
            *change, more = changed_pairs(adj, back, self.sources[rows],
                                          self.old_keys[tuples], self.old_ranks[tuples],
                                          self.counts[rows], top, BITS,
                                          _edges(self.removed_edges), _edges(self.added_edges))
            pieces.append(change)
            rounds = max(rounds, more)
        removed_keys, removed_ranks, removed_net, added_keys, added_ranks, added_net = (
            np.concatenate([p[k] for p in pieces]) if pieces else np.empty(0, np.int64)
            for k in range(6))
        removed_net, added_net = removed_net.astype(bool), added_net.astype(bool)
        removed = {self.name: _ranked(removed_keys, removed_ranks)}
        added = {self.name: _ranked(added_keys, added_ranks)}
        # Tuples gone and new change the arrangement; the re-ranked keep their rows.
        state = applied(self.state,
                        {self.name: removed[self.name].filter(pl.Series(removed_net))},
                        {self.name: added[self.name].filter(pl.Series(added_net))})
        state = reranked(state, self.name, added_keys[~added_net], added_ranks[~added_net])
        return state, removed, added, rounds, {self.name: (removed_net, added_net)}


def planned_epoch(state: Arranged, name: str, old_edges: pl.DataFrame,
                  new_edges: pl.DataFrame, removed_edges: pl.DataFrame,
                  added_edges: pl.DataFrame, share=None) -> ClosureEpoch | None:
    """Return the epoch of the closure `name` over tables, its edges going from old to new;
    None where the tuples do not pack or the tables would be too many or too large."""
    if state.keys[name] is None or not packable(new_edges) or not packable(old_edges):
        return None
    src, dst = _edges(old_edges)
    tails = np.concatenate([removed_edges["c0"].to_numpy(), added_edges["c0"].to_numpy()])
    sources = reaching(src, dst, tails)
    if share is not None:
        sources = share(name, pl.DataFrame({"c0": sources, "c1": sources}))["c0"].to_numpy()
    nodes = len(np.unique(np.concatenate(_edges(new_edges))))
    if len(sources) > MAX_BLOCKS * max(1, BLOCK_CELLS >> shift_for(nodes)):
        return None  # a graph of many nodes: a block's tables would hold few sources each
    if len(sources) * (removed_edges.height + added_edges.height) > EDGE_CELLS:
        return None  # a large change: its first candidates are every source times every edge
    return ClosureEpoch(state, name, new_edges, sources, *_old_runs(state, name, sources),
                        nodes, removed_edges, added_edges)
