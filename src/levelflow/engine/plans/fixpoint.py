"""A task's whole fixpoint over Polars frames, in one process: what runs inside a Spark task.

Semi-naive evaluation in datafrog's plain form. Per relation:
  stable - tuples every rule has already used,
  recent - tuples found in the last round,
  to_add - what this round derives, minus stable and recent.
Each recursive rule runs once per recursive body atom, that atom reading `recent`, the atoms
before it `stable` and the atoms after it stable + recent, so each derivation that uses a new
tuple is found once. Constant: the rules, the lower relations. Changes: the three sets.
A relation may be restricted to one share of a key (the partitioned plan): base tuples are
filtered to the share, and recursion carries the key, so derived tuples stay in it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from levelflow.engine.choose import choose, chosen
from levelflow.engine.guard import Limit, check_cancelled
from levelflow.engine.plans.columnar import body_rows, distinct, empty_frame, head_rows
from levelflow.engine.plans.keys import (
    absent,
    distinct_sorted,
    merged,
    pack_expr,
    packable,
    unpack,
)
from levelflow.engine.plans.tiny import TinyRounds
from levelflow.engine.rules import reads_own, rule_heads
from levelflow.tasks.ast import Atom, Decl, Rule

# Filters a relation's base tuples down to the share this partition owns.
Share = Callable[[str, pl.DataFrame], pl.DataFrame]


@dataclass(slots=True)
class TaskOutcome:
    """What a fixpoint produced: per relation its tuples with the round each was found in."""

    rounds: list[dict[str, pl.DataFrame]]  # per round (0 = base): relation -> new tuples
    iterations: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    # Tuples found by rounds run one tuple at a time, per relation, with their round in `_it`
    # (those rounds are empty in `rounds`: a frame per round would cost what they save).
    ranked: dict[str, list[pl.DataFrame]] = field(default_factory=dict)

    def relation(self, name: str, ranked: bool = False) -> pl.DataFrame:
        """Return every tuple of `name`; with `ranked`, an `_it` column holds its round."""
        pieces = [(r, found[name]) for r, found in enumerate(self.rounds) if name in found]
        if ranked:
            pieces = [(r, df.with_columns(pl.lit(r, pl.Int64).alias("_it"))) for r, df in pieces]
        more = self.ranked.get(name, [])
        more = more if ranked else [df.drop("_it") for df in more]
        return pl.concat([df for _, df in pieces] + more, rechunk=False)


class Relation:
    """One relation of the fixpoint: stable and recent tuples, and their packed keys if any."""

    __slots__ = ("decl", "_stable", "recent", "keys", "fresh")

    def __init__(self, decl: Decl, first: pl.DataFrame, stable=None,
                 known: np.ndarray | None = None) -> None:
        self.decl = decl
        # A frame, or a function making it: a resumed fixpoint's kept tuples are built only
        # if a rule reads them whole (dred_polars: its state holds tombstones).
        self._stable = empty_frame(decl) if stable is None else stable
        self.recent = first
        # Sorted packed keys of stable + recent while every tuple packs; None once one does not.
        # `known` holds stable's keys (a resumed fixpoint): without them a stable part disables
        # the keys rather than sorting the whole relation again.
        self.keys = None
        # Keys found since `keys` was last merged, sorted: a round's merge copies this small
        # array, not the whole relation's (a resumed fixpoint over millions of tuples).
        self.fresh = np.empty(0, np.int64)
        if packable(first) and (known is not None or not self.stable.height):
            fresh = np.sort(first.select(pack_expr(first.columns))["_key"].to_numpy())
            self.keys = fresh if known is None else merged(known, fresh) if len(fresh) \
                else known  # resumed with nothing new: the known keys, not a copy

    @property
    def stable(self) -> pl.DataFrame:
        """Return the tuples every rule has already used."""
        if callable(self._stable):
            self._stable = self._stable()
        return self._stable

    def height(self) -> int | None:
        """Return how many tuples were found so far; None while the stable part is not built."""
        return None if callable(self._stable) else self._stable.height + self.recent.height

    def full(self) -> pl.DataFrame:
        """Return every tuple found so far."""
        return pl.concat([self.stable, self.recent], rechunk=False)

    def new_tuples(self, candidates: list[pl.DataFrame]) -> pl.DataFrame:
        """Return the distinct candidates not yet in the relation (and remember their keys)."""
        if not candidates:
            return empty_frame(self.decl)
        cand = pl.concat(candidates, rechunk=False)
        if self.keys is not None and packable(cand):
            cols = cand.columns
            keys = distinct_sorted(cand.select(pack_expr(cols))["_key"].to_numpy())
            new = absent(self.fresh, absent(self.keys, keys))
            self.fresh = merged(self.fresh, new)
            if len(self.fresh) > len(self.keys) // 8:
                self.keys, self.fresh = merged(self.keys, self.fresh), self.fresh[:0]
            return unpack(new, cols)
        self.keys = None
        new = cand.unique()
        return new.join(self.full(), on=new.columns, how="anti") if new.height else new

    def advance(self, new: pl.DataFrame) -> None:
        """Move recent into stable and make `new` the recent delta."""
        if self.recent.height:
            stable, recent = self._stable, self.recent
            self._stable = (lambda: pl.concat([stable(), recent], rechunk=False)) \
                if callable(stable) else pl.concat([stable, recent], rechunk=False)
        self.recent = new


def _frames(rule: Rule, lower: Mapping[str, pl.DataFrame],
            own: Mapping[str, pl.DataFrame]) -> dict[int, pl.DataFrame]:
    """Return the frame each body atom reads (own relations from `own`, others from lower)."""
    return {i: own[atom.relation] if atom.relation in own else lower[atom.relation]
            for i, atom, _ in rule.body_atoms()}


def base_tuples(rules, names, decls, lower, facts, limit: Limit | None = None
                ) -> dict[str, pl.DataFrame]:
    """Return each relation's tuples that need no recursion: facts and non-recursive rules."""
    parts = {n: [facts[n]] if n in facts else [] for n in names}
    for rule in rules:
        if rule.body and not reads_own(rule, names):
            body, types = body_rows(rule, decls, _frames(rule, lower, {}), limit=limit)
            for head in rule_heads(rule, names):
                parts[head.relation].append(head_rows(body, types, head, decls[head.relation]))
    return {n: distinct(pl.concat(p)) if p else empty_frame(decls[n]) for n, p in parts.items()}


def rule_round(rules, rels: dict[str, Relation], decls, lower, limit: Limit | None = None
               ) -> dict[str, list[pl.DataFrame]]:
    """Return per relation the candidate tuples one semi-naive round derives."""
    names = tuple(rels)
    to_add: dict[str, list[pl.DataFrame]] = {n: [] for n in names}
    for rule in rules:
        own = [i for i, lit in enumerate(rule.body)
               if isinstance(lit, Atom) and lit.relation in names]
        frames = _frames(rule, lower, {n: rels[n].recent for n in names})
        for k, pos in enumerate(own):
            if not rels[rule.body[pos].relation].recent.height:
                continue
            # path(x, z) :- path(x, y), path(y, z).  is  Δpath ⋈ (path ∪ Δpath), path ⋈ Δpath
            for j in own:
                rel = rels[rule.body[j].relation]
                frames[j] = (rel.recent if j == pos else rel.stable if j in own[:k]
                             else rel.full())
            body, types = body_rows(rule, decls, frames, first=pos, limit=limit)
            for head in rule_heads(rule, names):
                to_add[head.relation].append(head_rows(body, types, head, decls[head.relation]))
    return to_add


def run_task(rules: tuple[Rule, ...], names: tuple[str, ...], decls: Mapping[str, Decl],
             lower: Mapping[str, pl.DataFrame], facts: Mapping[str, pl.DataFrame],
             share: Share | None = None, limit: Limit | None = None,
             tuple_rounds: bool = True) -> TaskOutcome:
    """Return the fixpoint of a task's rules over lower relations and facts (one share of it);
    past `limit`, TupleLimit after the round that passed it.

    `tuple_rounds=False`: every round over frames, even a tiny one (iterate)."""
    base = base_tuples(rules, names, decls, lower, facts, limit)
    base = {n: choose(decls[n], df) for n, df in base.items()}  # choice-domain's round 0
    if share is not None:
        base = {n: share(n, df) for n, df in base.items()}
    outcome = TaskOutcome(rounds=[base], rows={n: df.height for n, df in base.items()})
    recursive = [r for r in rules if r.body and reads_own(r, names)]
    if not recursive:
        if limit is not None:
            limit.check(sum(outcome.rows.values()))
        return outcome
    rels = {n: Relation(decls[n], base[n]) for n in names}
    iterate(recursive, rels, decls, lower, outcome, limit, tuple_rounds)
    return outcome


def iterate(rules, rels: dict[str, Relation], decls: Mapping[str, Decl],
            lower: Mapping[str, pl.DataFrame], outcome: TaskOutcome,
            limit: Limit | None = None, tuple_rounds: bool = True) -> None:
    """Run semi-naive rounds until no relation has recent tuples, recording each round.

    A round whose delta is tiny runs one tuple at a time (tuples.py), with the same rounds;
    `tuple_rounds=False` runs every round over frames. Past `limit`, TupleLimit.
    """
    # A chosen relation keeps per round what engine/choose.py keeps: rounds over frames only.
    tuple_rounds = tuple_rounds and not chosen(decls, rels)
    tiny = TinyRounds(rules, rels, decls, lower, outcome, limit) if tuple_rounds else None
    while any(rel.recent.height for rel in rels.values()):
        check_cancelled()
        if limit is not None:
            limit.check(sum(outcome.rows.values()))
        if tiny is not None and tiny.usable():
            tiny.stretch()
            continue
        outcome.iterations += 1
        to_add = rule_round(rules, rels, decls, lower, limit)
        found = {}
        for name, rel in rels.items():
            new = rel.new_tuples(to_add[name])
            if rel.decl.choice:  # a rejected candidate's key stays known: it never comes in
                new = choose(rel.decl, new, rel.full())
            rel.advance(new)
            found[name] = new
            outcome.rows[name] += new.height
        outcome.rounds.append(found)
        if tiny is not None:
            tiny.missed(found)
