"""Counting on Spark: a non-recursive task updated by counts of derivations, its delta terms
(counting.py states them) evaluated over DataFrames and folded into the old counts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.compile import BROADCAST_ROWS
from levelflow.engine.evaluate import (
    cut,
    cut_observed,
    union_all,
)
from levelflow.engine.incremental.backends.driver_rows import arrow_of, frame_of_table
from levelflow.engine.incremental.backends.spark_broadcast import bcast_small
from levelflow.engine.incremental.backends.spark_joins import heads_of, program_facts
from levelflow.engine.incremental.state.snapshot import COUNT
from levelflow.engine.incremental.strategies.aggregates import aggregate_task
from levelflow.engine.incremental.strategies.counting import SIGNS, delta_terms
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.sql_text import count_where, exprs, quoted
from levelflow.engine.types import column_names, empty_relation, relation_schema
from levelflow.tasks.ast import Atom, Program, Var

if TYPE_CHECKING:

    import polars as pl
    from pyspark.sql import DataFrame

    from levelflow.tasks.tasks import Task


# Rows a counting update's plans (and, to sum them in one job, its old counts) may read at most
# for its fold to run in one partition.
ONE_PARTITION_ROWS = 50_000


def countable(program: Program, task: Task) -> bool:
    """Return whether the counting algorithm maintains this task exactly.

    Recursive tasks are not (DRed does them). Nor are rules whose body rows do not count
    derivations: a nullary head (one row whatever the body), a positive atom without variables
    (joined as "exists"), a body without positive atoms.
    """
    if task.recursive or aggregate_task(task) or task.subsumes:  # group-by, pruned: own
        return False
    if any(program.decls[n].choice for n in task.relations):  # chosen: recomputed (epoch.py)
        return False
    for rule in task.rules:
        if not rule.body:
            continue
        if any(program.decls[h.relation].arity == 0 for h in rule.heads):
            return False
        positive = [lit for lit in rule.body if isinstance(lit, Atom)]
        if not positive:
            return False
        if any(not any(isinstance(a, Var) for a in atom.args) for atom in positive):
            return False
    return True


def count_scratch(ctx: TaskContext, task: Task) -> dict[str, DataFrame]:
    """Return each relation's derivation counts (c.., _cnt) computed from the new versions."""
    import pyspark.sql.functions as F

    parts: dict[str, list[DataFrame]] = {n: [] for n in task.relations}
    for name in task.relations:
        if name in ctx.base:
            parts[name].append(ctx.base[name].new)
        facts = program_facts(ctx, task, name)
        if facts is not None:
            parts[name].append(facts)
    for rule in task.rules:
        if rule.body:
            frames = {i: ctx.versions[a.relation].new for i, a, _ in rule.body_atoms()}
            for name, df in heads_of(ctx, rule, task.relations, frames, ctx.sizes(rule, True)):
                parts[name].append(df)
    out = {}
    for name in task.relations:
        decl = ctx.decls[name]
        cols = column_names(decl.arity)
        bag = union_all(parts[name]) if parts[name] else empty_relation(ctx.spark, decl)
        out[name] = bag.groupBy(*cols).agg(F.count(F.lit(1)).alias(COUNT))
    return out


def count_update(ctx: TaskContext, task: Task, summed) -> dict[str, Change]:
    """Return per own relation its Change: new counts, Δ±, and whether any count changed;
    `summed`: counting_polars.summed_in_driver's answer for the task (None: not in the driver)."""
    if summed is not None:
        return {name: _fold_summed(ctx, name, summed[name]) for name in task.relations}
    signed, read = _signed_changes(ctx, task)
    return {name: _fold(ctx, name, signed[name], read[name] <= ONE_PARTITION_ROWS)
            for name in task.relations}


def _signed_changes(ctx: TaskContext, task: Task
                    ) -> tuple[dict[str, list[DataFrame]], dict[str, int]]:
    """Return per own relation the tuples whose derivation count changes, with the sign `_s`,
    and how many rows their plans read at most."""
    import pyspark.sql.functions as F

    signed: dict[str, list[DataFrame]] = {n: [] for n in task.relations}
    read = dict.fromkeys(task.relations, 0)
    for name in task.relations:
        b = ctx.base.get(name)
        if b is not None and b.changed:
            read[name] += b.plus_rows + b.minus_rows
            if b.plus_rows:
                signed[name].append(b.plus.withColumn("_s", F.lit(1)))
            if b.minus_rows:
                signed[name].append(b.minus.withColumn("_s", F.lit(-1)))
    for rule in task.rules:
        if not rule.body:
            continue
        for term in delta_terms(rule, lambda n: ctx.versions[n].changed):
            frames, sizes = {}, {}
            for j, n, new in term.others:
                v = ctx.versions[n]
                frames[j], sizes[j] = (v.new, v.new_rows) if new else (v.old, v.old_rows)
            ver, i = ctx.versions[term.atom.relation], term.pos
            for deleting, sign in SIGNS:
                df, rows = ver.delta(term.atom, term.negated, deleting)
                if not rows:
                    continue
                frames[i], sizes[i] = bcast_small(df, rows), rows
                for name, heads in heads_of(ctx, term.rule, task.relations, dict(frames), sizes,
                                          first=i):
                    signed[name].append(heads.withColumn("_s", F.lit(sign)))
                    read[name] += sum(sizes.values())
    return signed, read


def _fold(ctx: TaskContext, name: str, signed: list[DataFrame], small: bool) -> Change:
    """Return the Change of relation `name` once the signed tuples are added to its counts;
    `small`: their plans read few rows, so one partition sums them without a shuffle."""
    old_c = ctx.old_counts[name]
    old = ctx.versions[name]
    if not signed:
        return Change(old_c, rows=old.old_rows)
    cols = column_names(ctx.decls[name].arity)
    if small and old.old_rows <= ONE_PARTITION_ROWS:
        upd, rows = _update_small(union_all(signed), old_c, cols)
    else:
        upd, rows = _update(union_all(signed), old_c, cols, small)
    if upd is None:
        return Change(old_c, rows=old.old_rows)
    return counts_change(old_c, old, cols, upd, rows)


def _update_small(bag: DataFrame, old_c: DataFrame, cols: list[str]):
    """Return (the touched tuples with their old and new counts, observed sizes), or
    (None, _) if no count changed: one job, one partition, the old counts read whole."""
    import pyspark.sql.functions as F

    zero = F.lit(0).cast("long")
    signed = bag.select(*cols, F.col("_s").cast("long").alias("_s"), zero.alias("_old"))
    counts = old_c.select(*cols, zero.alias("_s"), F.col(COUNT).alias("_old"))
    summed = signed.unionByName(counts).coalesce(1).groupBy(*cols).agg(
        F.sum("_s").alias("_d"), F.sum("_old").alias("_old"))
    return _observed(summed.filter(F.col("_d") != 0).select(
        *cols, F.col("_old"), (F.col("_old") + F.col("_d")).alias("_new")))


def _update(bag: DataFrame, old_c: DataFrame, cols: list[str], small: bool):
    """Return _update_small's result for old counts too many to read whole: the summed change
    (one job), then the touched old counts joined to it (one job)."""
    import pyspark.sql.functions as F

    if small:  # a shuffle stage costs more than the rows it would spread (about 2x the job)
        bag = bag.coalesce(1)
    dc, rows = cut(bag.groupBy(*cols).agg(F.sum("_s").alias("_d")).filter(F.col("_d") != 0))
    if not rows:
        return None, {}
    return _touched(dc, rows, old_c, cols)


def _fold_summed(ctx: TaskContext, name: str, summed: pl.DataFrame) -> Change:
    """Return the Change of relation `name` from its count changes summed in the driver: none
    without a Spark job, else one job joining them to the old counts they touch."""
    from pyspark.sql.types import LongType, StructField, StructType

    old_c, old = ctx.old_counts[name], ctx.versions[name]
    if not summed.height:
        return Change(old_c, rows=old.old_rows)
    decl = ctx.decls[name]
    schema = StructType([*relation_schema(decl).fields, StructField("_d", LongType())])
    dc = frame_of_table(ctx.spark, arrow_of(summed), schema)
    cols = column_names(decl.arity)
    upd, sizes = _touched(dc, summed.height, old_c, cols)
    return counts_change(old_c, old, cols, upd, sizes)


def _touched(dc: DataFrame, rows: int, old_c: DataFrame, cols: list[str]):
    """Return _update_small's result from the summed count changes `dc` (c.., _d): the old
    counts they touch joined to them, in one job."""
    import pyspark.sql.functions as F

    keys = F.broadcast(dc.select(*cols)) if rows <= BROADCAST_ROWS else dc.select(*cols)
    before = F.coalesce(F.col(COUNT), F.lit(0))
    touched = bcast_small(old_c.join(keys, cols, "left_semi"), rows)
    return _observed(dc.join(touched, cols, "left").select(
        *cols, before.alias("_old"), (before + F.col("_d")).alias("_new")))


def _observed(upd: DataFrame):
    """Return (upd cut, its sizes: rows, plus (count became positive), minus), or (None, _)."""
    upd, seen = cut_observed(upd, exprs("count(1) AS `rows`",
                                        count_where(GAINED, "plus"),
                                        count_where(LOST, "minus")))
    sizes = {k: int(v or 0) for k, v in seen.items()}
    return (upd if sizes["rows"] else None), sizes


# As SQL text (one JVM call where Column pieces made one each): the condition of a touched
# tuple whose count became positive (a Δ+ tuple), and of one whose count fell to zero (Δ-).
GAINED = "_old <= 0 AND _new > 0"
LOST = "_old > 0 AND _new <= 0"


def counts_change(old_c, old, cols: list[str], upd: DataFrame, sizes: dict) -> Change:
    """Return the Change a cut update of counts (c.., _old, _new) makes."""
    import pyspark.sql.functions as F

    # Δ+ and Δ- are filters of the cut `upd`, their sizes observed while it was cut.
    plus, minus = upd.filter(GAINED).select(*cols), upd.filter(LOST).select(*cols)
    ukeys = upd.select(*cols)
    ukeys = F.broadcast(ukeys) if sizes["rows"] <= BROADCAST_ROWS else ukeys
    added = upd.filter("_new > 0").selectExpr(*map(quoted, cols), f"_new AS {quoted(COUNT)}")
    new_c = old_c.join(ukeys, cols, "left_anti").unionByName(added)
    # The segment: the touched tuples' old rows go, their new counts come (upd is cut).
    stored = (upd.filter("_old > 0").select(*cols), added)
    return Change(new_c, plus, sizes["plus"], minus, sizes["minus"],
                  old.old_rows + sizes["plus"] - sizes["minus"], dirty=True, stored=stored)


def counted_relations(program_tasks) -> set[str]:
    """Return the relations whose tasks the counting algorithm maintains."""
    out = set()
    for task in program_tasks.tasks:
        if countable(program_tasks.program, task):
            out.update(task.relations)
    return out
