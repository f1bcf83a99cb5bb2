"""An aggregate task's state kept in the driver: its body's bindings counted, and its tuples.

For `@agg(g.., <kind v>) :- body.` (tasks/aggregates.py) the state is the bag of the body's
bindings projected on the variables the head reads (g.. and v's), as derivation counts of a
relation BODY (c.., _cnt), the aggregate's tuples and, for a body of several atoms, the
relations it reads (as a counted task's share keeps them: counting_share.py). An epoch:

1. sums the body's signed change with counting's delta terms in Polars (counting_polars), over
   the kept relations and their change (rows the driver holds, or fetched by one Spark job);
2. adds it to the counts (count += Σ signed 1 per binding);
3. recomputes only the groups it touched from their counted bindings, with the
   rules.aggregate_rows every plan runs (head_rows): count, sum and mean, and min and max
   whose extreme was deleted (the next one is among the kept bindings), alike;
4. diffs them against the touched groups' kept tuples: the relation's signed change.

Without a state, or in place of a from-scratch evaluation (the session's bootstrap, a large
change, a switch), the task is recomputed in a way that builds it (state_recompute): the body's
counts over the new versions, the relation's old tuples and the relations a body of several
atoms reads are counted in Polars where the driver holds those rows, else fetched by one Spark
job as one union; every group is regrouped and diffed as above. A global aggregate (no group)
is one group.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from levelflow.engine.incremental.backends.driver_rows import polars_of, rows_of
from levelflow.engine.incremental.backends.spark_joins import heads_of
from levelflow.engine.incremental.backends.worker.counting_share import LowerRows
from levelflow.engine.incremental.strategies.counting_polars import count_changes
from levelflow.engine.memory import held_up_to
from levelflow.engine.plans.columnar import body_rows, empty_frame, head_rows
from levelflow.engine.plans.planner import LOCAL_ROWS
from levelflow.engine.rules import term_vars, var_col
from levelflow.engine.types import SQL_TYPES, column_names
from levelflow.tasks.ast import Aggregate, Atom, Const, Decl, Rule, Var

if TYPE_CHECKING:
    from levelflow.engine.incremental.versions import TaskContext

BODY = "@aggbody"  # a name the parser cannot produce
COUNT = "_cnt"


@dataclass
class AggHeld:
    """An aggregate task's state in the driver, with the fields snapshot.arranged's entries
    have (dred_job.Held's), so that the session carries it like theirs."""

    lineage: str
    token: str
    parts: int
    logs: dict = field(default_factory=dict)
    counts: pl.DataFrame | None = None  # BODY's counted bindings (c.., _cnt), every _cnt > 0
    tuples: pl.DataFrame | None = None  # the aggregate relation's tuples (c..)
    lower: dict = field(default_factory=dict)  # a body of several atoms: what they read


def held_state(held) -> AggHeld | None:
    """Return the driver state among a task's snapshot.arranged entry, if it is one."""
    return held if isinstance(held, AggHeld) else None


def body_projection(rule: Rule) -> tuple[Rule, list[str]] | None:
    """Return the rule `BODY(g.., v..) :- body.` and the variables it keeps, or None when the
    state cannot stand for the groups (a group key that is an expression, or one repeated)."""
    head = rule.heads[0]
    keys = [a.name for a in head.args if isinstance(a, Var)]
    if len(set(keys)) != len(keys) or \
            any(not isinstance(a, Var | Const | Aggregate) for a in head.args):
        return None
    agg = next(a for a in head.args if isinstance(a, Aggregate))
    target = sorted(term_vars(agg.target) - set(keys)) if agg.target is not None else []
    names = keys + target
    if not names:  # `count : r(_)`: a variable of the body keeps each binding a row of its
        # own (a head of constants only is one row in Polars, whatever the body's rows)
        names = sorted(v for lit in rule.body if isinstance(lit, Atom)
                       for a in lit.args for v in term_vars(a))[:1]
    if not names:
        return None
    return Rule((Atom(BODY, tuple(Var(n) for n in names)),), rule.body, rule.loc), names


def driver_state_fits(ctx: TaskContext, rule: Rule) -> bool:
    """Return whether the state of an aggregate rule may be kept in the driver: counting's
    delta terms count its bindings (a positive atom, each with a variable), and its body reads
    at most LOCAL_ROWS rows, or the session's driver rows where more (a bound on the state's
    size for one atom)."""
    positive = [lit for lit in rule.body if isinstance(lit, Atom)]
    if len(rule.heads) != 1 or not positive or \
            any(not any(isinstance(a, Var) for a in atom.args) for atom in positive):
        return False
    rows = sum(ctx.versions[a.relation].new_rows for _, a, _ in rule.body_atoms())
    return rows <= held_up_to(LOCAL_ROWS, ctx.driver_rows)


def _body_decl(ctx: TaskContext, body_rule: Rule, names: list[str]) -> tuple[Decl, dict]:
    """Return BODY's Decl and the variables' types (the Polars backend over empty frames)."""
    frames = {j: empty_frame(ctx.decls[a.relation]) for j, a, _ in body_rule.body_atoms()}
    _, types = body_rows(body_rule, ctx.decls, frames)
    kinds = tuple(types[n] for n in names)
    return Decl(BODY, tuple(f"a{k}" for k in range(len(kinds))), kinds), types


def state_update(ctx: TaskContext, rule: Rule, held: AggHeld | None
                 ) -> tuple[pl.DataFrame, pl.DataFrame, AggHeld]:
    """Return the aggregate's added and removed tuples (Polars, c..) and its new state: at
    most one Spark job (none when the driver holds the change and the state). Without a
    state, the recompute that builds it (state_recompute)."""
    if held is None:
        return state_recompute(ctx, rule)[1:]
    body_rule, names = body_projection(rule)
    decl, types = _body_decl(ctx, body_rule, names)
    decls = {**ctx.decls, BODY: decl}
    read = sorted({a.relation for _, a, _ in body_rule.body_atoms()})
    changed = [n for n in read if ctx.versions[n].changed]
    plus, minus, parts = {}, {}, {}
    for n in changed:
        ver = ctx.versions[n]
        for sign, df, rows, into in ((1, ver.plus, ver.plus_rows, plus),
                                     (-1, ver.minus, ver.minus_rows, minus)):
            table = rows_of(df) if rows else None
            if rows and table is None:
                parts[(sign, n)] = (decls[n], df)
            into[n] = polars_of(table, decls[n]) if table is not None else empty_frame(decls[n])
    for (sign, n), df in _fetch(parts).items():
        (plus if sign > 0 else minus)[n] = df
    # A body of one atom sums its change from the Δ alone; others join the kept relations.
    rows = LowerRows(held.lower, plus, minus)
    delta = count_changes((body_rule,), (BODY,), decls, rows, {})[BODY]
    counts, tuples = _added(held.counts, delta), held.tuples
    plus_t, minus_t = _regrouped(ctx, rule, names, types, counts, tuples, delta)
    return plus_t, minus_t, _state(ctx, rule, counts, tuples, plus_t, minus_t, rows.new)


def state_recompute(ctx: TaskContext, rule: Rule
                    ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, AggHeld]:
    """Return the aggregate recomputed from the new versions with its state built: its
    tuples, the added and removed ones (Polars, c..) and the state. One Spark job fetches the
    body's counts, the old tuples and, for a body of several atoms, the relations it reads;
    every group is then regrouped in the driver, as an update regroups the touched ones."""
    name = rule.heads[0].relation
    body_rule, names = body_projection(rule)
    decl, types = _body_decl(ctx, body_rule, names)
    decls = {**ctx.decls, BODY: decl}
    read = sorted({a.relation for _, a, _ in body_rule.body_atoms()})
    keep = read if len(body_rule.body_atoms()) > 1 else []
    got = _held_parts(ctx, body_rule, decls, name, keep)
    if got is None:  # some rows are on the Spark side
        parts = {"counts": (decl, _bag(ctx, body_rule, decls).coalesce(1).groupBy(
            *column_names(decl.arity)).count().withColumnRenamed("count", COUNT)),
            "tuples": (ctx.decls[name], ctx.versions[name].old)}
        parts |= {("new", n): (decls[n], ctx.versions[n].new) for n in keep}
        got = _fetch(parts)
    counts, was = got["counts"], got["tuples"]
    plus_t, minus_t = _regrouped(ctx, rule, names, types, counts, was, None)
    state = _state(ctx, rule, counts, was, plus_t, minus_t, {n: got[("new", n)] for n in keep})
    return state.tuples, plus_t, minus_t, state


def _held_parts(ctx: TaskContext, body_rule: Rule, decls: dict, name: str, keep: list[str]
                ) -> dict | None:
    """Return what _fetch would fetch, from rows the driver holds (no job), or None unless it
    holds every version the recompute reads."""
    wanted = {(a.relation, True) for _, a, _ in body_rule.body_atoms()}
    held = {}
    for n, new in wanted | {(name, False)}:
        ver = ctx.versions[n]
        df, rows = (ver.new, ver.new_rows) if new else (ver.old, ver.old_rows)
        table = rows_of(df) if rows else None
        if rows and table is None:
            return None
        held[n, new] = polars_of(table, decls[n]) if table is not None else empty_frame(decls[n])
    frames = {j: held[a.relation, True] for j, a, _ in body_rule.body_atoms()}
    body, types = body_rows(body_rule, decls, frames)
    bag = head_rows(body, types, body_rule.heads[0], decls[BODY])
    counts = bag.group_by(bag.columns).agg(pl.len().cast(pl.Int64).alias(COUNT))
    return {"counts": counts, "tuples": held[name, False],
            **{("new", n): held[n, True] for n in keep}}


def _state(ctx: TaskContext, rule: Rule, counts: pl.DataFrame, tuples: pl.DataFrame,
           plus_t: pl.DataFrame, minus_t: pl.DataFrame, lower: dict) -> AggHeld:
    """Return the state after an epoch: the counts, the tuples with the change applied."""
    cols = column_names(ctx.decls[rule.heads[0].relation].arity)
    if plus_t.height or minus_t.height:
        tuples = pl.concat([tuples.join(minus_t, on=cols, how="anti"), plus_t])
    return AggHeld(f"agg-{uuid.uuid4().hex[:12]}", "", 0, counts=counts, tuples=tuples,
                   lower=lower)


def _added(counts: pl.DataFrame, delta: pl.DataFrame) -> pl.DataFrame:
    """Return the counts with the signed change `delta` (c.., _d) added, zeros left out."""
    if not delta.height:
        return counts
    cols = [c for c in counts.columns if c != COUNT]
    touched = delta.join(counts, on=cols, how="left").select(
        *cols, (pl.col(COUNT).fill_null(0) + pl.col("_d")).alias(COUNT))
    return pl.concat([counts.join(delta.select(cols), on=cols, how="anti"),
                      touched.filter(pl.col(COUNT) > 0)])


def _regrouped(ctx: TaskContext, rule: Rule, names: list[str], types: dict,
               counts: pl.DataFrame, tuples: pl.DataFrame, delta: pl.DataFrame | None):
    """Return (added, removed) tuples of the groups the change touched (every group when
    `delta` is None), recomputed from their counted bindings."""
    head = rule.heads[0]
    decl = ctx.decls[head.relation]
    cols = column_names(decl.arity)
    if delta is not None and not delta.height:
        return tuples.clear(), tuples.clear()
    keys = [(i, f"c{names.index(a.name)}") for i, a in enumerate(head.args)
            if isinstance(a, Var)]
    rows, was = counts, tuples
    if keys and delta is not None:  # only the touched groups: their bindings and their old tuples
        touched = delta.select([b for _, b in keys]).unique()
        rows = counts.join(touched, on=[b for _, b in keys], how="semi")
        was = tuples.join(touched.rename({b: f"c{i}" for i, b in keys}),
                          on=[f"c{i}" for i, _ in keys], how="semi")
    # Each binding as many times as it is counted: the aggregate ranges over the bag.
    bag = rows[np.repeat(np.arange(rows.height), rows[COUNT].to_numpy())]
    # Added, not selected: selecting only a literal from many rows makes one row in Polars.
    body = bag.rename({f"c{k}": var_col(n) for k, n in enumerate(names)}).drop(COUNT)
    after = head_rows(body, types, head, decl).unique()
    return after.join(was, on=cols, how="anti"), was.join(after, on=cols, how="anti")


def _bag(ctx: TaskContext, body_rule: Rule, decls: dict):
    """Return BODY's bag of bindings over the new versions, on Spark."""
    frames = {j: ctx.versions[a.relation].new for j, a, _ in body_rule.body_atoms()}
    ((_, bag),) = heads_of(ctx, body_rule, (BODY,), frames, ctx.sizes(body_rule, True),
                           decls=decls)
    return bag


def _fetch(parts: dict) -> dict:
    """Return the frames of `parts` (key -> (Decl, DataFrame of c.., and _cnt for BODY's
    counts)) as Polars frames of their columns and types, fetched as one union by one job."""
    import pyspark.sql.functions as F

    fields = {}
    for tag, (decl, df) in enumerate(parts.values()):
        fields |= {f"p{tag}_{c}": SQL_TYPES[t]
                   for c, t in zip(column_names(decl.arity), decl.types, strict=True)}
        if COUNT in df.columns:
            fields[f"p{tag}_{COUNT}"] = "bigint"
    union = None
    for tag, (decl, df) in enumerate(parts.values()):
        mine = [c for c in [*column_names(decl.arity), COUNT] if c in df.columns]
        have = {f"p{tag}_{c}": F.col(c) for c in mine}
        one = df.select(F.lit(tag).alias("_part"), *[
            have.get(f, F.lit(None)).cast(t).alias(f) for f, t in fields.items()])
        union = one if union is None else union.unionByName(one)
    if union is None:
        return {}
    both = pl.from_arrow(union.toArrow())  # the epoch's one Spark job
    out = {}
    for tag, (key, (decl, df)) in enumerate(parts.items()):
        rows = both.filter(pl.col("_part") == tag)
        cols = column_names(decl.arity)
        frame = polars_of(rows.select([pl.col(f"p{tag}_{c}").alias(c) for c in cols])
                          .to_arrow(), decl)
        if COUNT in df.columns:
            frame = frame.with_columns(rows[f"p{tag}_{COUNT}"].alias(COUNT))
        out[key] = frame
    return out
