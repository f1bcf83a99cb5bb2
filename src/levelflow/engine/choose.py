"""`choice-domain` made while evaluating: a relation whose Decl carries `choice` keys.

The rule, the same on every plan and in the naive reference: per semi-naive round (round 0
being the facts and non-recursive rules), the round's new candidates are taken in the
relation's order (attributes left to right: numbers by value, symbols by their text), and one
is kept when no tuple of the relation, nor one kept before it in this round, shares the value
of any of its keys. A key chosen in an earlier round keeps its tuple, as in Soufflé; a
candidate losing to one stays out (its key stays taken). One key is thus the smallest new
candidate per free key; several keys are a greedy matching in the relation's order.

`choose` runs on Polars frames (the local and partitioned plans' fixpoint, in a worker, where
symbols are codes sorted as their text); `choose_spark` gives a Spark frame the same answer
by choosing its candidates in the driver (the global plan).
"""

from __future__ import annotations

import polars as pl

from levelflow.engine.types import column_names


def chosen(decls, names) -> bool:
    """Return whether any of the relations `names` is chosen while evaluating."""
    return any(decls[n].choice for n in names if n in decls)


def choose(decl, cand: pl.DataFrame, taken: pl.DataFrame | None = None) -> pl.DataFrame:
    """Return the candidates `decl.choice` keeps against the relation's tuples `taken`."""
    if not decl.choice or not cand.height:
        return cand
    cols = column_names(decl.arity)
    groups = [[cols[i] for i in g] for g in decl.choice]
    if taken is not None and taken.height:
        for key in groups:
            cand = cand.join(taken.select(key).unique(), on=key, how="anti")
    cand = cand.unique(subset=cols).sort(cols)
    if len(groups) == 1:
        return cand.unique(subset=groups[0], keep="first", maintain_order=True)
    # Typed: every candidate may have lost to a taken key, and a mask of no rows has no type.
    return cand.filter(pl.Series(_greedy(cand, groups), dtype=pl.Boolean))


def _greedy(cand: pl.DataFrame, groups: list[list[str]]) -> list[bool]:
    """Return, per sorted candidate, whether it is kept: none kept before shares a key."""
    seen: list[set] = [set() for _ in groups]
    keys = [list(zip(*(cand[c].to_list() for c in g), strict=True)) for g in groups]
    keep = []
    for row in zip(*keys, strict=True):
        ok = not any(k in s for k, s in zip(row, seen, strict=True))
        if ok:
            for k, s in zip(row, seen, strict=True):
                s.add(k)
        keep.append(ok)
    return keep


def choose_spark(spark, decl, cand, taken=None) -> tuple:
    """Return (frame, rows): the Spark candidates `decl.choice` keeps against `taken`."""
    from levelflow.engine.types import relation_schema

    cols = column_names(decl.arity)
    keys = sorted({i for g in decl.choice for i in g})
    mine = pl.from_arrow(cand.select(*cols).toArrow())
    held = None
    if taken is not None:
        held = pl.from_arrow(taken.select(*[cols[i] for i in keys]).distinct().toArrow())
    kept = choose(decl, mine, held)
    return spark.createDataFrame(kept.to_arrow(), schema=relation_schema(decl)), kept.height
