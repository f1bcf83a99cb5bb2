"""An epoch of a task with subsumptive rules, in the driver over Polars frames.

The task's old tuples X are what survived pruning. An epoch
  1. over-deletes, as delete-and-rederive does: D is every tuple of X derived (one rule
     application at a time, over the old versions) from a deleted lower tuple, a deleted base
     fact, or a tuple of D;
  2. runs the pruned fixpoint of plans/subsume.py seeded with X \\ D: the task's rules are
     applied once to the seed over the new versions (which also derives what a tuple of D
     had dominated, if still derivable), then semi-naive rounds prune as from scratch.
So when a dominating tuple is deleted, the tuples it dominated come back if still derivable.
An epoch that changes a relation read by a subsumptive body or a negated one starts from an
empty seed (the task anew, in the driver). Only the tuples that changed go on.

The result equals the from-scratch one when domination is a partial order that the rules
respect (a dominated premise derives only dominated conclusions), as for shortest distances,
the best value per key or intervals contained in others: both are then the tuples of the
(possibly infinite) fixpoint that no other tuple dominates.
"""

from __future__ import annotations

import polars as pl

from levelflow.engine.evaluate import cast_fact, fact_rows
from levelflow.engine.incremental.backends.driver_change import held_change
from levelflow.engine.incremental.backends.driver_rows import polars_of, rows_of
from levelflow.engine.plans.columnar import body_rows, empty_frame, head_rows
from levelflow.engine.plans.room import check_room
from levelflow.engine.plans.subsume import run_subsumed
from levelflow.engine.types import column_names
from levelflow.tasks.ast import Negation


def _frame(df, decl) -> pl.DataFrame:
    """Return a relation's tuples (c0..) as Polars: rows the driver holds, else one job."""
    if df is None:
        return empty_frame(decl)
    table = rows_of(df)
    if table is None:
        table = df.select(*column_names(decl.arity)).toArrow()
    return polars_of(table, decl)


def _from_empty(ctx, task) -> bool:
    """Return whether the seed must be empty: a subsumptive body's other relation or a negated
    one changed (domination or derivations changed in a way over-deletion does not follow)."""
    for rule in task.subsumes:
        if any(ctx.versions[a.relation].changed for _, a, _ in rule.body_atoms()
               if a.relation not in task.relations):
            return True
    return any(isinstance(lit, Negation) and ctx.versions[lit.atom.relation].changed
               for rule in task.rules for lit in rule.body)


def _heads(rule, decls, frames, pos) -> pl.DataFrame:
    body, types = body_rows(rule, decls, frames, first=pos)
    head = rule.heads[0]
    return head_rows(body, types, head, decls[head.relation])


def _over_deleted(ctx, task, old: dict, lower_old: dict, minus: dict, check) -> dict:
    """Return per own relation the tuples of `old` that lost a derivation, transitively."""
    decls, names = ctx.decls, task.relations
    rules = [r for r in task.rules if r.body]
    found = {n: [minus[n]] if n in minus else [] for n in names}
    for rule in rules:
        for i, atom, neg in rule.body_atoms():
            if neg or atom.relation in names or atom.relation not in minus:
                continue
            frames = {j: old[a.relation] if a.relation in names else
                      (minus[a.relation] if j == i else lower_old[a.relation])
                      for j, a, _ in rule.body_atoms()}
            found[rule.heads[0].relation].append(_heads(rule, decls, frames, i))
    gone = {n: empty_frame(decls[n]) for n in names}
    recent = {}
    for n in names:
        cand = pl.concat(found[n]).unique() if found[n] else empty_frame(decls[n])
        recent[n] = cand.join(old[n], on=cand.columns, how="semi")
    while any(df.height for df in recent.values()):
        check()
        gone = {n: pl.concat([gone[n], recent[n]]) for n in names}
        found = {n: [] for n in names}
        for rule in rules:
            for i, atom, neg in rule.body_atoms():
                if neg or atom.relation not in names or not recent[atom.relation].height:
                    continue
                frames = {j: (recent[a.relation] if j == i else old[a.relation])
                          if a.relation in names else lower_old[a.relation]
                          for j, a, _ in rule.body_atoms()}
                found[rule.heads[0].relation].append(_heads(rule, decls, frames, i))
        recent = {}
        for n in names:
            cand = pl.concat(found[n]).unique() if found[n] else empty_frame(decls[n])
            cand = cand.join(old[n], on=cand.columns, how="semi")
            recent[n] = cand.join(gone[n], on=cand.columns, how="anti")
    return gone


# Per (session, task): the Polars frames of the relations its last epoch read and produced,
# each beside the DataFrame it equals (kept alive, compared by identity): an epoch whose
# versions are those frames' successors applies their Δ in the driver instead of a job each.
_HELD: dict[tuple[int, str], dict[str, tuple[object, pl.DataFrame]]] = {}


def _held(held: dict, name: str, df, decl) -> pl.DataFrame:
    """Return `df` as Polars: the held frame when it was made from `df`, else fetched."""
    mark = held.get(name)
    return mark[1] if mark is not None and mark[0] is df else _frame(df, decl)


def _marks(ctx, name: str) -> tuple[object, object]:
    """Return the objects that stand for a relation's old and new versions: its base facts'
    for an input relation without rules (the snapshot keeps that very object), else its own."""
    ver = ctx.base.get(name)
    if ver is None or any(h.relation == name for r in ctx.program.rules if r.body
                          for h in r.heads):
        ver = ctx.versions[name]
    return ver.old, ver.new


def _lower(ctx, task, held: dict) -> tuple[dict, dict, dict]:
    """Return the lower relations' new and old frames, and the deleted tuples per relation."""
    decls = ctx.decls
    new, old, minus = {}, {}, {}
    for n in task.reads_from:
        ver = ctx.versions[n]
        was, now = _marks(ctx, n)
        mark = held.get(n)
        old[n] = new[n] = mark[1] if mark is not None and mark[0] is was \
            else _frame(ver.old, decls[n])
        if ver.changed:
            plus, gone = _frame(ver.plus, decls[n]), _frame(ver.minus, decls[n])
            if gone.height:
                new[n] = new[n].join(gone, on=gone.columns, how="anti")
                minus[n] = gone
            new[n] = pl.concat([new[n], plus]) if plus.height else new[n]
        held[n] = (now, new[n])
    return new, old, minus


def _facts(ctx, task, minus: dict) -> dict:
    """Return each own relation's facts (the program's and its base facts), and add its
    deleted base facts to `minus`."""
    decls, facts = ctx.decls, {}
    for n in task.relations:
        rows = [cast_fact(r, decls[n].types) for r in fact_rows(task.rules, n)]
        parts = [pl.DataFrame(rows, schema=empty_frame(decls[n]).schema, orient="row")]
        base = ctx.base.get(n)
        if base is not None:
            parts.append(_frame(base.new, decls[n]))
            if base.minus_rows:
                minus[n] = _frame(base.minus, decls[n])
        facts[n] = pl.concat(parts).unique()
    return facts


def hold_frames(ctx, task) -> None:
    """Keep a subsumptive task's frames in the driver as an epoch with nothing changed would
    leave them (its lower relations' and its own, one job each), so that the next epoch over
    `ctx`'s versions finds them held."""
    held: dict = {}
    _lower(ctx, task, held)
    for n in task.relations:
        ranked = ctx.old_ranked.get(n)
        held[n] = (ranked, _frame(ranked if ranked is not None else ctx.versions[n].old,
                                  ctx.decls[n]))
    _HELD[(id(ctx.spark), task.name)] = held


def rekey_frames(spark, old, new) -> None:
    """Mark the held frames of snapshot `old`'s relations and base facts with `new`'s objects:
    a compaction read the same tuples back, so the frames still hold."""
    for (sid, _), held in _HELD.items():
        if sid != id(spark):
            continue
        for name, (mark, frame) in list(held.items()):
            if mark is not None and mark is old.rel.get(name):
                held[name] = (new.rel[name], frame)
            elif mark is not None and mark is old.base.get(name):
                held[name] = (new.base[name], frame)


def subsumed_update(ctx, task, check=lambda: None) -> dict:
    """Return per own relation its Change: the pruned fixpoint repaired from the old one;
    `check()` runs before each round and raises to stop (the epoch's deadline)."""
    decls = ctx.decls
    # Its fixpoint is held in the driver: refused before anything runs where it cannot fit.
    check_room(ctx.spark, ctx.program.file, task,
               sum(ctx.versions[n].new_rows for n in task.reads_from if n in ctx.versions)
               + sum(ctx.versions[n].old_rows for n in task.relations), "driver")
    key = (id(ctx.spark), task.name)
    held = _HELD.pop(key, {})
    lower_new, lower_old, minus = _lower(ctx, task, held)
    facts = _facts(ctx, task, minus)
    old = {n: _held(held, n, ctx.old_ranked.get(n), decls[n]) if n in ctx.old_ranked
           else _frame(ctx.versions[n].old, decls[n]) for n in task.relations}
    seed = None
    if not _from_empty(ctx, task):
        gone = _over_deleted(ctx, task, old, lower_old, minus, check) if minus else {}
        seed = {n: old[n].join(gone[n], on=old[n].columns, how="anti") if n in gone
                else old[n] for n in task.relations}
    rules = tuple(r for r in task.rules if r.body)
    out = run_subsumed(rules, task.relations, decls, lower_new, facts, subs=task.subsumes,
                       seed=seed, check=check)
    changes = {}
    for n in task.relations:
        new = out.relation(n)
        cols = column_names(decls[n].arity)
        plus = new.join(old[n], on=cols, how="anti")
        gone = old[n].join(new, on=cols, how="anti")
        changes[n] = held_change(ctx, n, ctx.versions[n], plus, gone, cols)
        ranked = changes[n].new if changes[n].new is not None else ctx.old_ranked.get(n)
        held[n] = (ranked, new)
    _HELD[key] = held
    return changes
