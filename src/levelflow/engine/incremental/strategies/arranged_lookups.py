"""Joins with an arranged share's own relations as binary searches over its sorted keys: the
`rules.Ops` (PolarsOps) that delete-and-rederive's support checks and re-derivation run."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from levelflow.engine.incremental.strategies.arranged import packed
from levelflow.engine.plans.columnar import PolarsOps
from levelflow.engine.plans.keys import positions
from levelflow.engine.rules import var_col
from levelflow.tasks.ast import Rule, Var


class LiveLookups(PolarsOps):
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


class Members(PolarsOps):
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


def member_lookups(rule: Rule, names, keys: Mapping[str, np.ndarray | None], shift: int
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
