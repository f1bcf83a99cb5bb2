"""A share's ranked tuples in one process (`Arranged`): rows in the order they were appended,
packed keys sorted with each key's row, a removed tuple's row a tombstone until they are a
quarter of the rows. What delete-and-rederive in Polars (dred_polars.py) updates, and what a
Python worker keeps between epochs (backends/worker/dred_share.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl

from levelflow.engine.plans.keys import distinct_sorted, pack_expr, packable, positions
from levelflow.engine.rules import var_col
from levelflow.tasks.ast import Var

RANK = "_it"
_OUT_OF_REACH = np.iinfo(np.int64).max  # the rank of a suspect: no support below it




@dataclass(slots=True, weakref_slot=True)  # closure_bits keeps a matrix per live state
class Arranged:
    """One share's state of a task: per relation its ranked tuples, their packed keys sorted,
    and each sorted key's row.

    Rows stay where they were appended: an epoch's added tuples are new chunks at the end,
    and only the keys and rows arrays take the insertion (copying the tuples into key order
    cost 3x more per epoch: 64 ms of 150 ms at 5M tuples). A removed tuple's row stays too,
    as a tombstone: the keys and rows arrays no longer name it (copying the rest cost 10-20 ms
    per 10-edge deletion at 500k tuples, paid again by every process catching up on the
    change). Tombstones are dropped once they are a quarter of the rows (extended).
    """

    ranked: dict[str, pl.DataFrame]  # c0.., _it
    keys: dict[str, np.ndarray | None]  # sorted packed keys (None: the tuples do not pack)
    rows: dict[str, np.ndarray | None]  # row of ranked per sorted key (None: row i)
    # top()'s answer where known when the state was made (`changed`): a max over a rank
    # column of many chunks, twice an epoch, cost 1-2 ms at 1M tuples.
    known_top: int | None = field(default=None, compare=False)

    def top(self) -> int:
        """Return the highest rank of any relation (the task's one rank scale); tombstones
        count: new ranks need only be above every old one."""
        if self.known_top is not None:
            return self.known_top
        tops = [df[RANK].max() for df in self.ranked.values() if df.height]
        return int(max(tops)) if tops else 0

    def live(self, name: str) -> pl.DataFrame:
        """Return a relation's ranked tuples, tombstones left out."""
        return live_rows(self.ranked[name], self.keys[name], self.rows[name])

    def size(self, name: str) -> int:
        """Return a relation's number of tuples."""
        keys = self.keys[name]
        return self.ranked[name].height if keys is None else len(keys)

    def rows_at(self, name: str, pos: np.ndarray) -> np.ndarray:
        """Return the rows of a relation's tuples at sorted-key positions."""
        rows = self.rows[name]
        return pos if rows is None else rows[pos]

    def ranks_at(self, name: str, pos: np.ndarray) -> np.ndarray:
        """Return the ranks of a relation's tuples at sorted-key positions."""
        # A gather: the rank column is many appended chunks, and to_numpy copied all of them
        # (45 ms at 10M tuples, for the 60k a deletion on bench_shapes' clusters removes).
        return self.ranked[name][RANK].gather(self.rows_at(name, pos)).to_numpy(writable=True)


def packed(df: pl.DataFrame) -> np.ndarray | None:
    """Return the packed keys of a frame of tuples (row order), or None if they do not pack."""
    if not packable(df):
        return None
    return df.select(pack_expr(df.columns))["_key"].to_numpy()


def _in_key_order(ranked: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray | None]:
    """Return ranked tuples sorted by packed key, and the keys (None: left as they are)."""
    keys = packed(ranked.drop(RANK))
    if keys is None:
        return ranked, None
    order = np.argsort(keys, kind="stable")  # sorted runs (kept + added) merge in linear time
    return ranked[order], keys[order]


def _gone(height: int, keys: np.ndarray | None, rows: np.ndarray | None) -> np.ndarray | None:
    """Return the mask of tombstones (rows no key names), or None when there are none."""
    if keys is None or rows is None or len(keys) == height:
        return None
    gone = np.ones(height, bool)
    gone[rows] = False
    return gone


def live_rows(ranked: pl.DataFrame, keys: np.ndarray | None, rows: np.ndarray | None
               ) -> pl.DataFrame:
    """Return the rows of ranked tuples that are not tombstones."""
    gone = _gone(ranked.height, keys, rows)
    return ranked if gone is None else ranked.filter(pl.Series(~gone))


def arrange(ranked: Mapping[str, pl.DataFrame]) -> Arranged:
    """Return the state of ranked relations (c0.., _it), in key order with their keys."""
    return state_of({n: (*_in_key_order(df), None) for n, df in ranked.items()})


class OldTuples:
    """A relation's old ranked tuples and which of them are suspect so far.

    Where the tuples pack, lookups are binary searches over the sorted keys, mapped to rows,
    and suspects are a mask over the rows (tombstones are hidden as suspects are); otherwise
    they are joins.
    """

    def __init__(self, ranked: pl.DataFrame, keys: np.ndarray | None,
                 rows: np.ndarray | None) -> None:
        self.ranked, self.keys, self.rows = ranked, keys, rows
        self.mask = np.zeros(ranked.height, bool) if keys is not None else None
        self.marked: list[np.ndarray] = []  # the suspects' sorted-key positions
        self.suspects = ranked.drop(RANK).clear()
        self._ranks: np.ndarray | None = None

    @cached_property
    def gone(self) -> np.ndarray | None:
        """Return the mask of tombstones, or None: built when a read needs it (an insertion
        never does; at 5M tuples it is a 5M-element pass)."""
        return _gone(self.ranked.height, self.keys, self.rows)

    def _row(self, pos: np.ndarray) -> np.ndarray:
        """Return the rows of sorted-key positions."""
        return pos if self.rows is None else self.rows[pos]

    def among(self, cand: pl.DataFrame) -> pl.DataFrame:
        """Return the old ranked tuples among `cand` that are not suspect yet, once each."""
        if not cand.height or not self.ranked.height:
            return self.ranked.clear()
        if self.keys is None:
            if self.suspects.height:
                cand = cand.join(self.suspects, on=cand.columns, how="anti")
            return self.ranked.join(cand, on=cand.columns, how="semi")
        keys = packed(cand)
        if keys is None:  # a value out of the packed range, which no old tuple holds
            hits = self.ranked.with_row_index("_pos").join(cand, on=cand.columns, how="semi")
            row = hits["_pos"].to_numpy().astype(np.int64)
            if self.gone is not None:
                row = row[~self.gone[row]]
        else:
            pos = positions(self.keys, distinct_sorted(keys))
            row = self._row(pos[pos >= 0])
        return self.ranked[row[~self.mask[row]]]

    def mark(self, lost: pl.DataFrame) -> None:
        """Record new suspects (old tuples, not suspect before)."""
        if not lost.height:
            return
        self.suspects = pl.concat([self.suspects, lost])
        if self.mask is not None:
            pos = positions(self.keys, packed(lost))
            self.marked.append(pos)
            self.mask[self._row(pos)] = True

    def live(self) -> pl.DataFrame:
        """Return the old ranked tuples not suspect (suspects ranked out of reach instead)."""
        if not self.suspects.height and self.gone is None:
            return self.ranked
        if self.mask is None:
            return self.ranked.join(self.suspects, on=self.suspects.columns, how="anti")
        return self.ranked.with_columns(pl.Series(RANK, self._live_ranks()))

    def _row_ranks(self) -> np.ndarray:
        if self._ranks is None:
            self._ranks = self.ranked[RANK].to_numpy()
        return self._ranks

    def _live_ranks(self) -> np.ndarray:
        """Return the ranks by row, each suspect's out of reach (mask, not a join)."""
        ranks = self._row_ranks()
        hidden = self.mask if self.gone is None else self.mask | self.gone
        return np.where(hidden, _OUT_OF_REACH, ranks) if self.suspects.height or \
            self.gone is not None else ranks

    def ranks_at(self, pos: np.ndarray) -> np.ndarray:
        """Return the live ranks of the tuples at sorted-key positions."""
        row = self._row(pos)
        return np.where(self.mask[row], _OUT_OF_REACH, self._row_ranks()[row])

    def lookup(self, atom) -> tuple[list[str], OldTuples, str] | None:
        """Return how _LiveLookups finds a live atom `r(x1..xk, rank)` of this relation: its
        tuple's variable columns, this relation, the rank variable's column. None where the
        tuples do not pack or the arguments are not k+1 distinct variables."""
        args = atom.args
        names = [a.name for a in args if isinstance(a, Var)]
        if self.keys is None or not len(self.keys) or len(names) != len(args) or \
                len(set(names)) != len(names):
            return None
        return [var_col(n) for n in names[:-1]], self, var_col(names[-1])

    def split(self) -> tuple[pl.DataFrame, pl.DataFrame, np.ndarray | None, np.ndarray | None]:
        """Return (kept, removed, kept's sorted keys, their rows): the old ranked tuples not
        suspect and suspect. Where the tuples pack, kept is the old frame: the suspects'
        rows become tombstones, their keys leave the keys array."""
        if not self.suspects.height:
            return self.ranked, self.ranked.clear(), self.keys, self.rows
        if self.mask is None:
            cols = self.suspects.columns
            return (self.ranked.join(self.suspects, on=cols, how="anti"),
                    self.ranked.join(self.suspects, on=cols, how="semi"), None, None)
        pos = np.concatenate(self.marked)
        rows = np.arange(self.ranked.height) if self.rows is None else self.rows
        return self.ranked, self.ranked[rows[pos]], np.delete(self.keys, pos), \
            np.delete(rows, pos)


def state_of(relations: Mapping[str, tuple]) -> Arranged:
    """Return the state of relations given as (ranked, keys, rows)."""
    return Arranged(*({n: parts[k] for n, parts in relations.items()} for k in range(3)))


def applied(state: Arranged, removed: Mapping[str, pl.DataFrame],
            added: Mapping[str, pl.DataFrame]) -> Arranged:
    """Return a state with an update's removed ranked tuples taken out and its added ones in
    (the update's new state, rebuilt from the old one and the change)."""
    new = {}
    for n, ranked in state.ranked.items():
        old = OldTuples(ranked, state.keys[n], state.rows[n])
        old.mark(removed[n].drop(RANK))
        kept, _, keys, rows = old.split()
        new[n] = extended(kept, keys, rows, added[n])
    return state_of(new)


def changed(state: Arranged, name: str, gone: np.ndarray, added: pl.DataFrame) -> Arranged:
    """Return the state with a packed relation's tuples at sorted-key positions `gone` taken
    out (tombstones) and the ranked tuples `added` in: applied's result where the positions
    are known (finding them again cost a third of applied at 10M tuples)."""
    keys, rows = state.keys[name], state.rows[name]
    if len(gone):
        keep = np.ones(len(keys), bool)
        keep[gone] = False
        keys, rows = keys[keep], (np.flatnonzero(keep) if rows is None else rows[keep])
    kept = state.ranked[name]
    out = state_of({**{n: (state.ranked[n], state.keys[n], state.rows[n])
                       for n in state.ranked},
                    name: extended(kept, keys, rows, added)})
    if out.ranked[name].height == kept.height + added.height:  # every old row kept: the top
        out.known_top = max(state.top(), int(added[RANK].max()) if added.height else 0)
    return out


def reranked(state: Arranged, name: str, keys: np.ndarray, ranks: np.ndarray) -> Arranged:
    """Return the state with the tuples at packed `keys` (all held) given new `ranks`, in
    place of their rows: no tombstone and no appended row, as a removal and an addition
    would leave (a deletion on a cycle re-ranks up to 400k of 1M tuples)."""
    if not len(keys):
        return state
    column = state.ranked[name][RANK].to_numpy().copy()
    column[state.rows_at(name, positions(state.keys[name], keys))] = ranks
    return Arranged({**state.ranked, name: state.ranked[name].with_columns(
                        pl.Series(RANK, column, pl.Int64))},
                    state.keys, state.rows)


def pairs_differing(old: Arranged, new: Arranged, name: str
                     ) -> tuple[pl.DataFrame, pl.DataFrame, tuple | None]:
    """Return a relation's ranked tuples in `old` and not in `new`, those in `new` and not in
    `old` (a tuple whose rank changed is in both), and, where both pack, which of each are a
    net change (a tuple gone, a tuple new): by the sorted keys."""
    old_keys, new_keys = old.keys[name], new.keys[name]
    if old_keys is None or new_keys is None:
        before, after = old.live(name), new.live(name)
        return (before.join(after, on=before.columns, how="anti"),
                after.join(before, on=after.columns, how="anti"), None)
    old_rows = np.arange(len(old_keys)) if old.rows[name] is None else old.rows[name]
    old_ranks = old.ranked[name][RANK].to_numpy()[old_rows]  # in key order
    new_ranks = new.ranked[name][RANK].to_numpy()  # arranged: row order is key order
    at = positions(old_keys, new_keys)
    hit = np.flatnonzero(at >= 0)
    same = hit[old_ranks[at[hit]] == new_ranks[hit]]
    kept_old = np.zeros(len(old_keys), bool)
    kept_old[at[same]] = True
    kept_new = np.zeros(len(new_keys), bool)
    kept_new[same] = True
    still = np.zeros(len(old_keys), bool)  # the old tuple is there, at whatever rank
    still[at[hit]] = True
    return (old.ranked[name][old_rows[~kept_old]],
            new.ranked[name].filter(pl.Series(~kept_new)),
            (~still[~kept_old], at[~kept_new] < 0))


_CHUNKS = 32  # appended chunks a relation may hold before they are copied into one
_TOMBSTONES = 0.25  # the share of a relation's rows that may be tombstones


def extended(kept: pl.DataFrame, keys: np.ndarray | None, rows: np.ndarray | None,
              added: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray | None, np.ndarray | None]:
    """Return the kept tuples with the added ones appended, the sorted keys with theirs merged
    in and each key's row: the tuples are not copied, only the two arrays."""
    if keys is not None and rows is not None and len(keys) < kept.height * (1 - _TOMBSTONES):
        kept, rows = kept[rows], None  # into key order, without the tombstones
    if not added.height:
        return kept, keys, rows
    add_keys = packed(added.drop(RANK)) if keys is not None else None
    if add_keys is None:  # the tuples stop packing: tombstones must not come back with them
        live = kept if rows is None else kept[rows]
        ranked, keys = _in_key_order(pl.concat([live, added]))
        return ranked, keys, None
    order = np.argsort(add_keys)
    at = np.searchsorted(keys, add_keys[order])
    rows = np.arange(kept.height) if rows is None else rows
    ranked = pl.concat([kept, added], rechunk=False)
    if ranked.n_chunks() > _CHUNKS:
        ranked = ranked.rechunk()
    return ranked, np.insert(keys, at, add_keys[order]), np.insert(rows, at, kept.height + order)
