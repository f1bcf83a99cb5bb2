"""An aggregate task's state kept in the driver: its body's bindings counted, and its tuples.

For `@agg(g.., <kind v>) :- body.` (tasks/aggregates.py) the state is the bag of the body's
bindings projected on the variables the head reads (g.. and v's), as derivation counts of a
relation BODY (c.., _cnt), and the aggregate's tuples. An epoch:

1. sums the body's signed change with counting's delta terms: in Polars when every term reads
   rows the driver holds (counting_polars: no Spark job), else the same terms on Spark
   (counting_spark) fetched by one job;
2. adds it to the counts (count += Σ signed 1 per binding);
3. recomputes only the groups it touched from their counted bindings, with the
   rules.aggregate_rows every plan runs (head_rows): count, sum and mean, and min and max
   whose extreme was deleted (the next one is among the kept bindings), alike;
4. diffs them against the touched groups' kept tuples: the relation's signed change.

Without a state (after a bootstrap, a switch to a recompute, an open) one Spark job builds it:
the body's counts over the new versions, the relation's old tuples and, unless the driver
sums it, the signed change, fetched as one union. A global aggregate (no group) is one group.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from levelflow.engine.evaluate import union_all
from levelflow.engine.incremental.backends.driver_rows import polars_of
from levelflow.engine.incremental.backends.spark_joins import heads_of
from levelflow.engine.incremental.strategies.counting_polars import changes_in_driver
from levelflow.engine.plans.columnar import body_rows, empty_frame, frame_schema, head_rows
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
    at most LOCAL_ROWS rows (a bound on the state's size for one atom)."""
    positive = [lit for lit in rule.body if isinstance(lit, Atom)]
    if len(rule.heads) != 1 or not positive or \
            any(not any(isinstance(a, Var) for a in atom.args) for atom in positive):
        return False
    return sum(ctx.versions[a.relation].new_rows for _, a, _ in rule.body_atoms()) <= LOCAL_ROWS


def _body_decl(ctx: TaskContext, body_rule: Rule, names: list[str]) -> tuple[Decl, dict]:
    """Return BODY's Decl and the variables' types (the Polars backend over empty frames)."""
    frames = {j: empty_frame(ctx.decls[a.relation]) for j, a, _ in body_rule.body_atoms()}
    _, types = body_rows(body_rule, ctx.decls, frames)
    kinds = tuple(types[n] for n in names)
    return Decl(BODY, tuple(f"a{k}" for k in range(len(kinds))), kinds), types


def state_update(ctx: TaskContext, rule: Rule, held: AggHeld | None
                 ) -> tuple[pl.DataFrame, pl.DataFrame, AggHeld]:
    """Return the aggregate's added and removed tuples (Polars, c..) and its new state: at
    most one Spark job (none when the driver holds the change and the state)."""
    name = rule.heads[0].relation
    body_rule, names = body_projection(rule)
    decl, types = _body_decl(ctx, body_rule, names)
    sub = copy.copy(ctx)  # the context with BODY declared, for counting's terms
    sub.decls = {**ctx.decls, BODY: decl}
    delta = changes_in_driver(sub, (body_rule,), (BODY,))
    if held is None:
        counts, tuples, fetched = _build(sub, body_rule, name, delta is None)
        delta = fetched if delta is None else delta
    else:
        if delta is None:
            delta = _fetch(sub, {"delta": _signed_terms(sub, body_rule)})["delta"]
        counts, tuples = _added(held.counts, delta), held.tuples
    plus, minus = _regrouped(ctx, rule, names, types, counts, tuples, delta)
    cols = column_names(ctx.decls[name].arity)
    if plus.height or minus.height:
        tuples = pl.concat([tuples.join(minus, on=cols, how="anti"), plus])
    state = AggHeld(f"agg-{uuid.uuid4().hex[:12]}", "", 0, counts=counts, tuples=tuples)
    return plus, minus, state


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
               counts: pl.DataFrame, tuples: pl.DataFrame, delta: pl.DataFrame):
    """Return (added, removed) tuples of the groups the change touched, recomputed from their
    counted bindings."""
    head = rule.heads[0]
    decl = ctx.decls[head.relation]
    cols = column_names(decl.arity)
    if not delta.height:
        return tuples.clear(), tuples.clear()
    keys = [(i, f"c{names.index(a.name)}") for i, a in enumerate(head.args)
            if isinstance(a, Var)]
    rows, was = counts, tuples
    if keys:  # only the touched groups: their bindings and their old tuples
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


def _signed_terms(sub: TaskContext, body_rule: Rule):
    """Return counting's signed delta terms of BODY on Spark (c.., _s), or None: none."""
    # Here: counting_spark imports aggregates.py, which imports this module.
    from levelflow.engine.incremental.strategies.counting_spark import _signed_changes

    task = SimpleNamespace(relations=(BODY,), rules=(body_rule,))
    frames = _signed_changes(sub, task)[0][BODY]
    return union_all(frames) if frames else None


def _build(sub: TaskContext, body_rule: Rule, name: str, with_delta: bool):
    """Return BODY's counts over the new versions, the relation's old tuples and (with
    `with_delta`) the summed signed change, fetched by one Spark job."""
    import pyspark.sql.functions as F

    cols = column_names(sub.decls[BODY].arity)
    frames = {j: sub.versions[a.relation].new for j, a, _ in body_rule.body_atoms()}
    ((_, bag),) = heads_of(sub, body_rule, (BODY,), frames, sub.sizes(body_rule, True))
    # One partition: its group-by needs no shuffle, which would be a job of its own.
    counted = bag.coalesce(1).groupBy(*cols).agg(F.count(F.lit(1)).alias(COUNT))
    parts = {"counts": counted, "tuples": sub.versions[name].old}
    if with_delta:
        parts["delta"] = _signed_terms(sub, body_rule)
    got = _fetch(sub, parts, name)
    return got["counts"], got["tuples"], got.get("delta")


def _fetch(sub: TaskContext, parts: dict, name: str | None = None) -> dict[str, pl.DataFrame]:
    """Return the frames `parts` (counts: BODY c.. _cnt; tuples: the relation's c..; delta:
    BODY c.. _s, summed here into _d) as Polars, fetched as one union by one Spark job."""
    import pyspark.sql.functions as F

    body, rel = sub.decls[BODY], sub.decls.get(name)
    fields = {f"b{c}": t for c, t in zip(column_names(body.arity), body.types, strict=True)}
    if rel is not None:
        fields |= {f"r{c}": t for c, t in zip(column_names(rel.arity), rel.types, strict=True)}
    fields |= {COUNT: "number", "_s": "number"}
    union = None
    for tag, (kind, df) in enumerate(parts.items()):
        if df is None:
            continue
        prefix = "r" if kind == "tuples" else "b"
        have = {f"{prefix}{c}": F.col(c) for c in df.columns if c.startswith("c")}
        have |= {c: F.col(c).cast("bigint") for c in (COUNT, "_s") if c in df.columns}
        one = df.select(F.lit(tag).alias("_part"), *[
            have.get(f, F.lit(None).cast(SQL_TYPES[t])).alias(f) for f, t in fields.items()])
        union = one if union is None else union.unionByName(one)
    both = pl.from_arrow(union.toArrow()) if union is not None else None
    out = {}
    for tag, kind in enumerate(parts):
        mine = both.filter(pl.col("_part") == tag) if both is not None else None
        out[kind] = _part(kind, mine, body, rel)
    return out


def _part(kind: str, rows: pl.DataFrame | None, body: Decl, rel: Decl | None) -> pl.DataFrame:
    """Return one fetched part in its own columns and types."""
    decl = rel if kind == "tuples" else body
    prefix = "r" if kind == "tuples" else "b"
    schema = frame_schema(decl)
    if rows is None:
        rows = pl.DataFrame(schema={f"{prefix}{c}": t for c, t in schema.items()} |
                            {COUNT: pl.Int64, "_s": pl.Int64})
    tuples = polars_of(rows.select([pl.col(f"{prefix}{c}").alias(c) for c in schema])
                       .to_arrow(), decl)
    if kind == "tuples":
        return tuples
    if kind == "counts":
        return tuples.with_columns(rows[COUNT].alias(COUNT))
    signed = tuples.with_columns(rows["_s"].alias("_s"))
    return signed.group_by(list(schema)).agg(pl.col("_s").sum().alias("_d")) \
        .filter(pl.col("_d") != 0)
