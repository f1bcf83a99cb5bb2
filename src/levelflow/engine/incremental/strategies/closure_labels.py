"""A left-linear closure's stored ranks are labels: its worker sends the net change only.

A deletion on a cycle re-ranks many tuples that stay: on bench_shapes' graphs 10k-650k
(tuple, rank) pairs change for 7k-71k tuples gone, and a 50% recompute re-ranks every tuple.
Sent back, kept in the Spark-side copy and written as segments, each re-ranked tuple is a
removed and an added row: that traffic cost more than the update.

So for a closure task (`labelled`) the worker keeps valid ranks (dred.py's invariant) in
memory, and the stored copies (the Spark-side log, the durable state) keep each tuple at the
rank it was last sent with: its label. The worker remembers the labels that differ from the
ranks (`Labels`) and sends only tuples gone (at their labels) and tuples new (at their ranks,
their labels from then on). Labels are not ranks: the Spark-side DRed must not delete over
them (epoch.py recomputes such a task instead, while the snapshot marks the relation
`labelled`). An epoch over bit matrices (closure_bits) needs no ranks and leaves the worker's
ranks stale (the labels themselves); a worker whose ranks are stale, or that is shipped a
stored copy, ranks it anew from its edges (`ranked_anew`: BFS layers) before DRed deletes.

Constant: the packed-key layout of arranged.py. Changes: per relation, the sorted packed keys
of the tuples whose label is not their rank, and those labels.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import polars as pl

from levelflow.engine.incremental.strategies.arranged import RANK, Arranged, arrange, packed
from levelflow.engine.incremental.strategies.closure_epoch import closure_edges
from levelflow.engine.plans.closure import run_closure
from levelflow.engine.plans.keys import positions, unpack

# relation -> (sorted packed keys, their labels) of the tuples whose label is not their rank
Labels = dict[str, tuple[np.ndarray, np.ndarray]]
NO_LABELS = (np.empty(0, np.int64), np.empty(0, np.int64))


def labelled(rules, names, decls, facts: Collection[str], inputs: Collection[str]) -> bool:
    """Return whether a task's stored ranks may be labels: a left-linear closure of integers
    with no facts of its own, so its ranks can be found again from its edges alone."""
    if closure_edges(rules, names) is None:
        return False
    (name,) = names
    return name not in facts and name not in inputs and \
        all(t in ("number", "unsigned") for t in decls[name].types)


def _absent(other: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Return which keys the array `other` (in any order) does not hold."""
    return positions(np.sort(other), keys) < 0


def at_labels(lkeys: np.ndarray, lvals: np.ndarray, keys: np.ndarray, ranks: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Return the stored label of each of `keys` (its rank in `ranks` where no label differs)
    and which labels (lkeys, lvals) are of none of them."""
    at = positions(lkeys, keys)
    hit = at >= 0
    label = ranks.copy()
    label[hit] = lvals[at[hit]]
    others = np.ones(len(lkeys), bool)
    others[at[hit]] = False
    return label, others


def sent(old: Arranged, out, labels: Labels) -> tuple[object, Labels]:
    """Return an update's outcome as its worker sends it, and the labels after it: the net
    change, each tuple gone at its label. Where this epoch's tuples do not pack, the whole
    change, each labelled tuple moved to its rank (no labels after)."""
    removed, added, net, after = {}, {}, {}, {}
    for n in out.removed:
        rem, add = out.removed[n], out.added[n]
        rkeys, akeys = packed(rem.drop(RANK)), packed(add.drop(RANK))
        lkeys, lvals = labels.get(n, NO_LABELS)
        if rkeys is None or akeys is None or out.state.keys[n] is None:
            removed[n], added[n] = _flushed(old, n, rem, add, lkeys, lvals, rkeys)
            net[n] = None
            continue
        rnet, anet = out.net[n] if out.net is not None and out.net.get(n) is not None \
            else (_absent(akeys, rkeys), _absent(rkeys, akeys))
        # A label of a tuple gone or re-ranked is dropped: entered again below if still unlike.
        label, keep = at_labels(lkeys, lvals, rkeys, rem[RANK].to_numpy())
        moved, moved_label = _by_key(rkeys[~rnet], label[~rnet])
        _, rank = _by_key(akeys[~anet], add[RANK].to_numpy()[~anet])  # the same tuples
        unlike = moved_label != rank
        # Two sorted runs merged: the labels kept, the re-ranked tuples' that still differ.
        at = np.searchsorted(lkeys[keep], moved[unlike])
        keys = np.insert(lkeys[keep], at, moved[unlike])
        vals = np.insert(lvals[keep], at, moved_label[unlike])
        if len(keys):
            after[n] = (keys, vals)
        removed[n] = rem.filter(pl.Series(rnet)).with_columns(pl.Series(RANK, label[rnet]))
        added[n] = add.filter(pl.Series(anet))
        net[n] = (np.ones(removed[n].height, bool), np.ones(added[n].height, bool))
    return type(out)(out.state, removed, added, out.rounds, net), after


def _by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    return keys[order], values[order]


def _flushed(old: Arranged, name: str, rem: pl.DataFrame, add: pl.DataFrame,
             lkeys: np.ndarray, lvals: np.ndarray, rkeys: np.ndarray | None
             ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return the whole change with every labelled tuple moved to its rank: a tuple the
    change removes goes at its label, the others are removed at it and added at their rank."""
    if not len(lkeys):
        return rem, add
    # Labels were made from packed keys of the old state: its removed tuples pack too.
    label, rest = at_labels(lkeys, lvals, rkeys, rem[RANK].to_numpy())
    cols = [c for c in rem.columns if c != RANK]
    tuples = unpack(lkeys[rest], cols)
    gone = tuples.with_columns(pl.Series(RANK, lvals[rest], pl.Int64))
    ranks = old.ranks_at(name, positions(old.keys[name], lkeys[rest]))
    back = tuples.with_columns(pl.Series(RANK, ranks, pl.Int64))
    return (pl.concat([rem.with_columns(pl.Series(RANK, label)), gone.select(rem.columns)]),
            pl.concat([add, back.select(add.columns)]))


def ranked_anew(state: Arranged, rules, names, decls: Mapping, edges: pl.DataFrame, share
                ) -> tuple[Arranged, Labels]:
    """Return a shipped state (its stored copy, ranked by labels) ranked by its edges' BFS
    layers, and its labels where they are not those ranks. A stored copy that is not the
    closure of its edges is a broken state: it raises."""
    (name,) = names
    out = run_closure(rules, names, decls, {closure_edges(rules, names): edges}, {}, share)
    new = arrange({name: out.relation(name, ranked=True)})
    keys, stored = new.keys[name], state.keys[name]
    if keys is None or stored is None:  # labels are made only where the tuples pack
        return state, {}
    if not np.array_equal(keys, stored):
        raise RuntimeError(f"the stored tuples of {name} are not the closure of its edges "
                           f"({len(stored)} stored, {len(keys)} derived)")
    label = state.ranks_at(name, positions(stored, keys))
    unlike = label != new.ranked[name][RANK].to_numpy()  # arranged: rows in key order
    return new, ({name: (keys[unlike], label[unlike])} if unlike.any() else {})
