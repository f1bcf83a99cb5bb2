"""Rule bodies over relation versions on Spark: a rule's heads, program facts, and the elastic
switch's cancel check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.compile import body_frame, head_frame
from levelflow.engine.evaluate import Cancelled, cast_fact, fact_rows
from levelflow.engine.types import rows_frame
from levelflow.tasks.ast import Rule

if TYPE_CHECKING:
    import threading

    from pyspark.sql import DataFrame

    from levelflow.engine.incremental.versions import TaskContext
    from levelflow.tasks.tasks import Task

def heads_of(ctx: TaskContext, rule: Rule, names, frames, sizes, first=None, decls=None,
           small_seed: bool = False):
    """Return (relation, head tuples) for each head of `rule` in `names`, body over `frames`."""
    decls = decls or ctx.decls
    body, types = body_frame(ctx.spark, rule, decls, frames, sizes, first=first,
                             small_seed=small_seed)
    return [(h.relation, head_frame(body, types, h, decls[h.relation]))
            for h in rule.heads if h.relation in names]


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
