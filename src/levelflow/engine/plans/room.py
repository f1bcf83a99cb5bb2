"""Whether a task's inputs fit the memory of the plan that holds them: auto takes a plan they
fit, and a plan they cannot fit is refused in one line before the task's job (MemoryLimit).

The estimate is a lower bound (LEAST_BYTES_PER_ROW an input row): what the rules derive may
need more, which cannot be known before they run, so only a task that cannot fit is refused.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping

from levelflow.engine.memory import LEAST_BYTES_PER_ROW, available_memory
from levelflow.engine.plans.planner import Plan, choose_plan, python_memory, worker_bytes
from levelflow.errors import LevelflowError
from levelflow.tasks.ast import Decl
from levelflow.tasks.tasks import Task

# Per SparkContext: one Python worker's memory by its conf, fixed for the context's life.
_WORKER_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class MemoryLimit(LevelflowError):
    """A task's inputs need more memory than its plan has; str() is one line naming the task."""


def needed(rows: int) -> int:
    """Return the bytes a plan that holds `rows` input rows in memory needs at the least."""
    return rows * LEAST_BYTES_PER_ROW


def size(n: int) -> str:
    """Return bytes as '41.0 GiB'."""
    value, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def room(spark, kind: str) -> tuple[int, str] | None:
    """Return (bytes, who has them: a phrase around '{}') the plan `kind` holds a task's
    inputs in on `spark`; None under the global plan (Spark SQL jobs, which spill to disk)."""
    if kind == "global":
        return None
    if kind == "driver":  # Polars in the driver's own process: no Spark asked
        return available_memory(), "the driver has {} available"
    one = _worker_memory(spark)
    if kind != "distributed":  # local, partitioned (each share gets every input)
        return (one, "one Python worker has {}") if one is not None else \
            (available_memory(), "the Python worker has {} available")
    from levelflow.engine.plans.run import task_slots

    slots = task_slots(spark)
    if one is None:
        return available_memory(), f"its {slots} Python workers have {{}} available together"
    return slots * one, f"its {slots} Python workers have {{}} together"


def _worker_memory(spark) -> int | None:
    """Return the bytes one Python worker has by the session's conf (None: its machine's
    memory), read once per SparkContext (reading the conf costs py4j calls: 150 ms measured)."""
    from levelflow.engine.session import on_local_master

    context = spark.sparkContext
    try:
        return _WORKER_MEMORY[context]
    except (KeyError, TypeError):
        pass
    conf = context.getConf()
    # On a local master the Python workers are processes of the driver's machine: theirs is
    # its memory, unless Spark limits each one.
    one = python_memory(conf) if on_local_master(spark) else worker_bytes(conf)
    try:
        _WORKER_MEMORY[context] = one
    except TypeError:  # not weakly referable: read each time
        pass
    return one


def _fits(spark, kind: str, need: int) -> tuple[bool, str]:
    """Return (whether `need` bytes fit the plan `kind`, what it has as a phrase)."""
    has = room(spark, kind)
    if has is None:
        return True, ""
    return need <= has[0], has[1].format(size(has[0]))


def refusal(where: str, task: Task, rows: int, kind: str, has: str) -> MemoryLimit:
    """Return the one line refusing task under plan `kind`."""
    hint = " (a task with subsumptive rules runs in one process)" if task.subsumes else \
        " (--plan global spills to disk)"
    return MemoryLimit(f"{where}: task {task.name}: needs about {size(needed(rows))} for "
                       f"{rows:,} input rows under the {kind} plan; {has}{hint}")


def fitting_plan(spark, where: str, task: Task, decls: Mapping[str, Decl], rows: int,
                 forced: str = "auto", **choice) -> Plan:
    """Return choose_plan's plan (`choice`: its keywords) where the task's `rows` input rows
    fit its memory; else, under auto, a plan they fit (not the driver; global, which spills,
    where the task's rules allow it); else raise MemoryLimit naming `where` and the task."""
    plan = choose_plan(task, decls, rows, forced, **choice)
    need = needed(rows)
    fits, has = _fits(spark, plan.kind, need)
    if fits:
        return plan
    if forced == "auto":
        others = []
        if plan.kind == "driver":
            others.append(choose_plan(task, decls, rows, **{**choice, "driver_rows": None}))
        if not task.subsumes:  # pruned each round in one process (plans/subsume.py)
            others.append(Plan("global", "spills to disk"))
        for other in others:
            if _fits(spark, other.kind, need)[0]:
                return Plan(other.kind, f"{other.reason}; {size(need)} at the least for "
                                        f"{rows:,} input rows, the {plan.kind} plan has less",
                            other.key)
    raise refusal(where, task, rows, plan.kind, has)


def check_room(spark, where: str, task: Task, rows: int, kind: str) -> None:
    """Return None if the task's `rows` input rows fit the plan `kind`; else raise
    MemoryLimit."""
    fits, has = _fits(spark, kind, needed(rows))
    if not fits:
        raise refusal(where, task, rows, kind, has)
