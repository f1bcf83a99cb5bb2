"""Delete-and-rederive's operations on Spark (dred.py states the algorithm, which calls them, and
the rank invariant): the suspects' candidates and support checks, S', the re-derivation, the
heads through a lower relation's change; each over DataFrames, each step a Spark job."""

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
    rederive_rule,
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


class SparkDRed:
    """DRed's operations over DataFrames (dred.DRedOps): a frame is a cut DataFrame and its
    row count, a candidate also carries its ranked rows; each step is a Spark job."""

    def __init__(self, ctx: TaskContext, task: Task, cancel) -> None:
        self.ctx, self.task, self.cancel = ctx, task, cancel
        self.names = task.relations
        self.rules = [r for r in task.rules if r.body]
        self.cols = {n: column_names(ctx.decls[n].arity) for n in self.names}
        self.suspects = _Suspects(self.names)
        self.deleted: dict[str, tuple[DataFrame | None, int]] = {}
        self.kept: dict[str, tuple[DataFrame, int]] = {}  # S' per relation, set by keep
        self.kept_ranked: dict[str, DataFrame] = {}
        self._now: tuple[dict, dict] = ({}, {})  # what atoms read "now": own S', lower new

    def empty(self, frame) -> bool:
        return not frame[1]

    def check_cancel(self) -> None:
        check_cancel(self.cancel)

    def removed_facts(self, name: str) -> list[DataFrame]:
        b = self.ctx.base.get(name)
        return [b.minus] if b is not None and b.minus_rows else []

    def inserted_facts(self, name: str) -> list[DataFrame]:
        b = self.ctx.base.get(name)
        return [b.plus] if b is not None and b.plus_rows else []

    def through_lower(self, deleting: bool) -> dict[str, list[DataFrame]]:
        vers = self.ctx.versions
        frames, rows = (({n: v.old for n, v in vers.items()},
                         {n: v.old_rows for n, v in vers.items()}) if deleting else self._now)
        return through_lower_deltas(self.ctx, self.rules, self.names, deleting, frames, rows)

    def candidates(self, name: str, seeds: list[DataFrame]):
        if not seeds or not self.ctx.versions[name].old_rows:
            return None, 0, None
        return _candidates(self.ctx, name, union_all(seeds), self.cols[name], self.suspects)

    def supported(self, cands: dict) -> dict[str, list[DataFrame]]:
        return _supported(self.ctx, self.task, self.rules, cands, self.suspects, self.cols)

    def mark_lost(self, name: str, cand, kept: list[DataFrame]) -> tuple[DataFrame | None, int]:
        import pyspark.sql.functions as F

        lost, rows, _ = cand
        if not rows:
            return None, 0
        if kept:
            # Few candidates: their supported subset is small too once deduplicated;
            # broadcast it rather than shuffle the candidates against it.
            found = union_all(kept).distinct()
            found = F.broadcast(found) if rows <= BROADCAST_ROWS else found
            lost = lost.join(found, self.cols[name], "left_anti")
        fresh = cut(lost)
        self.suspects.add(name, *fresh)
        return fresh

    def through_suspect(self, rule, pos: int, fresh):
        df, rows = fresh
        own = set(self.names)
        frames = {k: _old_or_new(self.ctx.versions[a.relation], own)
                  for k, a, _ in rule.body_atoms()}
        sizes = self.ctx.sizes(rule, new=False)
        frames[pos], sizes[pos] = bcast_small(df, rows), rows
        return heads_of(self.ctx, rule, self.names, frames, sizes, first=pos)

    def keep(self) -> dict[str, tuple[DataFrame | None, int]]:
        # Every piece is cut, so their union needs no copy.
        self.deleted = {n: (self.suspects.frame(n), self.suspects.rows(n)) for n in self.names}
        self.kept, self.kept_ranked = keep(self.ctx, self.names, self.deleted, self.cols)
        own, vers = set(self.names), self.ctx.versions
        self._now = ({n: self.kept[n][0] if n in own else vers[n].new for n in vers},
                     {n: self.kept[n][1] if n in own else vers[n].new_rows for n in vers})
        return self.deleted

    def still_facts(self, name: str, suspects) -> list[DataFrame]:
        return still_facts(self.ctx, self.task, name, *suspects, self.cols[name])

    def rederived(self, rule, suspects) -> DataFrame:
        decls = stand_in_decls(self.ctx.decls, self.names)
        return rederive(self.ctx, rule, rule.heads[0], *suspects, decls, *self._now)


def keep(ctx: TaskContext, names, deleted: dict, cols) -> tuple[dict, dict]:
    """Return per relation S' = old - suspects, as (tuples, rows) and with its ranks.

    Few suspects: a broadcast anti join applied on every scan is cheaper than copying the whole
    relation; many: copy once.
    """
    kept, kept_ranked = {}, {}
    for n in names:
        old = ctx.versions[n]
        d, d_rows = deleted[n]
        if not d_rows:
            kept[n], kept_ranked[n] = (old.old, old.old_rows), ctx.old_ranked[n]
            continue
        ranked = ctx.old_ranked[n].join(bcast_small(d, d_rows), cols[n], "left_anti")
        if d_rows > BROADCAST_ROWS:
            ranked = cut(ranked)[0]
        kept_ranked[n] = ranked
        kept[n] = (ranked.select(*cols[n]), old.old_rows - d_rows)
    return kept, kept_ranked


def rederive(ctx, rule, head, d, d_rows, decls2, frames_new, rows_new) -> DataFrame:
    """Return the suspects of `head` that `rule` derives from S' and the new lower relations."""
    atoms = rule.body_atoms()
    if any(not neg for _, _, neg in atoms):
        # deleted(head args), body: joined first, so only the suspects' bindings are tried.
        prefixed = rederive_rule(rule, head)
        frames = {0: bcast_small(d, d_rows)}
        sizes = {0: d_rows}
        for i, atom, _ in atoms:
            frames[i + 1] = frames_new[atom.relation]
            sizes[i + 1] = rows_new[atom.relation]
        try:
            (_, heads), = heads_of(ctx, prefixed, (head.relation,), frames, sizes, first=0,
                                 decls=decls2, small_seed=d_rows <= BROADCAST_ROWS)
            return heads
        except CompileError:
            pass  # e.g. a head expression the prefix cannot bind: evaluate the rule plainly
    frames = {i: frames_new[a.relation] for i, a, _ in atoms}
    sizes = {i: rows_new[a.relation] for i, a, _ in atoms}
    (_, heads), = heads_of(ctx, rule, (head.relation,), frames, sizes)
    cols = column_names(ctx.decls[head.relation].arity)
    return heads.join(bcast_small(d, d_rows), cols, "left_semi")


def _old_or_new(ver, own) -> DataFrame:
    """Return a relation's old tuples plus, for a lower one, those it gained this epoch.

    A support check reads the new lower relations, so a tuple it kept may lean on a lower tuple
    inserted this epoch: a new suspect's heads must be found through those too.
    """
    if ver.decl.name in own or not ver.plus_rows:
        return ver.old
    return ver.old.unionByName(ver.plus)
