"""A task recomputed from scratch (bootstrap, unsupported shapes, the elastic switch's fallback)
and diffed against its old version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from levelflow.engine.evaluate import cut_observed
from levelflow.engine.incremental.versions import TaskContext
from levelflow.engine.plans import evaluate_planned
from levelflow.engine.plans.layout import BASE_FACTS as BASE
from levelflow.engine.plans.room import fitting_plan
from levelflow.engine.sql_text import count_where, exprs, quoted
from levelflow.tasks.ast import Atom, Decl, Rule, Var

if TYPE_CHECKING:

    from pyspark.sql import DataFrame

    from levelflow.tasks.tasks import Task



def scratch_sets(ctx: TaskContext, task: Task, cancel=None, held=None,
                 max_tuples: int | None = None) -> tuple[dict, int]:
    """Return each relation's new tuples (with RANK) evaluated from scratch, and the rounds.

    With `held` (plan, arranged.Held) the task runs under that plan and leaves its state on
    the executors where its next epochs find it. Past `max_tuples`, TupleLimit.
    """
    program, run_task, relations, counts = with_base_facts(ctx, task)
    keep = {}
    if held is not None:
        plan, where = held
        keep = {"parts": where.parts, "keep": (where.lineage, where.token)}
    else:  # as `run` runs it: under the plan its shape and the rows it reads give
        plan = fitting_plan(ctx.spark, ctx.program.file, run_task, program.decls,
                            sum(counts[n] for n in run_task.reads_from),
                            driver_rows=ctx.driver_rows)
    result = evaluate_planned(ctx.spark, program, run_task, relations, None, plan=plan,
                              cancel=cancel, counts=counts, ranked=True, max_tuples=max_tuples,
                              **keep)
    stats = result.stats
    # The driver plan's Polars frames are kept in the driver beside their DataFrames.
    frames = {n: ranked_held(ctx, n, result[n]) if plan.kind == "driver" else result[n]
              for n in task.relations}
    return {n: (frames[n], stats.rows[n]) for n in task.relations}, stats.iterations


def with_base_facts(ctx: TaskContext, task: Task) -> tuple:
    """Return (program, task, lower relations' new versions, their rows) of the task run from
    scratch: each own relation's base facts read as a stand-in lower relation `@base:r` with
    the rule `r(..) :- @base:r(..)`."""
    import dataclasses

    decls = dict(ctx.decls)
    extra_rules = []
    relations = {n: v.new for n, v in ctx.versions.items() if n not in task.relations}
    counts = {n: v.new_rows for n, v in ctx.versions.items() if n not in task.relations}
    for n in task.relations:
        b = ctx.base.get(n)
        if b is None:
            continue
        decl = decls[n]
        decls[BASE + n] = Decl(BASE + n, decl.attrs, decl.types)
        args = tuple(Var(f"a{i}") for i in range(decl.arity))
        extra_rules.append(Rule((Atom(n, args),), (Atom(BASE + n, args),)))
        relations[BASE + n], counts[BASE + n] = b.new, b.new_rows
    program, run_task = ctx.program, task
    if extra_rules:
        program = dataclasses.replace(ctx.program, decls=decls, inputs={})
        run_task = dataclasses.replace(task, rules=task.rules + tuple(extra_rules),
                                       reads=task.reads | {BASE + n for n in task.relations
                                                           if n in ctx.base})
    return program, run_task, relations, counts


def ranked_held(ctx: TaskContext, name: str, frame: pl.DataFrame):
    """Return a relation's ranked tuples (c0.., _it) the driver holds as a frame over them."""
    from pyspark.sql.types import LongType, StructField, StructType

    from levelflow.engine.evaluate import RANK
    from levelflow.engine.incremental.backends.driver_rows import arrow_of, frame_of_table
    from levelflow.engine.types import relation_schema

    schema = StructType([*relation_schema(ctx.decls[name]).fields, StructField(RANK, LongType())])
    return frame_of_table(ctx.spark, arrow_of(frame), schema)


def diff(old: DataFrame, old_rows: int, new: DataFrame, new_rows: int, cols) -> tuple:
    """Return (Δ+, Δ+ rows, Δ-, Δ- rows) between two versions of a relation (in the driver
    where it holds both)."""
    if not old_rows:
        plus, plus_rows = (new, new_rows) if new_rows else (None, 0)
        return plus, plus_rows, None, 0
    if not new_rows:
        return None, 0, old, old_rows
    held = _held_diff(old, new, cols)
    if held is not None:
        return held
    # One shuffle of both versions instead of one anti join each way: per tuple, which
    # versions hold it (1 old, 2 new); the tuples in only one of them are the change.
    # (SQL text throughout: one JVM call per expression, not one per piece.)
    keys = [quoted(c) for c in cols]
    tagged = old.selectExpr(*keys, "1 AS _in").union(new.selectExpr(*keys, "2 AS _in"))
    # One job: each side's rows are counted while the change is cut; a side is then a filter
    # over that cut (a cut per side cost two more jobs, 0.5 s and more each under load).
    changed, seen = cut_observed(
        tagged.groupBy(*cols).agg(*exprs("sum(_in) AS _in")).filter("_in != 3"),
        exprs(*[count_where(f"_in = {side}", f"in{side}")
                for side in (1, 2)]))
    plus_rows, minus_rows = int(seen["in2"] or 0), int(seen["in1"] or 0)
    plus = changed.filter("_in = 2").select(*cols) if plus_rows else None
    minus = changed.filter("_in = 1").select(*cols) if minus_rows else None
    return plus, plus_rows, minus, minus_rows


def _held_diff(old, new, cols) -> tuple | None:
    """Return diff's answer computed in the driver when it holds both versions, else None."""
    from levelflow.engine.incremental.backends.driver_rows import arrow_of, rows_like, rows_of

    made = [rows_of(df) for df in (old, new)]
    if any(t is None for t in made):
        return None
    old_t, new_t = (pl.from_arrow(t).select(cols) for t in made)
    plus = new_t.join(old_t, on=cols, how="anti", nulls_equal=True)
    minus = old_t.join(new_t, on=cols, how="anti", nulls_equal=True)
    plus_df = rows_like(new, arrow_of(plus)) if plus.height else None
    minus_df = rows_like(old, arrow_of(minus)) if minus.height else None
    if (plus.height and plus_df is None) or (minus.height and minus_df is None):
        return None
    return plus_df, plus.height, minus_df, minus.height
