"""Choosing a task's plan: from its rules' shape (static) and its input size (at run time)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from levelflow.engine.memory import BYTES_PER_ROW
from levelflow.engine.plans.plan_error import PlanError
from levelflow.engine.rules import reads_own
from levelflow.tasks.ast import Atom, Decl, Var
from levelflow.tasks.tasks import Task

PLANS = ("auto", "driver", "local", "partitioned", "distributed", "global")
# Inputs (rows of lower relations and fact files) up to this many run in Spark tasks (local or
# partitioned): they are gathered into, or copied to, each Python worker.
LOCAL_ROWS = 2_000_000
# A recursive task that can be partitioned is, from this many input rows on; below it the one
# local Spark task is cheaper than the shuffle that copies the inputs to each share.
PARTITION_MIN_ROWS = 5_000
# Relation-position combinations tried when looking for a carried key (mutual recursion).
_MAX_KEY_CANDIDATES = 4096


@dataclass(frozen=True, slots=True)
class Plan:
    """A task's plan: its kind, why, and (partitioned) the carried position per relation."""

    kind: str
    reason: str
    key: dict[str, int] | None = None


def _recursive_rules(task: Task) -> list:
    """Return the task's rules whose bodies read one of its own relations."""
    return [r for r in task.rules if reads_own(r, task.relations)]


def _carries(rules, key: Mapping[str, int], names) -> bool:
    """Return whether every rule copies its recursive atom's key variable into each head's key."""
    for rule in rules:
        (atom,) = [lit for lit in rule.body if isinstance(lit, Atom) and lit.relation in names]
        var = atom.args[key[atom.relation]]
        if not isinstance(var, Var):
            return False
        for head in rule.heads:
            if head.relation not in key:  # derived by its own task
                continue
            arg = head.args[key[head.relation]]
            if not (isinstance(arg, Var) and arg.name == var.name):
                return False
    return True


def carried_key(task: Task, decls: Mapping[str, Decl]) -> tuple[dict[str, int] | None, str]:
    """Return (the carried position per relation, why) or (None, why the task has none)."""
    rules = _recursive_rules(task)
    if not rules:
        return None, "not recursive"
    names = task.relations
    for rule in rules:
        own = [lit for lit in rule.body if isinstance(lit, Atom) and lit.relation in names]
        if len(own) != 1:
            return None, f"non-linear rule at line {rule.loc.line}" if rule.loc else "non-linear"
    if any(decls[n].arity == 0 for n in names):
        return None, "a nullary relation has no key"
    choices = [range(decls[n].arity) for n in names]
    for combo in itertools.islice(itertools.product(*choices), _MAX_KEY_CANDIDATES):
        key = dict(zip(names, combo, strict=True))
        if _carries(rules, key, names):
            where = ", ".join(f"{n}[{p}]" for n, p in key.items())
            return key, f"linear, carries {where}"
    return None, "no argument is carried unchanged by every recursive rule"


def static_plan(task: Task, decls: Mapping[str, Decl]) -> Plan:
    """Return the plan the task's rules allow: auto's choice between its two size thresholds."""
    if not task.recursive:
        return Plan("global", "one pass")
    key, why = carried_key(task, decls)
    if key is not None and not all(key[n] in g for n in task.relations
                                   for g in decls[n].choice):
        # Shares may not choose apart unless every choice key holds the carried key.
        key, why = None, "a choice-domain key without the carried argument"
    if key is not None:
        return Plan("partitioned", why, key)
    return Plan("local", why)


def _bytes(text: str) -> int:
    """Return a JVM memory size ("2g", "512m", "1048576") in bytes."""
    text = text.strip().lower().removesuffix("b")
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    if text and text[-1] in scale:
        return int(float(text[:-1]) * scale[text[-1]])
    return int(text)


def python_memory(conf) -> int | None:
    """Return the bytes `spark.executor.pyspark.memory` gives each Python worker (None: unset)."""
    python = conf.get("spark.executor.pyspark.memory", None)
    return _bytes(python) if python else None


def worker_bytes(conf) -> int:
    """Return the memory one executor's Python worker has, from the Spark conf
    (`spark.executor.pyspark.memory`, else the executor's memory shared by its cores)."""
    def get(key: str, default: str) -> str:
        return conf.get(key, default) or default

    python = python_memory(conf)
    if python is not None:
        return python
    cores = max(int(get("spark.executor.cores", "1")), 1)
    return _bytes(get("spark.executor.memory", "1g")) // cores


def worker_rows(conf) -> int:
    """Return the input rows one executor's Python worker holds, from the Spark conf, at the
    Polars evaluator's BYTES_PER_ROW: on a cluster, auto distributes a recursive task past it."""
    return worker_bytes(conf) // BYTES_PER_ROW


def distributed_routing(task: Task, decls: Mapping[str, Decl]):
    """Return the task's routing under the distributed plan (routing.py), or raise PlanError."""
    from levelflow.engine.plans.routing import routing

    return routing(tuple(r for r in task.rules if r.body), task.relations, decls, task.name)


def check_plan(program_tasks, forced: str) -> None:
    """Return None if the forced plan applies to every task it must; else raise PlanError."""
    decls = program_tasks.program.decls
    for task in program_tasks.tasks:
        choose_plan(task, decls, 0, forced)


def choose_plan(task: Task, decls: Mapping[str, Decl], rows: int, forced: str = "auto",
                threshold: int = LOCAL_ROWS, driver_rows: int | None = None,
                spread_rows: int | None = None) -> Plan:
    """Return the task's plan for `rows` input rows; a forced plan that does not apply raises.

    `driver_rows`: auto runs the task in the driver up to this many input rows (None: never).
    `spread_rows` (a cluster's one worker's rows; None on a local master): auto runs a
    recursive task past them, or past `threshold`, under the distributed plan where it applies.
    """
    if forced not in PLANS:
        raise PlanError(f"plan: must be one of {', '.join(PLANS)}, got {forced!r}")
    if forced == "driver":
        return Plan("driver", "forced")
    if forced == "auto" and driver_rows is not None and rows <= driver_rows:
        return Plan("driver", f"{rows:,} input rows <= {driver_rows:,}")
    if task.subsumes:  # pruned each round, in one process (plans/subsume.py)
        return Plan("local", "subsumptive rules: pruned each round in one Spark task")
    if forced == "global":
        return Plan("global", "forced")
    if forced == "local":
        return Plan("local", "forced")
    shape = static_plan(task, decls)
    if not task.recursive:  # one pass is one job under any plan; the JVM runs it without Python
        return shape
    if forced == "partitioned":
        if shape.key is None:
            raise PlanError(f"task {task.name}: the partitioned plan does not apply "
                            f"({shape.reason})")
        return shape
    if forced == "distributed":
        distributed_routing(task, decls)  # PlanError where it does not apply
        return Plan("distributed", "forced")
    if spread_rows is not None and rows > min(threshold, spread_rows):
        why = f"{rows:,} input rows > {min(threshold, spread_rows):,} one worker holds"
        try:
            distributed_routing(task, decls)
        except PlanError as e:
            return Plan("global", f"{why}; {e}")
        return Plan("distributed", why)
    if rows > threshold:
        return Plan("global", f"{rows:,} input rows > {threshold:,}")
    if shape.key is not None and rows < PARTITION_MIN_ROWS:
        return Plan("local", f"{rows:,} input rows < {PARTITION_MIN_ROWS:,}")
    return shape
