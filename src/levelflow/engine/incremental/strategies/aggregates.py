"""An aggregate task's epoch: recompute only the groups its inputs' change touched.

A lowered aggregate (tasks/aggregates.py) is one rule `@agg(g.., <kind v>) :- body.` grouped
by the injected variables g. An epoch rewrites it into ordinary rules, evaluated by the
backend that runs rule bodies (engine/rules.py over Spark here):

    @touched(g..) :- body, with body atom i reading Δi (Δ+ ∪ Δ-; a negated atom positive),
                     the other atoms their old versions          -- rows that disappeared
    @touched(g..) :- the same over the new versions              -- rows that appeared
    @agg(g.., <kind v>) :- @touched(g..), body.                  -- the touched groups anew

and compares the touched groups' new values with their old ones: the groups whose value
changed come back as the relation's signed change (an old tuple out, a new one in), as
differential dataflow's `reduce` does per key. A group no change touched keeps its value;
one whose body lost every row has no new value (count and sum of it were 0 by the outer rule).
An aggregate without groups (g empty) is recomputed whole once anything it reads changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.compile import body_frame, head_frame
from levelflow.engine.evaluate import MERGE_PIECES, RANK, merge_pieces
from levelflow.engine.incremental.joins import bcast_small
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.rules import var_col
from levelflow.engine.types import column_names, relation_schema
from levelflow.tasks.aggregates import is_aggregate_rule
from levelflow.tasks.ast import Atom, Decl, Negation, Rule, Var

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from levelflow.tasks.tasks import Task

TOUCHED = "@touched"  # a name the parser cannot produce


def aggregate_task(task: Task) -> bool:
    """Return whether a task computes a lowered aggregate (its rule groups its body)."""
    return any(is_aggregate_rule(r) for r in task.rules)


def _union(frames: list[DataFrame]) -> DataFrame | None:
    out = None
    for df in frames:
        out = df if out is None else out.unionByName(df)
    return out


def _keys(rule: Rule) -> list[tuple[int, str]]:
    """Return (head position, variable) of each group key of an aggregate rule's head."""
    return [(i, a.name) for i, a in enumerate(rule.heads[0].args) if isinstance(a, Var)]


def touched_rules(rule: Rule, changed: set[str]) -> list[tuple[Rule, int]]:
    """Return the rules whose rows name the touched groups: per body atom over a changed
    relation, the body with that atom positive (it reads the relation's Δ), and its position."""
    head = Atom(TOUCHED, tuple(Var(n) for _, n in _keys(rule)))
    out = []
    for i, lit in enumerate(rule.body):
        atom = lit.atom if isinstance(lit, Negation) else lit
        if isinstance(atom, Atom) and atom.relation in changed:
            body = rule.body[:i] + (atom,) + rule.body[i + 1:]
            out.append((Rule((head,), body, rule.loc), i))
    return out


def touched_groups(ctx: TaskContext, rule: Rule, changed: set[str]) -> list[tuple]:
    """Return the group keys whose body rows the change touched (one Spark job)."""
    keys = _keys(rule)
    plans = []
    for variant, pos in touched_rules(rule, changed):
        ver = ctx.versions[rule.body[pos].atom.relation if isinstance(rule.body[pos], Negation)
                           else rule.body[pos].relation]
        delta = _union([df for df, rows in ((ver.plus, ver.plus_rows),
                                            (ver.minus, ver.minus_rows)) if rows])
        rows = ver.plus_rows + ver.minus_rows
        for new in (False, True):
            frames, counts = {}, {}
            for j, atom, _ in variant.body_atoms():
                v = ctx.versions[atom.relation]
                frames[j] = v.new if new else v.old
                counts[j] = v.new_rows if new else v.old_rows
            frames[pos], counts[pos] = bcast_small(delta, rows), rows
            df, _ = body_frame(ctx.spark, variant, ctx.decls, frames, counts, first=pos,
                               small_seed=True)
            plans.append(df.select(*[var_col(n) for _, n in keys]))
    return [tuple(r) for r in _union(plans).distinct().collect()]


def new_values(ctx: TaskContext, rule: Rule, touched: list[tuple]) -> DataFrame:
    """Return the aggregate's tuples of the touched groups (all of them without groups)."""
    keys = _keys(rule)
    decl = ctx.decls[rule.heads[0].relation]
    decls = dict(ctx.decls)
    body = rule.body
    frames, counts = {}, {}
    for j, atom, _ in rule.body_atoms():
        frames[j], counts[j] = ctx.versions[atom.relation].new, ctx.versions[atom.relation].new_rows
    first = None
    if keys:
        types = tuple(decl.types[i] for i, _ in keys)
        decls[TOUCHED] = Decl(TOUCHED, tuple(n for _, n in keys), types)
        schema = relation_schema(decls[TOUCHED])
        first = len(body)
        body = body + (Atom(TOUCHED, tuple(Var(n) for _, n in keys)),)
        frames[first] = bcast_small(ctx.spark.createDataFrame(touched, schema), len(touched))
        counts[first] = len(touched)
    grouped = Rule(rule.heads, body, rule.loc)
    df, types = body_frame(ctx.spark, grouped, decls, frames, counts, first=first,
                           small_seed=first is not None)
    return head_frame(df, types, rule.heads[0], decl)


def aggregate_update(ctx: TaskContext, task: Task) -> dict[str, Change]:
    """Return the Change of an aggregate task's relation from its inputs' change."""
    import pyspark.sql.functions as F

    (rule,) = [r for r in task.rules if is_aggregate_rule(r)]
    name = rule.heads[0].relation
    old = ctx.versions[name]
    changed = {n for n in task.reads_from if ctx.versions[n].changed}
    keys = _keys(rule)
    touched = touched_groups(ctx, rule, changed) if keys and changed else [()]
    if not changed or not touched:
        return {name: Change(None, rows=old.old_rows, pieces=old.pieces, top=0)}
    cols = column_names(ctx.decls[name].arity)
    before = old.old
    if keys:
        schema = relation_schema(Decl(TOUCHED, tuple(n for _, n in keys),
                                      tuple(ctx.decls[name].types[i] for i, _ in keys)))
        hit = ctx.spark.createDataFrame(touched, schema)
        hit = hit.toDF(*[f"c{i}" for i, _ in keys])
        before = before.join(bcast_small(hit, len(touched)), [f"c{i}" for i, _ in keys],
                             "left_semi")
    tagged = before.select(*cols, F.lit(1).alias("_in")).unionByName(
        new_values(ctx, rule, touched).select(*cols, F.lit(2).alias("_in")))
    rows = tagged.groupBy(*cols).agg(F.sum("_in").alias("_in")).filter(F.col("_in") != 3) \
        .collect()
    return {name: _change(ctx, name, old, rows, cols)}


def _change(ctx: TaskContext, name: str, old, rows, cols) -> Change:
    """Return the Change from the changed tuples (tagged 1 old, 2 new) held in the driver."""
    import pyspark.sql.functions as F

    if not rows:
        return Change(None, rows=old.old_rows, pieces=old.pieces, top=0)
    schema = relation_schema(ctx.decls[name])
    spark = ctx.spark
    plus_rows = [tuple(r[c] for c in cols) for r in rows if r["_in"] == 2]
    minus_rows = [tuple(r[c] for c in cols) for r in rows if r["_in"] == 1]
    plus = spark.createDataFrame(plus_rows, schema) if plus_rows else None
    minus = spark.createDataFrame(minus_rows, schema) if minus_rows else None
    ranked = ctx.old_ranked[name]
    if minus is not None:
        ranked = ranked.join(bcast_small(minus, len(minus_rows)), cols, "left_anti")
    rank = F.lit(0).cast(ranked.schema[RANK].dataType)
    added = plus.withColumn(RANK, rank) if plus is not None else None
    if added is not None:
        ranked = ranked.unionByName(added)
    pieces = old.pieces + 1
    if pieces > MERGE_PIECES:
        ranked, pieces = merge_pieces(ranked), 1
    return Change(ranked, plus, len(plus_rows), minus, len(minus_rows),
                  old.old_rows + len(plus_rows) - len(minus_rows), pieces=pieces, top=0,
                  stored=(minus, added))
