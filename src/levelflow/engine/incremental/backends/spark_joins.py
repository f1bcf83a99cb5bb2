"""Rule bodies over relation versions: joins that keep a small side broadcast, a rule's heads,
program facts, and the elastic switch's cancel check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.compile import BROADCAST_ROWS, body_frame, head_frame
from levelflow.engine.evaluate import (
    Cancelled,
    cast_fact,
    cut,
    fact_rows,
)
from levelflow.engine.types import rows_frame
from levelflow.tasks.ast import Rule

if TYPE_CHECKING:
    import threading

    from pyspark.sql import DataFrame

    from levelflow.engine.incremental.versions import TaskContext
    from levelflow.tasks.tasks import Task

def bcast_small(df: DataFrame, rows: int) -> DataFrame:
    """Return df with a broadcast hint when it is small enough to ship to every task.

    On a delta atom the hint survives the atom's filter/select, so the join with a big
    relation ships the delta instead of shuffling the big side.
    """
    import pyspark.sql.functions as F

    return F.broadcast(df) if rows <= BROADCAST_ROWS else df


def semi_join_small(cand: DataFrame, other: DataFrame, other_rows: int, cols) -> DataFrame:
    """Return the (distinct) candidates that are in `other`, without shuffling a big `other`."""
    import pyspark.sql.functions as F

    if other_rows <= BROADCAST_ROWS:
        return cand.join(F.broadcast(other), cols, "left_semi")
    cand, rows = cut(cand)
    if rows <= BROADCAST_ROWS:  # scan the big side once against the few candidates
        return other.join(F.broadcast(cand), cols, "left_semi")
    return cand.join(other, cols, "left_semi")


def anti_join_small(cand: DataFrame, other: DataFrame, other_rows: int, cols) -> DataFrame:
    """Return the (distinct) candidates not in `other`, without shuffling a big `other`."""
    import pyspark.sql.functions as F

    if other_rows <= BROADCAST_ROWS:
        return cand.join(F.broadcast(other), cols, "left_anti")
    cand, rows = cut(cand)
    if rows <= BROADCAST_ROWS:
        hits = other.join(F.broadcast(cand), cols, "left_semi")
        return cand.join(F.broadcast(hits), cols, "left_anti")
    return cand.join(other, cols, "left_anti")


def heads_of(ctx: TaskContext, rule: Rule, names, frames, sizes, first=None, decls=None,
           small_seed: bool = False):
    """Return (relation, head tuples) for each head of `rule` in `names`, body over `frames`."""
    decls = decls or ctx.decls
    body, types = body_frame(ctx.spark, rule, decls, frames, sizes, first=first,
                             small_seed=small_seed)
    return [(h.relation, head_frame(body, types, h, decls[h.relation]))
            for h in rule.heads if h.relation in names]


def as_positive(rule: Rule, i: int) -> Rule:
    """Return the rule with the negated atom at position i made positive."""
    body = list(rule.body)
    body[i] = body[i].atom
    return Rule(rule.heads, tuple(body), rule.loc)


def program_facts(ctx: TaskContext, task: Task, name: str) -> DataFrame | None:
    """Return the distinct program facts of relation `name`, or None if it has none."""
    facts = fact_rows(task.rules, name)
    if not facts:
        return None
    decl = ctx.decls[name]
    return rows_frame(ctx.spark, decl, sorted({cast_fact(f, decl.types) for f in facts}))


def check_cancel(cancel: threading.Event | None) -> None:
    """Raise Cancelled if the elastic switch fired."""
    if cancel is not None and cancel.is_set():
        raise Cancelled("update stopped by the elastic switch")
