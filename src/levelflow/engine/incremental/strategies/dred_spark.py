"""Delete and re-derive for recursive tasks, with ranks that keep the over-deletion small.

Every maintained tuple carries a rank (`_it`): the round it was found in. Invariant: a tuple
of rank r > 0 has a derivation from tuples of rank < r (facts and rules over lower relations
give rank 0). That is what Soufflé's incremental mode records with `@iteration`.

1. Suspects (dred_spark_ops.py). Candidates are the old tuples that lose a derivation:
   removed base facts, heads of derivations through a lower relation's Δ-, then heads of
   derivations through a new suspect. A candidate stays if it is still a base or program
   fact, or has a derivation from the new lower relations and own tuples of smaller rank that
   are not suspect; the others become suspects. By induction on rank every non-suspect tuple
   is still derivable, and one that leaned on a tuple which later turns suspect is a
   candidate again in the next round. Plain DRed deletes everything downstream of a removed
   fact; in a dense closure that is most of the relation, here it is the tuples that really
   lost their support.
2. S' = old - suspects.
3. Re-derive suspects from S' and the new lower relations (the rule's body prefixed with the
   suspect tuple, so only its bindings are joined), plus insertion seeds (Δ+ of lower
   relations and base facts).
4. The engine's semi-naive fixpoint from stable S'. Round k of it gets rank top + 1 + k, where
   top is the highest rank of any relation of the task (the relations of a task derive from
   each other, so they share one rank scale), so the invariant holds for the next epoch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.compile import BROADCAST_ROWS, CompileError
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
from levelflow.engine.incremental.backends.spark_joins import (
    check_cancel,
    heads_of,
)
from levelflow.engine.incremental.strategies.dred_spark_ops import (
    find_suspects,
    still_facts,
    through_lower_deltas,
)
from levelflow.engine.incremental.strategies.rewrites import (
    rederive_rule,
    stand_in_decls,
)
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.rules import reads_own
from levelflow.engine.types import column_names, empty_relation

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from levelflow.tasks.tasks import Task


def dred_update(ctx: TaskContext, task: Task, cancel=None) -> tuple[dict[str, Change], int]:
    """Return per own relation its Change by DRed with ranks, and the rounds it took."""
    names = task.relations
    rules = [r for r in task.rules if r.body]
    rec_rules = [r for r in rules if reads_own(r, names)]
    cols = {n: column_names(ctx.decls[n].arity) for n in names}
    # 1. Suspects: old tuples that may have lost every derivation.
    deleted, rounds = find_suspects(ctx, task, rules, rec_rules, cols, cancel)
    # 2. S' = old - suspects.
    kept, kept_ranked = _keep(ctx, names, deleted, cols)
    check_cancel(cancel)
    # 3. Re-derive suspects from S' and the new lower relations; seed insertions.
    seeds = _seeds(ctx, task, rules, deleted, kept, cols)
    check_cancel(cancel)
    # 4. Semi-naive from stable S', recent = seeds - S'.
    rels, more = _resume(ctx, task, rec_rules, seeds, kept, cols, cancel)
    # One rank scale for the whole task: a tuple of one relation is derived from tuples of the
    # others, so new ranks start above the highest rank of any of them.
    top = max(ctx.max_rank.get(n, 0) for n in names)
    return {n: _result(ctx, n, ctx.versions[n], deleted[n], kept[n], kept_ranked[n], rels[n],
                       cols[n], top) for n in names}, rounds + more


def _keep(ctx: TaskContext, names, deleted: dict, cols) -> tuple[dict, dict]:
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


def _seeds(ctx: TaskContext, task: Task, rules, deleted: dict, kept: dict,
           cols) -> dict[str, list[DataFrame]]:
    """Return per relation what the fixpoint restarts from: inserted base facts, suspects still
    derivable from S' and the new lower relations, and what lower insertions derive."""
    names, own, decls = task.relations, set(task.relations), ctx.decls
    decls2 = stand_in_decls(decls, names)
    frames_new = {}  # relation -> frame for atoms that read "now": own S', lower new
    for n in ctx.versions:
        frames_new[n] = kept[n][0] if n in own else ctx.versions[n].new
    rows_new = {n: (kept[n][1] if n in own else ctx.versions[n].new_rows) for n in ctx.versions}
    seeds: dict[str, list[DataFrame]] = {n: [] for n in names}
    for n in names:
        b = ctx.base.get(n)
        if b is not None and b.plus_rows:
            seeds[n].append(b.plus)
        d, d_rows = deleted[n]
        if d_rows:
            seeds[n] += still_facts(ctx, task, n, d, d_rows, cols[n])
    for rule in rules:
        head = rule.heads[0]
        d, d_rows = deleted.get(head.relation, (None, 0))
        if d_rows:
            seeds[head.relation].append(_rederive(ctx, rule, head, d, d_rows, decls2,
                                                  frames_new, rows_new))
    for n, heads in through_lower_deltas(ctx, rules, names, False, frames_new,
                                          rows_new).items():
        seeds[n] += heads
    return seeds


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


def _rederive(ctx, rule, head, d, d_rows, decls2, frames_new, rows_new) -> DataFrame:
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
