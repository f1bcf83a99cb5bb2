"""Evaluating one task under its plan: global goes to evaluate.py, the others into Spark tasks."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from levelflow.engine.evaluate import (
    SUBSUMED,
    Cancelled,
    EvalStats,
    TaskResult,
    cast_fact,
    evaluate_task,
    fact_rows,
)
from levelflow.engine.fact_reader import kept_rows
from levelflow.engine.facts import input_path, io_delimiter, io_headers
from levelflow.engine.guard import Limit, check_products, check_ranges, task_limit, watched
from levelflow.engine.memory import estimated_lines
from levelflow.engine.plans.in_spark import run_counted, run_packed, unpack
from levelflow.engine.plans.layout import Layout
from levelflow.engine.plans.planner import Plan, distributed_routing
from levelflow.engine.spark_io import estimate_rows, read_input
from levelflow.tasks.ast import Program
from levelflow.tasks.subsume import SUB, pair_decl, subsumed
from levelflow.tasks.tasks import Task


def input_rows(program: Program, task: Task, counts: Mapping[str, int],
               factdir: str | Path | None) -> int:
    """Return the rows a task reads: lower relations' counts plus its fact files' tuples (their
    estimates from their sizes where they have not been read yet)."""
    rows = sum(counts.get(name, 0) for name in task.reads_from)
    for name in task.relations:
        io = program.inputs.get(name)
        known = estimate_rows(io, factdir) if io is not None else None
        if known is not None:
            rows += known
        elif io is not None and factdir is not None:
            path = input_path(io, factdir)
            held = kept_rows(path, program.decls[name], io_delimiter(io), io_headers(io))
            if held is not None:  # read by run's check: its tuples are known
                rows += held
            elif path.is_file():
                rows += estimated_lines(path)
    return rows


def _layout(program: Program, task: Task, sources, plan: Plan, parts: int,
            keep: tuple[str, str] | None = None, ranked: bool = True,
            limit: Limit | None = None) -> Layout:
    """Return what the workers need to run the task (rules, declarations, sources, key)."""
    decls = program.decls
    touched = set(task.relations) | set(task.reads_from)
    pruned = {subsumed(r) for r in task.subsumes}
    decls = {**decls, **{SUB + n: pair_decl(decls[n]) for n in pruned}}
    touched |= {SUB + subsumed(r) for r in task.subsumes}
    facts = {}
    for name in task.relations:
        rows = fact_rows(task.rules, name)
        if rows:
            facts[name] = [cast_fact(r, decls[name].types) for r in rows]
    spread = plan.kind == "distributed"
    return Layout(rules=tuple(r for r in task.rules if r.body), names=task.relations,
                  decls={n: decls[n] for n in touched}, sources=sources, facts=facts,
                  key=plan.key if plan.kind == "partitioned" else None,
                  parts=parts if plan.kind in ("partitioned", "distributed") else 1, keep=keep,
                  closure=task.closure, ranked=ranked, limit=limit,
                  subsumes=task.subsumes,
                  routing=distributed_routing(task, program.decls) if spread else None,
                  token=uuid.uuid4().hex if spread else "")


def evaluate_planned(spark, program: Program, task: Task, relations: Mapping,
                     factdir: str | Path | None = None, *, plan: Plan, counts=None,
                     ranked: bool = False, cancel=None, checkpoint: str = "local",
                     parts: int | None = None, keep: tuple[str, str] | None = None,
                     store: bool = True, max_tuples: int | None = None) -> TaskResult:
    """Return the task's relations (a TaskResult with `.stats`) evaluated under `plan`.

    `keep` (lineage, token): leave each share's result on its executor (plans/resident.py).
    `store=False`: nothing will read the tuples but maybe once; the one job returns their
    counts only, and reading a relation runs the task again (a plain lazy Spark plan).
    `max_tuples`: TupleLimit (engine/guard.py) before the task runs if one of its rules is a
    product of more, or once it holds more (its total, after each round where rounds are seen).
    """
    limit = task_limit(task, max_tuples)
    if limit is not None:
        check_products(program.file, task, counts or {}, max_tuples)
        check_ranges(task, max_tuples)
    if task.subsumes and plan.kind not in ("local", "driver"):  # pruned in one process
        plan = Plan("local", f"subsumptive rules ({plan.kind} asked)")
    if plan.kind == "global":
        out = evaluate_task(spark, program, task, relations, factdir, checkpoint=checkpoint,
                            cancel=cancel, counts=counts, ranked=ranked, limit=limit)
        return _checked(out, limit, program.file)
    if cancel is not None and cancel.is_set():
        raise Cancelled(f"task {task.name} cancelled before it started")
    t0 = time.perf_counter()
    if plan.kind == "driver":
        # Spark cancels its own tasks; rounds in the driver stop at the next round's check.
        limit = watched(limit, task.name, cancel)
        return _checked(_in_driver(spark, program, task, relations, factdir, plan, ranked,
                                   limit, t0, keep), limit, program.file)
    # Per source: (relation, whether it is that relation's fact file), and its frame.
    specs = [(name, False) for name in task.reads_from]
    frames = [relations[name] for name in task.reads_from]
    for name in task.relations:
        io = program.inputs.get(name)
        if io is not None and factdir is not None:
            specs.append((name, True))
            frames.append(read_input(spark, program.decls[name], io, factdir))
    # At least two shares, so that a one-core session still splits (and tests the split);
    # a barrier stage's tasks all run at once: as many as the slots.
    parts = parts or (task_slots(spark) if plan.kind == "distributed"
                      else max(spark.sparkContext.defaultParallelism, 2))
    layout = _layout(program, task, tuple(specs), plan, parts, keep, ranked, limit)
    if store:
        packed, rows, rounds = run_packed(spark, layout, frames, checkpoint)
    else:
        packed, rows, rounds = run_counted(spark, layout, frames)
    out = TaskResult(unpack(packed, layout, ranked))
    out.stats = EvalStats(task=task.name, iterations=rounds, rows=rows,
                          seconds=time.perf_counter() - t0, plan=plan.kind)
    return _checked(out, limit, program.file)


def task_slots(spark) -> int:
    """Return how many tasks the session's executors run at once (a standalone cluster's
    default parallelism is at least 2, which a one-core cluster's barrier stage would wait for
    in vain)."""
    sc = spark.sparkContext
    try:
        jsc = sc._jsc.sc()
        return max(int(jsc.maxNumConcurrentTasks(
            jsc.resourceProfileManager().defaultResourceProfile())), 1)
    except Exception:  # noqa: BLE001 - no JVM gateway (Spark Connect)
        return max(sc.defaultParallelism, 1)


def _in_driver(spark, program: Program, task: Task, relations: Mapping, factdir, plan: Plan,
               ranked: bool, limit: Limit | None, t0: float, keep=None) -> TaskResult:
    """Return the task evaluated in the driver (plans/driver.py): Polars frames, no job."""
    from levelflow.engine.plans.driver import driver_facts, evaluate_in_driver, polars_input

    lower = {n: polars_input(relations[n], program.decls[n]) for n in task.reads_from}
    facts = driver_facts(spark, program, task, factdir)
    layout = _layout(program, task, (), plan, 1, keep, ranked=ranked, limit=limit)
    frames, rounds = evaluate_in_driver(layout, lower, facts)
    out = TaskResult(frames)
    out.stats = EvalStats(task=task.name, iterations=rounds,
                          rows={n: df.height for n, df in frames.items()},
                          seconds=time.perf_counter() - t0, plan=plan.kind)
    return out


def _checked(out: TaskResult, limit: Limit | None, file: str) -> TaskResult:
    """Return the result once its total is within the limit (shares were checked one by one;
    a one-pass task's single job is seen only now)."""
    if limit is not None:
        limit.check(sum(out.stats.rows.values()), f"{file}: ")
    return out


def _run_subsumed(spark, program: Program, task: Task, relations: Mapping, factdir, **options
                  ) -> TaskResult:
    """Return a task with subsumptive rules evaluated under the local plan."""
    return evaluate_planned(spark, program, task, relations, factdir,
                            plan=Plan("local", "subsumptive rules"), **options)


SUBSUMED.append(_run_subsumed)
