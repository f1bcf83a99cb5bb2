"""Delete-and-rederive with ranks on Spark: dred.py's algorithm over SparkDRed's operations
(dred_spark_ops.py), then the engine's semi-naive fixpoint over DataFrames from stable S'.

Round k of the fixpoint gets rank top + 1 + k (dred.py states the rank invariant). The added
rounds become one small piece of each relation's ranked tuples; old pieces are merged only when
there are too many of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.evaluate import (
    MERGE_PIECES,
    EvalStats,
    Fixpoint,
    RankedRelation,
    cut,
    merge_pieces,
    run_fixpoint,
    union_all,
)
from levelflow.engine.incremental.backends.spark_broadcast import (
    anti_join_small,
    bcast_small,
)
from levelflow.engine.incremental.strategies.dred import delete_and_rederive
from levelflow.engine.incremental.strategies.dred_spark_ops import SparkDRed
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.rules import reads_own
from levelflow.engine.types import empty_relation

if TYPE_CHECKING:
    from levelflow.tasks.tasks import Task


def dred_update(ctx: TaskContext, task: Task, cancel=None) -> tuple[dict[str, Change], int]:
    """Return per own relation its Change by DRed with ranks, and the rounds it took."""
    ops = SparkDRed(ctx, task, cancel)
    # 1-3. Suspects, S' = old - suspects, the suspects re-derived and the insertions' seeds.
    seeds, rounds = delete_and_rederive(ops)
    # 4. Semi-naive from stable S', recent = seeds - S'.
    rec_rules = [r for r in ops.rules if reads_own(r, ops.names)]
    rels, more = _resume(ctx, task, rec_rules, seeds, ops.kept, ops.cols, cancel)
    # One rank scale for the whole task: a tuple of one relation is derived from tuples of the
    # others, so new ranks start above the highest rank of any of them.
    top = max(ctx.max_rank.get(n, 0) for n in ops.names)
    return {n: _result(ctx, n, ctx.versions[n], ops.deleted[n], ops.kept[n], ops.kept_ranked[n],
                       rels[n], ops.cols[n], top) for n in ops.names}, rounds + more


def _resume(ctx: TaskContext, task: Task, rec_rules, seeds: dict, kept: dict, cols,
            cancel) -> tuple[dict[str, RankedRelation], int]:
    """Return the task's relations after semi-naive rounds from stable S', recent = seeds - S',
    and the rounds run."""
    spark, decls, own = ctx.spark, ctx.decls, set(task.relations)
    rels = {}
    for n in task.relations:
        if seeds[n]:
            start, start_rows = cut(anti_join_small(union_all(seeds[n]).distinct(), kept[n][0],
                                                    kept[n][1], cols[n]))
        else:
            start, start_rows = empty_relation(spark, decls[n]), 0
        rel = RankedRelation(spark, decls[n], start, start_rows)
        if kept[n][1]:
            rel.stable, rel.stable_rows = [kept[n][0]], kept[n][1]
        rels[n] = rel
    stats = EvalStats(task=task.name)
    if rec_rules:
        lower = {n: v.new for n, v in ctx.versions.items() if n not in own}
        rows = {n: v.new_rows for n, v in ctx.versions.items() if n not in own}
        run_fixpoint(spark, ctx.program, Fixpoint(rec_rules, rels, lower, rows, stats, cancel))
    return rels, stats.iterations


def _result(ctx, n, old, deleted, kept, kept_ranked, rel: RankedRelation, cols,
            top: int) -> Change:
    """Return the Change of one relation (new ranked tuples, Δ±, pieces, max rank).

    `top` is the highest rank in the task before the update; new tuples rank above it. New
    ranked is None when the relation kept its tuples and their ranks.
    """
    d, d_rows = deleted
    added = rel.rounds
    a_rows = sum(r for _, r, _ in added)
    if not a_rows and not d_rows:
        return Change(None, rows=old.old_rows, pieces=old.pieces, top=top)
    a = union_all([df for df, _, _ in added]) if added else None
    if a is not None and d_rows:
        plus, plus_rows = cut(a.join(bcast_small(d, d_rows), cols, "left_anti"))
        minus, minus_rows = cut(d.join(bcast_small(a, a_rows), cols, "left_anti"))
    elif a is not None:
        plus, plus_rows, minus, minus_rows = a, a_rows, None, 0
    else:
        plus, plus_rows, minus, minus_rows = None, 0, d, d_rows
    # The added rounds become one small piece; the old pieces are only copied (merged) when
    # there are too many of them, so a small update never copies the whole relation.
    pieces = old.pieces + (1 if d_rows else 0)
    new, fresh = kept_ranked, None
    if added:
        fresh = rel.ranked(offset=top + 1)
        if len(added) > 1:
            fresh = merge_pieces(fresh)
        new, pieces = (new.unionByName(fresh) if kept[1] else fresh), pieces + 1
        top += added[-1][2] + 1
    if pieces > MERGE_PIECES:
        new, pieces = merge_pieces(new), 1
    # The segment: suspects go (matched on their tuples), the added rounds come, ranked.
    stored = (d if d_rows else None, fresh)
    return Change(new, plus, plus_rows, minus, minus_rows, kept[1] + a_rows, pieces=pieces,
                  top=top, stored=stored)
