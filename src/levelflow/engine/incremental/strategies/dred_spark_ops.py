"""Step 1 of delete-and-rederive on Spark (dred_spark.py states the algorithm and the rank
invariant): the suspects, old tuples that may have lost every derivation, found round by round
from the candidates that lost one and have no support of smaller rank left."""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.compile import BROADCAST_ROWS, CompileError
from levelflow.engine.evaluate import (
    MERGE_PIECES,
    RANK,
    cut,
    union_all,
)
from levelflow.engine.incremental.backends.spark_broadcast import (
    bcast_small,
    semi_join_small,
)
from levelflow.engine.incremental.backends.spark_joins import (
    check_cancel,
    heads_of,
    program_facts,
)
from levelflow.engine.incremental.strategies.rewrites import (
    as_positive,
    stand_in_decls,
    support_rule,
)
from levelflow.engine.incremental.versions import TaskContext
from levelflow.engine.types import column_names
from levelflow.tasks.ast import Decl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from levelflow.tasks.tasks import Task


def _rank_last(df: DataFrame, decl: Decl) -> DataFrame:
    """Return ranked tuples shaped as ranked_decl's stand-in (rewrites): the columns, the rank.

    A nullary relation's placeholder column c0 is dropped: its stand-in's c0 is the rank.
    """
    import pyspark.sql.functions as F

    cols = column_names(decl.arity) if decl.arity else []
    return df.select(*cols, F.col(RANK).alias(f"c{decl.arity}"))


class _Suspects:
    """The suspects found so far per relation: cut pieces, merged when there are many."""

    def __init__(self, names) -> None:
        self.pieces: dict[str, list[tuple[DataFrame, int]]] = {n: [] for n in names}

    def add(self, name: str, df: DataFrame, rows: int) -> None:
        if rows:
            self.pieces[name].append((df, rows))
            if len(self.pieces[name]) >= MERGE_PIECES:
                self.pieces[name] = [cut(union_all([d for d, _ in self.pieces[name]]))]

    def rows(self, name: str) -> int:
        return sum(r for _, r in self.pieces[name])

    def frame(self, name: str) -> DataFrame | None:
        return union_all([d for d, _ in self.pieces[name]]) if self.pieces[name] else None

    def without(self, df: DataFrame, name: str, cols) -> DataFrame:
        """Return df minus the suspects of `name` (on the tuple columns)."""
        s, rows = self.frame(name), self.rows(name)
        return df if s is None else df.join(bcast_small(s, rows), cols, "left_anti")


def still_facts(ctx: TaskContext, task: Task, name: str, tuples: DataFrame, rows: int,
                 cols) -> list[DataFrame]:
    """Return the frames of those `tuples` (`rows` of them) still base or program facts."""
    out = []
    b = ctx.base.get(name)
    if b is not None and b.new_rows:
        out.append(semi_join_small(tuples, b.new, b.new_rows, cols))
    facts = program_facts(ctx, task, name)
    if facts is not None:
        out.append(facts.join(bcast_small(tuples, rows), cols, "left_semi"))
    return out


def _candidates(ctx: TaskContext, name: str, cand: DataFrame, cols, suspects: _Suspects):
    """Return (the distinct candidates not yet suspect; rows; the same with their ranks).

    Every candidate is an old tuple: it is the head of an old derivation.
    """
    import pyspark.sql.functions as F

    cand, rows = cut(suspects.without(cand, name, cols).distinct())
    if not rows:
        return None, 0, None
    old = ctx.old_ranked[name]
    ranked = old.join(F.broadcast(cand), cols, "inner") if rows <= BROADCAST_ROWS else \
        cand.join(old, cols, "inner")
    return cand, rows, cut(ranked)[0]  # cut: every rule's check reads it


def _supported(ctx: TaskContext, task: Task, rules, cands: dict, suspects: _Suspects,
               cols: dict) -> dict[str, list[DataFrame]]:
    """Return per relation the candidates that keep a derivation from smaller-rank tuples."""
    names = set(task.relations)
    decls = stand_in_decls(ctx.decls, names)
    live: dict[str, DataFrame] = {}
    out: dict[str, list[DataFrame]] = {n: [] for n in names}
    for n, (tuples, rows, _) in cands.items():
        if rows:
            out[n] += still_facts(ctx, task, n, tuples, rows, cols[n])
    for rule in rules:
        head = rule.heads[0]
        _, rows, c = cands.get(head.relation, (None, 0, None))
        if not rows:
            continue
        prefixed, live_at, other_at = support_rule(rule, names)
        frames = {0: bcast_small(_rank_last(c, ctx.decls[head.relation]), rows)}
        sizes = {0: rows}
        for pos, n in live_at.items():
            if n not in live:
                live[n] = _rank_last(suspects.without(ctx.old_ranked[n], n, cols[n]),
                                     ctx.decls[n])
            frames[pos], sizes[pos] = live[n], ctx.versions[n].old_rows
        for pos, n in other_at.items():
            frames[pos], sizes[pos] = ctx.versions[n].new, ctx.versions[n].new_rows
        try:
            (_, heads), = heads_of(ctx, prefixed, (head.relation,), frames, sizes, first=0,
                                 decls=decls, small_seed=rows <= BROADCAST_ROWS)
        except CompileError:
            continue  # a head the prefix cannot bind: no support found, the tuple is suspect
        out[head.relation].append(heads)
    return out


def through_lower_deltas(ctx: TaskContext, rules, names, deleting: bool, frames: dict,
                          rows: dict) -> dict[str, list[DataFrame]]:
    """Return per own relation the heads of derivations through a lower relation's change.

    The changed atom reads its Δ- (deleting) or Δ+ (negated atoms the other way round); every
    other atom reads `frames[relation]`, whose row count is `rows[relation]`.
    """
    own = set(names)
    out: dict[str, list[DataFrame]] = {n: [] for n in names}
    for rule in rules:
        for i, atom, neg in rule.body_atoms():
            ver = ctx.versions[atom.relation]
            if atom.relation in own or not ver.changed:
                continue
            df, delta_rows = ver.delta(atom, neg, deleting=deleting)
            if not delta_rows:
                continue
            others = [(j, a.relation) for j, a, _ in rule.body_atoms() if j != i]
            at = {j: frames[r] for j, r in others}
            sizes = {j: rows[r] for j, r in others}
            at[i], sizes[i] = bcast_small(df, delta_rows), delta_rows
            variant = as_positive(rule, i) if neg else rule
            for name, heads in heads_of(ctx, variant, names, at, sizes, first=i):
                out[name].append(heads)
    return out


def find_suspects(ctx: TaskContext, task: Task, rules, rec_rules, cols, cancel):
    """Return (the suspects per relation, rounds): tuples that may have lost every derivation."""
    import pyspark.sql.functions as F

    names = task.relations
    own = set(names)
    old = {n: ctx.versions[n] for n in names}
    suspects = _Suspects(names)
    seeds: dict[str, list[DataFrame]] = {n: [] for n in names}
    for n in names:
        b = ctx.base.get(n)
        if b is not None and b.minus_rows:
            seeds[n].append(b.minus)
    for n, heads in through_lower_deltas(ctx, rules, names, True,
                                          {n: v.old for n, v in ctx.versions.items()},
                                          {n: v.old_rows for n, v in ctx.versions.items()}
                                          ).items():
        seeds[n] += heads
    rounds = 0
    cands = {n: _candidates(ctx, n, union_all(seeds[n]), cols[n], suspects)
             if seeds[n] and old[n].old_rows else (None, 0, None) for n in names}
    while any(rows for _, rows, _ in cands.values()):
        check_cancel(cancel)
        rounds += 1
        kept = _supported(ctx, task, rules, cands, suspects, cols)
        fresh: dict[str, tuple[DataFrame | None, int]] = {}
        for n in names:
            lost, rows, _ = cands[n]
            if not rows:
                fresh[n] = (None, 0)
                continue
            if kept[n]:
                # Few candidates: their supported subset is small too once deduplicated;
                # broadcast it rather than shuffle the candidates against it.
                found = union_all(kept[n]).distinct()
                found = F.broadcast(found) if rows <= BROADCAST_ROWS else found
                lost = lost.join(found, cols[n], "left_anti")
            fresh[n] = cut(lost)
        for n in names:
            suspects.add(n, *fresh[n])
        # The next candidates: heads of old derivations that use a new suspect.
        nxt: dict[str, list[DataFrame]] = {n: [] for n in names}
        for rule in rec_rules:
            for j, atom, neg in rule.body_atoms():
                df, rows = fresh.get(atom.relation, (None, 0))
                if neg or atom.relation not in own or not rows:
                    continue
                frames = {k: _old_or_new(ctx.versions[a.relation], own)
                          for k, a, _ in rule.body_atoms()}
                sizes = ctx.sizes(rule, new=False)
                frames[j], sizes[j] = bcast_small(df, rows), rows
                for name, heads in heads_of(ctx, rule, names, frames, sizes, first=j):
                    nxt[name].append(heads)
        cands = {n: _candidates(ctx, n, union_all(nxt[n]), cols[n], suspects) if nxt[n]
                 else (None, 0, None) for n in names}
    # Every piece is cut, so their union needs no copy.
    return {n: (suspects.frame(n), suspects.rows(n)) for n in names}, rounds


def _old_or_new(ver, own) -> DataFrame:
    """Return a relation's old tuples plus, for a lower one, those it gained this epoch.

    A support check reads the new lower relations, so a tuple it kept may lean on a lower tuple
    inserted this epoch: a new suspect's heads must be found through those too.
    """
    if ver.decl.name in own or not ver.plus_rows:
        return ver.old
    return ver.old.unionByName(ver.plus)
