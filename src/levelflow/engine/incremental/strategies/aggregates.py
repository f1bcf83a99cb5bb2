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

import polars as pl

from levelflow.engine.compile import body_frame
from levelflow.engine.evaluate import RANK
from levelflow.engine.incremental.backends.driver_change import among, held_change
from levelflow.engine.incremental.backends.driver_rows import (
    arrow_of,
    frame_of_table,
    polars_of,
    rows_of,
    spark_frame,
)
from levelflow.engine.incremental.backends.spark_broadcast import bcast_small
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.plans.columnar import head_rows
from levelflow.engine.rules import term_vars, var_col
from levelflow.engine.types import SQL_TYPES, column_names, relation_schema
from levelflow.tasks.aggregates import is_aggregate_rule
from levelflow.tasks.ast import Aggregate, Atom, Decl, Negation, Rule, Var

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


def _delta(ctx: TaskContext, relation: str) -> tuple[DataFrame, int]:
    """Return Δ+ ∪ Δ- of a relation, from the driver's copy when it holds one (so that
    shipping it to a join is no Spark job), and its rows."""
    ver = ctx.versions[relation]
    parts = [(df, rows) for df, rows in ((ver.plus, ver.plus_rows), (ver.minus, ver.minus_rows))
             if rows]
    tables = [rows_of(df) for df, _ in parts]
    rows = sum(r for _, r in parts)
    if all(t is not None for t in tables):
        import pyarrow as pa

        table = pa.concat_tables([t.select(column_names(ver.decl.arity)) for t in tables])
        return spark_frame(ctx.spark, table, relation_schema(ver.decl)), rows
    return bcast_small(_union([df for df, _ in parts]), rows), rows


def touched_groups(ctx: TaskContext, rule: Rule, changed: set[str]) -> list[tuple]:
    """Return the group keys whose body rows the change touched (one Spark job)."""
    keys = _keys(rule)
    plans = []
    for variant, pos in touched_rules(rule, changed):
        delta, rows = _delta(ctx, variant.body[pos].relation)
        for new in (False, True):
            frames, counts = {}, {}
            for j, atom, _ in variant.body_atoms():
                v = ctx.versions[atom.relation]
                frames[j] = v.new if new else v.old
                counts[j] = v.new_rows if new else v.old_rows
            frames[pos], counts[pos] = delta, rows
            df, _ = body_frame(ctx.spark, variant, ctx.decls, frames, counts, first=pos,
                               small_seed=True)
            plans.append(df.select(*[var_col(n) for _, n in keys]))
    return sorted({tuple(r) for r in _union(plans).collect()})


def _touched_frame(ctx: TaskContext, rule: Rule, touched: list[tuple], names: list[str]):
    """Return the touched keys as a DataFrame built in the driver (no job to ship it)."""
    decl = ctx.decls[rule.heads[0].relation]
    keys = _keys(rule)
    schema = relation_schema(Decl(TOUCHED, tuple(names),
                                  tuple(decl.types[i] for i, _ in keys)))
    return bcast_small(ctx.spark.createDataFrame(touched, schema).toDF(*names), len(touched))


def new_body(ctx: TaskContext, rule: Rule, touched: list[tuple]):
    """Return the aggregate body's rows of the touched groups (all rows without groups),
    as a plan, and the variables' types."""
    keys = _keys(rule)
    decls = dict(ctx.decls)
    body = rule.body
    frames, counts = {}, {}
    for j, atom, _ in rule.body_atoms():
        ver = ctx.versions[atom.relation]
        frames[j], counts[j] = ver.new, ver.new_rows
    first = None
    names = [n for _, n in keys]
    holder = next((j for j, atom, neg in rule.body_atoms() if not neg and
                   all(Var(n) in atom.args for n in names)), None)
    if keys and holder is not None:  # the touched keys filter the atom that binds them all
        args = rule.body[holder].args
        frames[holder] = frames[holder].filter(among(
            [f"c{args.index(Var(n))}" for n in names], touched))
    elif keys:
        decl = ctx.decls[rule.heads[0].relation]
        decls[TOUCHED] = Decl(TOUCHED, tuple(f"c{k}" for k in range(len(keys))),
                              tuple(decl.types[i] for i, _ in keys))
        first = len(body)
        body = body + (Atom(TOUCHED, tuple(Var(n) for n in names)),)
        frames[first] = _touched_frame(ctx, rule, touched,
                                       [f"c{k}" for k in range(len(keys))])
        counts[first] = len(touched)
    return body_frame(ctx.spark, Rule(rule.heads, body, rule.loc), decls, frames, counts,
                      first=first, small_seed=first is not None)


def aggregate_update(ctx: TaskContext, task: Task, held=None, driver: bool = True
                     ) -> tuple[dict[str, Change], object]:
    """Return the Change of an aggregate task's relation from its inputs' change, and its
    state kept in the driver (aggregate_state.py) when it may be (`driver`), else None."""
    from levelflow.engine.incremental.strategies import aggregate_state as state

    rule = _rule(task)
    name = rule.heads[0].relation
    if driver and _in_driver(ctx, rule):
        plus, minus, kept = state.state_update(ctx, rule, state.held_state(held))
        cols = column_names(ctx.decls[name].arity)
        return {name: held_change(ctx, name, ctx.versions[name], plus, minus, cols,
                                  kept.tuples)}, kept
    return touched_update(ctx, task, rule), None


def aggregate_recompute(ctx: TaskContext, task: Task) -> tuple[dict[str, Change], object] | None:
    """Return an aggregate task recomputed from scratch with its driver state built
    (aggregate_state.state_recompute: no job where the driver holds the rows it reads, else
    one), or None when it keeps no state there or must be evaluated whole (a limit, a choice,
    autoinc)."""
    from levelflow.engine.choose import chosen
    from levelflow.engine.incremental.strategies import aggregate_state as state
    from levelflow.engine.limitsize import limited
    from levelflow.tasks.functors import uses_autoinc

    if not aggregate_task(task) or limited(ctx.program, task.relations) or \
            chosen(ctx.decls, task.relations) or uses_autoinc(task.rules):
        return None
    rule = _rule(task)
    if not _in_driver(ctx, rule):
        return None
    tuples, plus, minus, held = state.state_recompute(ctx, rule)
    name = rule.heads[0].relation
    return {name: _whole_change(ctx, name, tuples, plus, minus)}, held


def _whole_change(ctx: TaskContext, name: str, tuples, plus, minus) -> Change:
    """Return the Change of a recomputed relation: its new tuples whole (one piece, as a
    from-scratch evaluation leaves it) and its change, held in the driver."""
    from levelflow.engine.incremental.strategies.recompute import ranked_held

    old = ctx.versions[name]
    if not plus.height and not minus.height:
        return Change(None, rows=old.old_rows, pieces=old.pieces, top=0)
    schema = relation_schema(ctx.decls[name])
    # Ranked 0, as a from-scratch evaluation ranks (fixpoint_relations); no Spark until used.
    ranked = ranked_held(ctx, name, tuples.with_columns(pl.lit(0, pl.Int64).alias(RANK)))
    plus_df = frame_of_table(ctx.spark, arrow_of(plus), schema) if plus.height else None
    minus_df = frame_of_table(ctx.spark, arrow_of(minus), schema) if minus.height else None
    return Change(ranked, plus_df, plus.height, minus_df, minus.height, tuples.height,
                  pieces=1, top=0)


def kept_state(ctx: TaskContext, task: Task):
    """Return an aggregate task's state built in the driver from its current version (one
    job, nothing changed), or None when it keeps none."""
    from levelflow.engine.incremental.strategies import aggregate_state as state

    rule = _rule(task)
    if not _in_driver(ctx, rule):
        return None
    return state.state_update(ctx, rule, None)[2]  # nothing changed: no group touched


def _rule(task: Task) -> Rule:
    (rule,) = [r for r in task.rules if is_aggregate_rule(r)]
    return rule


def _in_driver(ctx: TaskContext, rule: Rule) -> bool:
    from levelflow.engine.incremental.strategies import aggregate_state as state

    return state.body_projection(rule) is not None and state.driver_state_fits(ctx, rule)


def aggregate_limits(ctx: TaskContext, task: Task, held, large: float | None, switch: float,
                     driver: bool) -> tuple[float | None, float | None]:
    """Return the elastic rules' large change and fraction of the last from-scratch time for
    an aggregate task. A kept state's update follows the change in the driver, cheaper than
    the recompute and its diff on Spark: no change is large, and it stops only once it cost
    what they would (elastic.AGGREGATE_SWITCH). Building a state costs the recompute: no
    budget (None: the fallback costs as much). Without a driver state, the session's rules."""
    from levelflow.engine.incremental.elastic import AGGREGATE_SWITCH
    from levelflow.engine.incremental.strategies.aggregate_state import held_state

    if not driver or not _in_driver(ctx, _rule(task)):
        return large, switch
    if held_state(held) is not None:
        return None, switch * AGGREGATE_SWITCH
    return large, None


def touched_update(ctx: TaskContext, task: Task, rule: Rule) -> dict[str, Change]:
    """Return the Change of an aggregate task's relation with no state kept: its touched
    groups recomputed on Spark (two jobs)."""
    name = rule.heads[0].relation
    decl = ctx.decls[name]
    old = ctx.versions[name]
    changed = {n for n in task.reads_from if ctx.versions[n].changed}
    keys = _keys(rule)
    touched = touched_groups(ctx, rule, changed) if keys and changed else [()]
    if not changed or not touched:
        return {name: Change(None, rows=old.old_rows, pieces=old.pieces, top=0)}
    cols = column_names(decl.arity)
    before = old.old
    if keys:
        before = before.filter(among([f"c{i}" for i, _ in keys], touched))
    rows, types = new_body(ctx, rule, touched)
    body, was = _collect(rows, types, before, decl, sorted({n for _, n in keys}
                                                           | _target_vars(rule)))
    # The touched groups' rows are grouped in the driver by the Polars backend (the same
    # rules.aggregate_rows every plan runs): no shuffle.
    after = head_rows(body, types, rule.heads[0], decl)
    plus = after.unique().join(was, on=cols, how="anti")
    minus = was.join(after, on=cols, how="anti")
    return {name: held_change(ctx, name, old, plus, minus, cols)}


def _collect(rows, types, before, decl: Decl, used: list[str]):
    """Return the body rows (the variables `used`) and the old tuples, fetched by one job as
    one union, as Polars frames."""
    import pyspark.sql.functions as F

    cols = column_names(decl.arity)
    var_cols = [var_col(n) for n in used]

    def none(name, primitive):
        return F.lit(None).cast(SQL_TYPES[primitive]).alias(name)

    # `_one`: a table of no columns would lose its rows' count.
    a = rows.select(*var_cols, *[none(c, t) for c, t in zip(cols, decl.types, strict=True)],
                    F.lit(2).alias("_in"))
    b = before.select(*[none(var_col(n), types[n]) for n in used],
                      *[F.col(c) for c in cols], F.lit(1).alias("_in"))
    both = pl.from_arrow(a.unionByName(b).toArrow())
    body = both.filter(pl.col("_in") == 2).select(var_cols)
    if not var_cols:
        body = both.filter(pl.col("_in") == 2).select(pl.col("_in").alias("_one"))
    was = polars_of(both.filter(pl.col("_in") == 1).select(cols).to_arrow(), decl)
    return body, was


def _target_vars(rule: Rule) -> set[str]:
    agg = next(a for a in rule.heads[0].args if isinstance(a, Aggregate))
    return term_vars(agg.target) if agg.target is not None else set()
