"""A task with subsumptive rules: its fixpoint with dominated tuples pruned in every round.

What levelflow computes (docs/language.md, "Subsumption"). Let T be one application of the
task's rules and P(Y) the tuples of Y that survive its subsumptive rules evaluated over Y:
t in Y is removed when some other u in Y dominates it (a pair (t, u) of `@sub:r`), unless t
also dominates u and t comes first in the relation's order (of tuples that dominate each other
the smallest is kept). Starting from a seed X0 (empty from scratch),

    X_{i+1} = P(X_i ∪ T(X_i))   until X_{i+1} = X_i,

evaluated semi-naively: each round derives only from the last round's survivors, and prunes
only pairs with at least one tuple new this round (older tuples already survived each other).
Derivations from a tuple pruned later stay until something prunes them. Shortest distances
(`dist(x, d1) <= dist(x, d2) :- d2 <= d1.`) are then Bellman-Ford rounds: they end on cyclic
graphs (without negative cycles) with one tuple per node, its shortest distance.

Constant: the rules, the lower relations. Changes: each relation's kept tuples and last round.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import reduce

import polars as pl

from levelflow.engine.guard import Limit
from levelflow.engine.plans.columnar import body_rows, empty_frame, head_rows
from levelflow.engine.plans.fixpoint import TaskOutcome, base_tuples, rule_round
from levelflow.engine.rules import reads_own
from levelflow.tasks.ast import Decl, Rule
from levelflow.tasks.subsume import SUB, pair_decl, subsumed


class Kept:
    """A relation's surviving tuples: `stable` (older rounds) and `recent` (the last round)."""

    __slots__ = ("stable", "recent")

    def __init__(self, stable: pl.DataFrame, recent: pl.DataFrame) -> None:
        self.stable, self.recent = stable, recent

    def full(self) -> pl.DataFrame:
        """Return every surviving tuple."""
        return pl.concat([self.stable, self.recent], rechunk=False)


def _pairs(rule: Rule, decls, lower, side0: pl.DataFrame, side1: pl.DataFrame,
           whole: pl.DataFrame) -> pl.DataFrame:
    """Return the (dominated, dominating) pairs of one subsumptive rule, the dominated tuple
    from `side0`, the dominating from `side1`, the body's other atoms of r from `whole`."""
    name = subsumed(rule)
    frames = {}
    for i, atom, _ in rule.body_atoms():
        frames[i] = side0 if i == 0 else side1 if i == 1 else \
            whole if atom.relation == name else lower[atom.relation]
    body, types = body_rows(rule, decls, frames)
    return head_rows(body, types, rule.heads[0], decls[rule.heads[0].relation])


def _before(a: list[str], b: list[str]) -> pl.Expr:
    """Return whether tuple b comes before tuple a (columns left to right)."""
    return reduce(lambda rest, i: (pl.col(b[i]) < pl.col(a[i])) |
                  ((pl.col(b[i]) == pl.col(a[i])) & rest),
                  reversed(range(len(a))), pl.lit(False))


def prune(subs: list[Rule], decls, lower, old: pl.DataFrame, new: pl.DataFrame
          ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (old, new) without the tuples another tuple of old ∪ new dominates (`new`:
    distinct tuples not in `old`, which holds no pair that removes one of its own)."""
    if not new.height or not subs:
        return old, new
    cols = list(old.columns)
    n = len(cols)
    whole = pl.concat([old, new], rechunk=False)
    pairs = pl.concat([p for rule in subs
                       for p in (_pairs(rule, decls, lower, new, whole, whole),
                                 _pairs(rule, decls, lower, old, new, whole))],
                      rechunk=False).unique()
    a, b = list(pairs.columns[:n]), list(pairs.columns[n:])
    pairs = pairs.filter(~reduce(lambda x, y: x & y,
                                 [pl.col(x) == pl.col(y) for x, y in zip(a, b, strict=True)]))
    if not pairs.height:
        return old, new
    swapped = pairs.select([pl.col(x).alias(y) for x, y in zip(a + b, b + a, strict=True)])
    mutual = pairs.join(swapped, on=a + b, how="semi")
    lost = pl.concat([pairs.join(swapped, on=a + b, how="anti"),
                      mutual.filter(_before(a, b))], rechunk=False)
    gone = lost.select([pl.col(x).alias(c) for x, c in zip(a, cols, strict=True)]).unique()
    return (old.join(gone, on=cols, how="anti"),
            new.join(gone, on=cols, how="anti"))


def run_subsumed(rules: tuple[Rule, ...], names: tuple[str, ...], decls: Mapping[str, Decl],
                 lower: Mapping[str, pl.DataFrame], facts: Mapping[str, pl.DataFrame],
                 share=None, limit: Limit | None = None, *, subs: tuple[Rule, ...] = (),
                 seed: Mapping[str, pl.DataFrame] | None = None, check=None) -> TaskOutcome:
    """Return the pruned fixpoint of a task (every tuple in round 0), from `seed` (surviving
    tuples of an earlier fixpoint, which its rules are applied to once more) or from empty.
    `check()` runs before each round and raises to stop (in the driver, an epoch's deadline)."""
    decls = dict(decls)
    for rule in subs:
        decls.setdefault(SUB + subsumed(rule), pair_decl(decls[subsumed(rule)]))
    by_rel = {n: [r for r in subs if subsumed(r) == n] for n in names}
    recursive = [r for r in rules if r.body and reads_own(r, names)]
    cand = base_tuples(rules, names, decls, lower, facts, limit)
    kept = {n: Kept(empty_frame(decls[n]), empty_frame(decls[n])) for n in names}
    if seed is not None:
        kept = {n: Kept(empty_frame(decls[n]), seed[n]) for n in names}
        more = rule_round(recursive, kept, decls, lower, limit)
        cand = {n: pl.concat([cand[n], *more[n]]).unique() for n in names}
        kept = {n: Kept(seed[n], empty_frame(decls[n])) for n in names}
    iterations = 0
    while True:
        for n in names:
            old = kept[n].full()
            new = cand[n].join(old, on=old.columns, how="anti") \
                if old.height and cand[n].height else cand[n]
            old, new = prune(by_rel[n], decls, lower, old, new)
            kept[n] = Kept(old, new)
        if limit is not None:
            limit.check(sum(k.stable.height + k.recent.height for k in kept.values()))
        if not recursive or not any(k.recent.height for k in kept.values()):
            break
        iterations += 1
        if check is not None:
            check()
        more = rule_round(recursive, kept, decls, lower, limit)
        cand = {n: pl.concat(more[n]).unique() if more[n] else empty_frame(decls[n])
                for n in names}
    found = {n: k.full() for n, k in kept.items()}
    return TaskOutcome(rounds=[found], iterations=iterations,
                       rows={n: df.height for n, df in found.items()})
