"""Evaluating one task (an SCC of relations) as Spark jobs; a serial from-scratch reference.

A non-recursive task is one pass: fact file + program facts + each rule's joins, unioned.
A recursive task runs semi-naive evaluation in datafrog's plain form. Per relation:
  stable  - tuples already used by every rule (a few checkpointed pieces, merged now and then),
  recent  - tuples found in the last round (one checkpointed delta),
  to_add  - the candidates this round derives, minus stable and recent.
The loop is "while something changed": each rule runs once per recursive body atom, with that
atom reading `recent`, the atoms before it `stable` and the atoms after it stable + recent, so
each derivation that uses a new tuple is found exactly once.
Every delta is cut with localCheckpoint(eager=True) so the plan never grows with the iterations;
its row count is observed during that same job. to_add = candidates minus known tuples takes
one of three forms by size: a single group-by shuffle for tiny relations (job latency
dominates), distinct + left anti join, or, when the candidates are few against a big relation,
a broadcast semi join that scans the relation instead of shuffling it (fixpoint_relations.py;
cutting frames is cut.py's; the names callers import from here are imported here too).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from levelflow.engine.checks import CHECKPOINTS
from levelflow.engine.choose import choose_spark
from levelflow.engine.compile import (
    body_frame,
    ground_value,
    head_frame,
    rule_heads,
)
from levelflow.engine.cut import MERGE_PIECES as MERGE_PIECES
from levelflow.engine.cut import cut, merge_pieces, union_all
from levelflow.engine.cut import cut_observed as cut_observed
from levelflow.engine.fixpoint_relations import RANK as RANK
from levelflow.engine.fixpoint_relations import (
    FixpointRelation,
    RankedRelation,
    new_tuples,
    ranked_union,
)
from levelflow.engine.guard import Cancelled, Limit
from levelflow.engine.limitsize import limit_relations
from levelflow.engine.rules import reads_own
from levelflow.engine.spark_io import read_input
from levelflow.engine.spark_ship import needs_distinct
from levelflow.engine.types import empty_relation, rows_frame
from levelflow.tasks.ast import Atom, Program, Rule

if TYPE_CHECKING:
    import threading

    from pyspark.sql import DataFrame, SparkSession

    from levelflow.tasks.tasks import ProgramTasks, Task

@dataclass
class EvalStats:
    """What evaluating a task produced: rounds, tuples per relation, new tuples per round."""

    task: str
    iterations: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    per_iteration: list[dict[str, int]] = field(default_factory=list)
    iteration_seconds: list[float] = field(default_factory=list)
    seconds: float = 0.0
    plan: str = "global"


class TaskResult(dict):
    """The relations of a task (name -> materialized DataFrame), with `stats` attached."""

    stats: EvalStats


def fact_rows(rules, relation: str) -> list[tuple]:
    """Return the tuples the program's ground facts give `relation`."""
    rows = []
    for rule in rules:
        if rule.body:
            continue
        for head in rule.heads:
            if head.relation == relation:
                rows.append(tuple(ground_value(arg) for arg in head.args))
    return rows


def cast_fact(row: tuple, types: tuple[str, ...]) -> tuple:
    """Return a fact tuple with each value converted to its attribute's Python type.

    A nullary fact is `(True,)`: the one row of a relation's Boolean `c0` (engine/types.py),
    so that every backend builds its frame from the rows as they are.
    """
    if not types:
        return (True,)
    conv = {"number": int, "unsigned": int, "float": float, "symbol": str}
    return tuple(conv[t](v) for v, t in zip(row, types, strict=True))


def _frames(rule: Rule, relations: Mapping[str, DataFrame], own: Mapping[str, DataFrame],
            counts: Mapping[str, int]) -> tuple[dict[int, DataFrame], dict[int, int]]:
    """Return the DataFrame and known row count each body atom reads, lower relations only."""
    frames, sizes = {}, {}
    for i, atom, _ in rule.body_atoms():
        name = atom.relation
        if name in own:
            frames[i] = own[name]
        elif name in relations:
            frames[i] = relations[name]
        else:
            raise KeyError(f"relation {name} (read by a rule of {rule.heads[0].relation}) is "
                           f"missing from the computed relations")
        if name in counts:
            sizes[i] = counts[name]
    return frames, sizes


def _base(spark, program: Program, task: Task, relations: Mapping[str, DataFrame], factdir,
          counts: Mapping[str, int], recursive: list[bool], limit: Limit | None = None
          ) -> dict[str, list[DataFrame]]:
    """Return per relation of the task everything not recursive: its fact file, its facts in
    the program, what its rules over lower relations derive."""
    decls, names = program.decls, task.relations
    base: dict[str, list[DataFrame]] = {n: [] for n in names}
    for name in names:
        decl = decls[name]
        io = program.inputs.get(name)
        if io is not None and factdir is not None:
            base[name].append(read_input(spark, decl, io, factdir))
        facts = fact_rows(task.rules, name)
        if facts:
            base[name].append(rows_frame(spark, decl, [cast_fact(f, decl.types) for f in facts]))
    for rule, rec in zip(task.rules, recursive, strict=True):
        if rule.body and not rec:
            frames, sizes = _frames(rule, relations, {}, counts)
            body, types = body_frame(spark, rule, decls, frames, sizes, limit=limit)
            for head in rule_heads(rule, names):
                base[head.relation].append(head_frame(body, types, head, decls[head.relation]))
    return base


# How a task with subsumptive rules runs: plans/run.py puts its local plan here (it imports
# this module, so this module cannot import it).
SUBSUMED: list = []


def evaluate_task(spark: SparkSession, program: Program, task: Task,
                  relations: Mapping[str, DataFrame], factdir: str | Path | None = None, *,
                  checkpoint: str = "local", cancel: threading.Event | None = None,
                  counts: Mapping[str, int] | None = None, ranked: bool = False,
                  limit: Limit | None = None) -> TaskResult:
    """Return the task's relations as materialized DataFrames (a TaskResult with `.stats`).

    `relations` holds the relations of lower tasks; `counts` their row counts where known
    (used for join order and broadcasts). With `factdir` None, `.input` files are not read.
    With `ranked`, each relation carries a RANK column (one cut piece; incremental DRed).
    With `limit`, a recursive task stops (TupleLimit) after the round that passes it.
    """
    # Not at the top: driver_rows imports the plans package, which imports this module.
    from levelflow.engine.incremental.backends.driver_rows import driver_table

    if checkpoint not in CHECKPOINTS:
        raise ValueError(f"checkpoint must be one of {CHECKPOINTS}, got {checkpoint!r}")
    if checkpoint == "reliable" and not spark.sparkContext.getCheckpointDir():
        raise ValueError("checkpoint='reliable' needs sparkContext.setCheckpointDir(...)")
    if task.subsumes:  # pruned each round, in one Spark task (plans/subsume.py)
        if not SUBSUMED:
            raise RuntimeError("a task with subsumptive rules needs levelflow.engine.plans "
                               "imported")
        return SUBSUMED[0](spark, program, task, relations, factdir, cancel=cancel,
                           counts=counts, ranked=ranked, checkpoint=checkpoint)
    if cancel is not None and cancel.is_set():
        raise Cancelled(f"task {task.name} cancelled before it started")
    t0 = time.perf_counter()
    counts = dict(counts or {})
    decls = program.decls
    names = task.relations
    stats = EvalStats(task=task.name)
    recursive = [bool(r.body) and reads_own(r, names) for r in task.rules]
    recursive_rules = [r for r, rec in zip(task.rules, recursive, strict=True) if rec]
    base = _base(spark, program, task, relations, factdir, counts, recursive, limit)
    first: dict[str, tuple[DataFrame, int]] = {}
    for name in names:
        parts = base[name] or [empty_relation(spark, decls[name])]
        mode = "local" if recursive_rules else checkpoint
        table = driver_table(parts[0]) if len(parts) == 1 and mode == "local" else None
        if table is not None:  # a fact file's rows: the frame is cut when it is built
            first[name] = (parts[0].force() if recursive_rules else parts[0]), table.num_rows
        else:
            union = union_all(parts)  # a fact file's rows alone come distinct already
            first[name] = cut(union.distinct() if needs_distinct(parts) else union, mode)
        if decls[name].choice:  # choice-domain's round 0 (engine/choose.py)
            first[name] = choose_spark(spark, decls[name], first[name][0])
    stats.per_iteration.append({n: first[n][1] for n in names})
    stats.iteration_seconds.append(time.perf_counter() - t0)
    if not recursive_rules:
        out = TaskResult((n, ranked_union([(first[n][0], 0)], decls[n], spark) if ranked
                          else first[n][0]) for n in names)
        stats.rows = {n: first[n][1] for n in names}
        stats.seconds = time.perf_counter() - t0
        out.stats = stats
        return out
    kind = RankedRelation if ranked else FixpointRelation
    rels = {n: kind(spark, decls[n], *first[n]) for n in names}
    run_fixpoint(spark, program, Fixpoint(recursive_rules, rels, relations, counts, stats, cancel,
                                          limit))
    out = _fixpoint_result(rels, stats, ranked, checkpoint)
    stats.seconds = time.perf_counter() - t0
    out.stats = stats
    return out


def _fixpoint_result(rels: Mapping[str, FixpointRelation], stats: EvalStats, ranked: bool,
                     checkpoint: str) -> TaskResult:
    """Return each relation of a finished fixpoint as one frame; count its rows in `stats`."""
    out = TaskResult()
    for name, rel in rels.items():
        pieces = rel.stable + ([rel.recent] if rel.recent_rows else [])
        if ranked:
            out[name] = merge_pieces(rel.ranked())
        elif checkpoint == "local":
            # Every piece is already cut, so their union is too: no copy needed.
            out[name] = union_all(pieces) if pieces else rel.recent
        else:
            out[name] = cut(union_all(pieces) if pieces else rel.recent, checkpoint)[0]
        stats.rows[name] = rel.stable_rows + rel.recent_rows
    return out


@dataclass(slots=True)
class Fixpoint:
    """What semi-naive rounds run over: a task's recursive rules, their inputs, its relations."""

    rules: list[Rule]  # the task's recursive rules
    rels: dict[str, FixpointRelation]  # the task's relations (stable, recent), advanced in place
    lower: Mapping[str, DataFrame]  # relations of lower tasks the rules read
    counts: Mapping[str, int]  # their row counts where known (join order, broadcasts)
    stats: EvalStats  # rounds and rows per round are added here
    cancel: threading.Event | None = None  # checked before each round
    limit: Limit | None = None  # the task's tuples, checked before each round


def run_fixpoint(spark, program: Program, fp: Fixpoint) -> None:
    """Run semi-naive rounds over `fp.rels` until no relation gains a tuple."""
    decls = program.decls
    rels, stats, cancel, rules = fp.rels, fp.stats, fp.cancel, fp.rules
    names = tuple(rels)
    while any(rel.recent_rows for rel in rels.values()):
        t0 = time.perf_counter()
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"task {stats.task} cancelled after {stats.iterations} rounds")
        if fp.limit is not None:
            fp.limit.check(sum(r.stable_rows + r.recent_rows for r in rels.values()),
                           f"{program.file}: ")
        stats.iterations += 1
        to_add: dict[str, list[DataFrame]] = {n: [] for n in names}
        for rule in rules:
            own = [i for i, lit in enumerate(rule.body)
                   if isinstance(lit, Atom) and lit.relation in names]
            frames, sizes = _frames(rule, fp.lower, {n: rels[n].recent for n in names},
                                    fp.counts)
            for k, pos in enumerate(own):
                delta = rels[rule.body[pos].relation]
                if not delta.recent_rows:
                    continue
                # The variant of the rule where atom `pos` reads the recent delta: atoms
                # before it read stable, atoms after it stable + recent. For
                #   path(x, z) :- path(x, y), path(y, z).
                # that is Δpath ⋈ (path ∪ Δpath), then path ⋈ Δpath.
                for j in own:
                    rel = rels[rule.body[j].relation]
                    if j == pos:
                        frames[j], sizes[j] = rel.recent, rel.recent_rows
                    elif j in own[:k]:
                        frames[j], sizes[j] = rel.stable_df(), rel.stable_rows
                    else:
                        frames[j] = rel.full_df()
                        sizes[j] = rel.stable_rows + rel.recent_rows
                body, types = body_frame(spark, rule, decls, frames, sizes, first=pos,
                                         limit=fp.limit)
                for head in rule_heads(rule, names):
                    to_add[head.relation].append(
                        head_frame(body, types, head, decls[head.relation]))
        found = {}
        for name in names:
            rel = rels[name]
            if to_add[name]:
                new, rows = new_tuples(union_all(to_add[name]), rel)
                if rows and rel.decl.choice:
                    new, rows = choose_spark(spark, rel.decl, new, rel.full_df())
            else:
                new, rows = empty_relation(spark, rel.decl), 0
            rel.advance(new, rows)
            found[name] = rows
        stats.per_iteration.append(found)
        stats.iteration_seconds.append(time.perf_counter() - t0)


def evaluate_program(spark: SparkSession, program_tasks: ProgramTasks,
                     factdir: str | Path | None) -> dict[str, DataFrame]:
    """Return every relation of the program, evaluated from scratch task by task in id order."""
    relations: dict[str, DataFrame] = {}
    counts: dict[str, int] = {}
    for task in program_tasks.tasks:
        result = evaluate_task(spark, program_tasks.program, task, relations, factdir,
                               counts=counts)
        relations.update(result)
        counts.update(result.stats.rows)
        limit_relations(program_tasks.program, task.relations, relations, counts)
    return relations
