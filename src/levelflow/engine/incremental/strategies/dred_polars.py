"""Rank-based delete-and-rederive for one share of a task, inside one process (a Spark task).

The algorithm of dred_spark.py (its docstring states it and the rank invariant) over Polars frames:
the share's state is in memory, so every step is a local join and the whole update is part of
one Spark job. Constant: the rules, the lower relations' new version and change, the base facts'
change. Produced: the share's new state, and per relation the ranked tuples removed (with their
old ranks) and added (with their new ranks); a tuple re-derived at a new rank is in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from levelflow.engine import rules as rule_plans
from levelflow.engine.incremental.strategies.rewrites import (
    rederive_rule,
    stand_in_decls,
    support_rule,
)
from levelflow.engine.plans.columnar import PolarsOps, body_rows, empty_frame, head_rows
from levelflow.engine.plans.fixpoint import Relation, Share, TaskOutcome, iterate, run_task
from levelflow.engine.plans.keys import distinct_sorted, pack_expr, packable, positions
from levelflow.engine.rules import CompileError, reads_own, rule_heads, var_col
from levelflow.tasks.ast import Decl, Rule, Var

RANK = "_it"


@dataclass(slots=True)
class Inputs:
    """What one epoch brings a task's share: the lower relations and base facts, new and Δ."""

    rules: tuple[Rule, ...]  # the task's rules with a body (symbols encoded)
    names: tuple[str, ...]  # the task's relations
    decls: Mapping[str, Decl]
    lower_new: Mapping[str, pl.DataFrame]
    lower_plus: Mapping[str, pl.DataFrame]
    lower_minus: Mapping[str, pl.DataFrame]
    facts_new: Mapping[str, pl.DataFrame]  # base and program facts of the task's relations
    facts_plus: Mapping[str, pl.DataFrame]
    facts_minus: Mapping[str, pl.DataFrame]
    share: Share | None = None


@dataclass(slots=True)
class Arranged:
    """One share's state of a task: per relation its ranked tuples, their packed keys sorted,
    and each sorted key's row.

    Rows stay where they were appended: an epoch's added tuples are new chunks at the end,
    and only the keys and rows arrays take the insertion (copying the tuples into key order
    cost 3x more per epoch: 64 ms of 150 ms at 5M tuples). A removed tuple's row stays too,
    as a tombstone: the keys and rows arrays no longer name it (copying the rest cost 10-20 ms
    per 10-edge deletion at 500k tuples, paid again by every process catching up on the
    change). Tombstones are dropped once they are a quarter of the rows (_extended).
    """

    ranked: dict[str, pl.DataFrame]  # c0.., _it
    keys: dict[str, np.ndarray | None]  # sorted packed keys (None: the tuples do not pack)
    rows: dict[str, np.ndarray | None]  # row of ranked per sorted key (None: row i)

    def top(self) -> int:
        """Return the highest rank of any relation (the task's one rank scale); tombstones
        count: new ranks need only be above every old one."""
        tops = [df[RANK].max() for df in self.ranked.values() if df.height]
        return int(max(tops)) if tops else 0

    def live(self, name: str) -> pl.DataFrame:
        """Return a relation's ranked tuples, tombstones left out."""
        return _live_rows(self.ranked[name], self.keys[name], self.rows[name])

    def size(self, name: str) -> int:
        """Return a relation's number of tuples."""
        keys = self.keys[name]
        return self.ranked[name].height if keys is None else len(keys)


@dataclass(slots=True)
class Outcome:
    """An update's result: the new state, the ranked tuples removed and added, rounds run."""

    state: Arranged
    removed: dict[str, pl.DataFrame]
    added: dict[str, pl.DataFrame]
    rounds: int


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


def _live_rows(ranked: pl.DataFrame, keys: np.ndarray | None, rows: np.ndarray | None
               ) -> pl.DataFrame:
    """Return the rows of ranked tuples that are not tombstones."""
    gone = _gone(ranked.height, keys, rows)
    return ranked if gone is None else ranked.filter(pl.Series(~gone))


def arrange(ranked: Mapping[str, pl.DataFrame]) -> Arranged:
    """Return the state of ranked relations (c0.., _it), in key order with their keys."""
    return _state_of({n: (*_in_key_order(df), None) for n, df in ranked.items()})


class _Old:
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

    def lookup(self, atom) -> tuple[list[str], _Old, str] | None:
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


_OUT_OF_REACH = np.iinfo(np.int64).max


class _LiveLookups(PolarsOps):
    """PolarsOps whose join with a live own atom whose tuple is bound is a binary search over
    the state's sorted keys (the rank read from the state), not a hash join with the whole
    relation: a support check costs what it checks, not the state's size, every round."""

    __slots__ = ("live",)

    def __init__(self, frames, live: Mapping[int, tuple]) -> None:
        super().__init__(frames)
        self.live = live

    def join(self, cur, adf, on, pos):
        spec = self.live.get(pos)
        if spec is None:
            return super().join(cur, adf, on, pos)
        cols, old, rank_col = spec
        keys = packed(cur.select(on)) if on == cols else None
        if keys is None:  # not bound yet: a hash join, with the suspects' ranks out of reach
            return super().join(cur, adf.with_columns(pl.Series(rank_col, old._live_ranks())),
                                on, pos)
        at = positions(old.keys, keys)
        hit = at >= 0
        return cur.filter(pl.Series(hit)).with_columns(pl.Series(rank_col,
                                                                 old.ranks_at(at[hit])))


class _Members(PolarsOps):
    """PolarsOps whose join with a kept own atom whose every variable is bound is a binary
    search over the kept tuples' sorted keys, not a hash join with the whole relation.

    Such an atom's frame may hold tombstones: a hash join with it (not every variable bound
    yet) keeps a joined row only where the atom's tuple is among the keys.
    """

    __slots__ = ("kept",)

    def __init__(self, frames, kept: Mapping[int, tuple[list[str], np.ndarray]]) -> None:
        super().__init__(frames)
        self.kept = kept

    def join(self, cur, adf, on, pos):
        spec = self.kept.get(pos)
        if spec is None:
            return super().join(cur, adf, on, pos)
        keys = packed(cur.select(on)) if on == spec[0] else None
        if keys is not None:
            return cur.filter(pl.Series(positions(spec[1], keys) >= 0))
        out = super().join(cur, adf, on, pos)
        found = packed(out.select(spec[0]))  # the frame's tuples pack: so do the joined ones
        return out.filter(pl.Series(positions(spec[1], found) >= 0))


def _member_lookups(rule: Rule, names, keys: Mapping[str, np.ndarray | None], shift: int
                    ) -> dict[int, tuple[list[str], np.ndarray]]:
    """Return, per body position (+ shift) of a positive own atom of distinct variables whose
    relation packs, its variables' columns and the relation's sorted kept keys."""
    out = {}
    for i, atom, neg in rule.body_atoms():
        found = keys.get(atom.relation) if atom.relation in names and not neg else None
        variables = [a.name for a in atom.args if isinstance(a, Var)]
        if found is not None and len(found) and len(variables) == len(atom.args) == \
                len(set(variables)):
            out[i + shift] = ([var_col(v) for v in variables], found)
    return out


def _cols(df: pl.DataFrame) -> list[str]:
    return [c for c in df.columns if c != RANK]


def _in_share(inp: Inputs, name: str, df: pl.DataFrame) -> pl.DataFrame:
    return df if inp.share is None or not df.height else inp.share(name, df)


def _heads(rule: Rule, decls, frames, names, first=None, ops=None
           ) -> list[tuple[str, pl.DataFrame]]:
    """Return (relation, head tuples) for each head of `rule` among `names`."""
    body, types = (body_rows(rule, decls, frames, first=first) if ops is None
                   else rule_plans.body_rows(ops, rule, decls, frames, first))
    return [(h.relation, head_rows(body, types, h, decls[h.relation]))
            for h in rule_heads(rule, names)]


def _through_lower(inp: Inputs, deltas: Mapping[str, pl.DataFrame],
                   frames: Mapping[str, pl.DataFrame]) -> dict[str, list[pl.DataFrame]]:
    """Return per relation the heads of derivations through a lower relation's delta."""
    out: dict[str, list[pl.DataFrame]] = {n: [] for n in inp.names}
    for rule in inp.rules:
        atoms = rule.body_atoms()
        for i, atom, neg in atoms:
            d = deltas.get(atom.relation)
            if neg or atom.relation in out or d is None or not d.height:
                continue
            at = {j: frames[a.relation] for j, a, _ in atoms}
            at[i] = d
            for name, heads in _heads(rule, inp.decls, at, inp.names, first=i):
                out[name].append(heads)
    return out


def _candidates(olds: dict[str, _Old], inp: Inputs, seeds: dict) -> dict:
    """Return per relation the distinct old tuples among the seeds not yet suspect, ranked."""
    return {n: old.among(_in_share(inp, n, pl.concat(seeds[n]))) if seeds[n]
            else old.ranked.clear() for n, old in olds.items()}


def _rank_last(df: pl.DataFrame) -> pl.DataFrame:
    """Return ranked tuples shaped as a ranked stand-in: the columns, the rank as c<arity>."""
    return df.rename({RANK: f"c{len(df.columns) - 1}"})


def _supported(olds: dict[str, _Old], inp: Inputs, cands: dict) -> dict:
    """Return per relation the candidates still facts or derivable from smaller-rank tuples."""
    decls = stand_in_decls(inp.decls, inp.names)
    out: dict[str, list[pl.DataFrame]] = {n: [] for n in inp.names}
    for n, c in cands.items():
        facts = inp.facts_new.get(n)
        if c.height and facts is not None and facts.height:
            out[n].append(c.drop(RANK).join(facts, on=_cols(c), how="semi"))
    live: dict[str, pl.DataFrame] = {}
    # Non-recursive rules first (their checks join no state), and a candidate one rule
    # supports is not checked by the next: one derivation is enough.
    left = dict(cands)
    for rule in sorted(inp.rules, key=lambda r: reads_own(r, inp.names)):
        head = rule.heads[0]
        c = left[head.relation]
        if out[head.relation] and c.height:
            c = c.join(out[head.relation][-1], on=_cols(c), how="anti")
            left[head.relation] = c
        if not c.height:
            continue
        prefixed, live_at, other_at = support_rule(rule, inp.names)
        frames, lookups = {0: _rank_last(c)}, {}
        for pos, n in live_at.items():
            spec = olds[n].lookup(prefixed.body[pos])
            if spec is not None:
                lookups[pos], frames[pos] = spec, _rank_last(olds[n].ranked)
                continue
            if n not in live:
                live[n] = _rank_last(olds[n].live())
            frames[pos] = live[n]
        for pos, n in other_at.items():
            frames[pos] = inp.lower_new[n]
        try:
            (_, heads), = _heads(prefixed, decls, frames, (head.relation,), first=0,
                                 ops=_LiveLookups(frames, lookups))
        except CompileError:
            continue  # a head the prefix cannot bind: no support found, the tuple is suspect
        out[head.relation].append(heads)
    return out


def _find_suspects(olds: dict[str, _Old], inp: Inputs, old: Mapping[str, pl.DataFrame]
                   ) -> int:
    """Mark the old tuples that may have lost every derivation as suspect; return the rounds."""
    names = inp.names
    seeds = {n: [inp.facts_minus[n]] if n in inp.facts_minus else [] for n in names}
    for n, heads in _through_lower(inp, inp.lower_minus, old).items():
        seeds[n] += heads
    cands = _candidates(olds, inp, seeds)
    recursive = [r for r in inp.rules if reads_own(r, names)]
    # A support check reads the new lower relations, so a tuple it kept may lean on a lower
    # tuple inserted this epoch: a new suspect's heads are found through old and new ones.
    either = {**{n: pl.concat([old[n], inp.lower_plus[n]]) if n in inp.lower_plus else old[n]
                 for n in inp.lower_new}, **{n: old[n] for n in names}}
    rounds = 0
    while any(c.height for c in cands.values()):
        rounds += 1
        kept = _supported(olds, inp, cands)
        fresh = {}
        for n, c in cands.items():
            lost = c.drop(RANK)
            if kept[n] and lost.height:
                lost = lost.join(pl.concat(kept[n]).unique(), on=lost.columns, how="anti")
            fresh[n] = lost
            olds[n].mark(lost)
        nxt: dict[str, list[pl.DataFrame]] = {n: [] for n in names}
        for rule in recursive:
            atoms = rule.body_atoms()
            for j, atom, neg in atoms:
                if neg or atom.relation not in fresh or not fresh[atom.relation].height:
                    continue
                at = {k: either[a.relation] for k, a, _ in atoms}
                at[j] = fresh[atom.relation]
                for name, heads in _heads(rule, inp.decls, at, names, first=j):
                    nxt[name].append(heads)
        cands = _candidates(olds, inp, nxt)
    return rounds


class _Kept:
    """The tuples each relation keeps after the deletion phase: the old frame (tombstones
    included where the tuples pack), its sorted keys and rows; the live tuples are built only
    where a join reads a relation whole."""

    def __init__(self, split: Mapping[str, tuple]) -> None:
        self.split = split
        self._live: dict[str, pl.DataFrame] = {}

    def frame(self, name: str) -> pl.DataFrame:
        return self.split[name][0].drop(RANK)

    def keys(self, name: str) -> np.ndarray | None:
        return self.split[name][2]

    def live(self, name: str) -> pl.DataFrame:
        """Return the relation's kept tuples, tombstones left out."""
        if name not in self._live:
            ranked, _, keys, rows = self.split[name]
            self._live[name] = _live_rows(ranked, keys, rows).drop(RANK)
        return self._live[name]


class _Frames(Mapping):
    """Relation name -> the tuples a join reads: the kept ones (live), else the lower
    relations' new version; each kept relation built on first use."""

    def __init__(self, inp: Inputs, kept: _Kept) -> None:
        self.inp, self.kept = inp, kept

    def __getitem__(self, name: str) -> pl.DataFrame:
        return self.kept.live(name) if name in self.kept.split else self.inp.lower_new[name]

    def __iter__(self):
        return iter({**self.inp.lower_new, **self.kept.split})

    def __len__(self) -> int:
        return len({**self.inp.lower_new, **self.kept.split})


def _rederived(inp: Inputs, rule: Rule, suspects: pl.DataFrame, kept: _Kept) -> pl.DataFrame:
    """Return the suspects of the rule's head that it derives from the kept and new tuples."""
    head = rule.heads[0]
    decls = stand_in_decls(inp.decls, inp.names)
    atoms = rule.body_atoms()
    frames = _Frames(inp, kept)
    lookups = _member_lookups(rule, inp.names, {n: kept.keys(n) for n in inp.names}, 1)
    # An atom _Members searches by key reads the frame with its tombstones (no copy).
    at = {i + 1: kept.frame(a.relation) if i + 1 in lookups else frames[a.relation]
          for i, a, _ in atoms}
    at[0] = suspects
    try:
        (_, heads), = _heads(rederive_rule(rule, head), decls, at, (head.relation,), first=0,
                             ops=_Members(at, lookups))
        return heads
    except CompileError:
        pass  # a head expression the prefix cannot bind: evaluate the rule plainly
    at = {i: frames[a.relation] for i, a, _ in atoms}
    (_, heads), = _heads(rule, inp.decls, at, (head.relation,))
    return heads.join(suspects, on=heads.columns, how="semi")


def _insert_seeds(inp: Inputs, suspects: dict, kept: _Kept) -> dict[str, list[pl.DataFrame]]:
    """Return what the fixpoint restarts from: inserted facts, re-derived suspects, and the
    heads of derivations through the lower relations' insertions."""
    seeds: dict[str, list[pl.DataFrame]] = {n: [] for n in inp.names}
    for n in inp.names:
        if n in inp.facts_plus:
            seeds[n].append(inp.facts_plus[n])
        facts = inp.facts_new.get(n)
        if suspects[n].height and facts is not None:
            seeds[n].append(suspects[n].join(facts, on=suspects[n].columns, how="semi"))
    for rule in inp.rules:
        d = suspects[rule.heads[0].relation]
        if d.height:
            seeds[rule.heads[0].relation].append(_rederived(inp, rule, d, kept))
    for n, heads in _through_lower(inp, inp.lower_plus, _Frames(inp, kept)).items():
        seeds[n] += heads
    return seeds


# A deletion of at least RECOMPUTE_FRACTION of what the task reads, in a share of at most
# RECOMPUTE_ROWS tuples, recomputes the share instead: there the support checks' rounds cost
# more than materializing (about 7 ms a round of small joins; 10% of a 1,000-edge graph's
# edges deleted: 74-91 ms against 19-29; 10% of a 1,000-edge R-MAT graph's, 87k tuples: 60 ms
# against 35). Larger shares, or smaller deletions, keep DRed: a recompute costs the share.
RECOMPUTE_FRACTION = 0.05
RECOMPUTE_ROWS = 200_000


def update(state: Arranged, inp: Inputs, recompute_rows: int = RECOMPUTE_ROWS) -> Outcome:
    """Return the share's state after the epoch's change, with what it removed and added."""
    if _recompute_cheaper(state, inp, recompute_rows):
        return _recomputed(state, inp)
    names = inp.names
    top = state.top()
    olds = {n: _Old(state.ranked[n], state.keys[n], state.rows[n]) for n in names}
    old_lower = {n: _old_version(inp, n) for n in inp.lower_new}
    rounds = _find_suspects(olds, inp, {**old_lower,
                                        **{n: state.ranked[n].drop(RANK) for n in names}})
    split = {n: old.split() for n, old in olds.items()}
    kept = _Kept(split)
    seeds = _insert_seeds(inp, {n: old.suspects for n, old in olds.items()}, kept)
    rels = {}
    for n in names:
        rel = Relation(inp.decls[n], empty_frame(inp.decls[n]),
                       (lambda n=n: kept.live(n)) if split[n][2] is not None else kept.frame(n),
                       split[n][2])
        # The seeds not kept are the first round: new_tuples looks them up by key.
        rel.advance(rel.new_tuples([_in_share(inp, n, df) for df in seeds[n]]))
        rels[n] = rel
    found = TaskOutcome(rounds=[{n: rel.recent for n, rel in rels.items()}],
                        rows={n: rel.recent.height for n, rel in rels.items()})
    iterate([r for r in inp.rules if reads_own(r, names)], rels, inp.decls, inp.lower_new, found)
    added = _ranked_above(found, names, top)
    state = _state_of({n: _extended(ranked, keys, rows, added[n])
                       for n, (ranked, _, keys, rows) in split.items()})
    return Outcome(state, {n: split[n][1] for n in names}, added, rounds + found.iterations)


def _ranked_above(found: TaskOutcome, names, top: int) -> dict[str, pl.DataFrame]:
    """Return a fixpoint's tuples ranked by its rounds, above every rank up to `top`."""
    return {n: found.relation(n, ranked=True).with_columns(pl.col(RANK) + (top + 1))
            for n in names}


def _state_of(relations: Mapping[str, tuple]) -> Arranged:
    """Return the state of relations given as (ranked, keys, rows)."""
    return Arranged(*({n: parts[k] for n, parts in relations.items()} for k in range(3)))


def applied(state: Arranged, removed: Mapping[str, pl.DataFrame],
            added: Mapping[str, pl.DataFrame]) -> Arranged:
    """Return a state with an update's removed ranked tuples taken out and its added ones in
    (the update's new state, rebuilt from the old one and the change)."""
    new = {}
    for n, ranked in state.ranked.items():
        old = _Old(ranked, state.keys[n], state.rows[n])
        old.mark(removed[n].drop(RANK))
        kept, _, keys, rows = old.split()
        new[n] = _extended(kept, keys, rows, added[n])
    return _state_of(new)


def _recompute_cheaper(state: Arranged, inp: Inputs, recompute_rows: int) -> bool:
    """Return whether the share is small and the deletion large enough to recompute it."""
    deleted = sum(df.height for df in (*inp.lower_minus.values(), *inp.facts_minus.values()))
    read = sum(df.height for df in (*inp.lower_new.values(), *inp.facts_new.values()))
    size = sum(state.size(n) for n in state.ranked)
    return deleted > 0 and size <= recompute_rows and deleted >= RECOMPUTE_FRACTION * read


def _recomputed(state: Arranged, inp: Inputs) -> Outcome:
    """Return the share recomputed from the new inputs, every tuple ranked by the recompute's
    rounds (a valid ranking of the whole new state: a kept tuple's old rank may have no
    derivation below it any more). The change is the (tuple, rank) pairs that differ: a tuple
    kept at its rank is not sent back. A pair can come back after an earlier epoch removed it;
    the Spark-side copy (arranged.Log) cancels the two."""
    out = run_task(inp.rules, inp.names, inp.decls, inp.lower_new, inp.facts_new, inp.share)
    new = arrange({n: out.relation(n, ranked=True) for n in inp.names})
    removed, added = {}, {}
    for n in inp.names:
        removed[n], added[n] = _pairs_differing(state, new, n)
    return Outcome(new, removed, added, out.iterations)


def _pairs_differing(old: Arranged, new: Arranged, name: str
                     ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return a relation's ranked tuples in `old` and not in `new`, and those in `new` and not
    in `old` (a tuple whose rank changed is in both): by the sorted keys where both pack."""
    old_keys, new_keys = old.keys[name], new.keys[name]
    if old_keys is None or new_keys is None:
        before, after = old.live(name), new.live(name)
        return (before.join(after, on=before.columns, how="anti"),
                after.join(before, on=after.columns, how="anti"))
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
    return (old.ranked[name][old_rows[~kept_old]],
            new.ranked[name].filter(pl.Series(~kept_new)))


_CHUNKS = 32  # appended chunks a relation may hold before they are copied into one
_TOMBSTONES = 0.25  # the share of a relation's rows that may be tombstones


def _extended(kept: pl.DataFrame, keys: np.ndarray | None, rows: np.ndarray | None,
              added: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray | None, np.ndarray | None]:
    """Return the kept tuples with the added ones appended, the sorted keys with theirs merged
    in and each key's row: the tuples are not copied, only the two arrays."""
    if keys is not None and rows is not None and len(keys) < kept.height * (1 - _TOMBSTONES):
        kept, rows = kept[rows], None  # into key order, without the tombstones
    if not added.height:
        return kept, keys, rows
    add_keys = packed(added.drop(RANK)) if keys is not None else None
    if add_keys is None:
        ranked, keys = _in_key_order(pl.concat([kept, added]))
        return ranked, keys, None
    order = np.argsort(add_keys)
    at = np.searchsorted(keys, add_keys[order])
    rows = np.arange(kept.height) if rows is None else rows
    ranked = pl.concat([kept, added], rechunk=False)
    if ranked.n_chunks() > _CHUNKS:
        ranked = ranked.rechunk()
    return ranked, np.insert(keys, at, add_keys[order]), np.insert(rows, at, kept.height + order)


def _old_version(inp: Inputs, name: str) -> pl.DataFrame:
    """Return a lower relation's old version: new minus its insertions, plus its deletions."""
    new, plus, minus = inp.lower_new[name], inp.lower_plus.get(name), inp.lower_minus.get(name)
    if plus is not None and plus.height:
        new = new.join(plus, on=new.columns, how="anti")
    if minus is not None and minus.height:
        new = pl.concat([new, minus])
    return new
