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
a broadcast semi join that scans the relation instead of shuffling it.
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
from levelflow.engine.guard import Limit
from levelflow.engine.limitsize import limit_relations
from levelflow.engine.rules import reads_own
from levelflow.engine.spark_io import read_input
from levelflow.engine.types import column_names, empty_relation, rows_frame
from levelflow.tasks.ast import Atom, Program, Rule

if TYPE_CHECKING:
    import threading

    from pyspark.sql import DataFrame, SparkSession

    from levelflow.tasks.tasks import ProgramTasks, Task

# Merge the stable pieces of a relation once there are this many (bounds the union's width).
MERGE_PIECES = 8
# Below this many known tuples, new tuples come from one group-by instead of distinct + anti join.
SMALL_FULL_ROWS = 50_000
# From this many known tuples on, a round first counts its candidates: when they are few, a
# broadcast semi join finds the known ones without shuffling the whole relation. Measured on a
# layered TC (732k pairs, 30 rounds, same JVM, alternating): anti join only 64 s; this path with
# candidates broadcast up to 20k rows 62 s, up to 150k rows 33 s.
BIG_STABLE_ROWS = 50_000
# Candidate cells (rows x columns) broadcast in that path: 150k rows of a binary relation.
CANDIDATE_BROADCAST_CELLS = 300_000
# The column that holds a tuple's rank: the round it was found in (0 for facts and rules over
# lower relations). Every tuple of rank r > 0 has a derivation from tuples of rank < r.
RANK = "_it"


class Cancelled(Exception):
    """The evaluation was cancelled between iterations (the caller set the cancel event)."""


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


def cut(df: DataFrame, checkpoint: str = "local") -> tuple[DataFrame, int]:
    """Return df materialized with its plan cut (local or reliable checkpoint) and its row count.

    The count is observed while the checkpoint job runs, which saves a job per delta.
    """
    import pyspark.sql.functions as F

    df, seen = cut_observed(df, [F.count(F.lit(1)).alias("rows")], checkpoint)
    return df, int(seen["rows"])


def cut_observed(df: DataFrame, metrics: list, checkpoint: str = "local") -> tuple[DataFrame, dict]:
    """Return df materialized with its plan cut, and the aggregate `metrics` (named Columns)
    observed on the JVM side while the one checkpoint job ran."""
    from pyspark.sql import Observation

    seen = Observation()
    df = df.observe(seen, *metrics)
    df = df.checkpoint(eager=True) if checkpoint == "reliable" else df.localCheckpoint(eager=True)
    return _forget_stats(df), seen.get


def _forget_stats(df: DataFrame) -> DataFrame:
    """Return a checkpointed frame re-rooted on its RDD, without the cut plan's size estimate.

    A checkpoint keeps the optimizer's size estimate of the plan it cut, and an inner join's
    estimate is the product of its sides'. A delta derived by joining two recursive relations
    would inherit the product of their estimates, so the estimate's digits doubled every round;
    Spark computes on those BigInts and rounds grew ~2.5x slower each (mutual recursion,
    ~25 rounds). Re-rooted, the frame has Spark's default estimate; broadcasts come from the
    known row counts (compile.py hints) and AQE's runtime sizes. Left as is where the JVM
    call is unavailable (e.g. Spark Connect).
    """
    from pyspark.sql import DataFrame as _DataFrame

    try:
        jdf = df._jdf
        jspark = df.sparkSession._jsparkSession
        rdd = jdf.queryExecution().toRdd()
        return _DataFrame(jspark.internalCreateDataFrame(rdd, jdf.schema(), False),
                          df.sparkSession)
    except Exception:  # noqa: BLE001 - an optimization only: keep the checkpointed frame
        return df


def union_all(frames: list[DataFrame]) -> DataFrame:
    """Return the union (bag) of a non-empty list of frames with the same columns."""
    out = frames[0]
    for df in frames[1:]:
        out = out.union(df)
    return out


def merge_pieces(df: DataFrame) -> DataFrame:
    """Return a union of cut pieces copied into one cut piece of a few partitions.

    Many small pieces cost a task each in every later scan or join; one merged piece does not.
    """
    parts = max(int(df.sparkSession.conf.get("spark.sql.shuffle.partitions", "2")), 1)
    return cut(df.coalesce(parts))[0]


class FixpointRelation:
    """One relation of a recursive task: its stable pieces and its recent delta (both cut)."""

    __slots__ = ("name", "decl", "spark", "stable", "stable_rows", "recent", "recent_rows")

    def __init__(self, spark: SparkSession, decl, recent: DataFrame, rows: int) -> None:
        self.spark = spark
        self.name = decl.name
        self.decl = decl
        self.stable: list[DataFrame] = []
        self.stable_rows = 0
        self.recent, self.recent_rows = recent, rows

    def stable_df(self) -> DataFrame:
        """Return the tuples known before the last round."""
        return union_all(self.stable) if self.stable else empty_relation(self.spark, self.decl)

    def full_df(self) -> DataFrame:
        """Return every tuple found so far (stable + recent)."""
        return union_all(self.stable + [self.recent])

    def advance(self, new: DataFrame, rows: int) -> None:
        """Move recent into stable and make `new` the recent delta."""
        if self.recent_rows:
            self.stable.append(self.recent)
            self.stable_rows += self.recent_rows
        self.recent, self.recent_rows = new, rows
        if len(self.stable) >= MERGE_PIECES:
            self.stable = [merge_pieces(union_all(self.stable))]


class RankedRelation(FixpointRelation):
    """A fixpoint relation that remembers every non-empty delta it was given, with its round."""

    __slots__ = ("rounds", "next_round")

    def __init__(self, spark, decl, recent, rows) -> None:
        super().__init__(spark, decl, recent, rows)
        self.rounds = [(recent, rows, 0)] if rows else []
        self.next_round = 1

    def advance(self, new, rows) -> None:
        if rows:
            self.rounds.append((new, rows, self.next_round))
        self.next_round += 1
        super().advance(new, rows)

    def ranked(self, offset: int = 0) -> DataFrame:
        """Return every tuple found with a RANK column: offset + the round it was found in."""
        return ranked_union([(df, offset + r) for df, _, r in self.rounds], self.decl, self.spark)


def ranked_union(pieces: list[tuple[DataFrame, int]], decl, spark) -> DataFrame:
    """Return the union of (tuples, rank) pieces as one frame with a RANK column."""
    import pyspark.sql.functions as F

    if not pieces:
        return empty_relation(spark, decl).withColumn(RANK, F.lit(0).cast("bigint"))
    return union_all([df.withColumn(RANK, F.lit(r).cast("bigint")) for df, r in pieces])


def _new_tuples(candidates: DataFrame, rel: FixpointRelation) -> tuple[DataFrame, int]:
    """Return the candidates not yet in the relation (cut) and their count."""
    import pyspark.sql.functions as F

    cols = column_names(rel.decl.arity)
    full_rows = rel.stable_rows + rel.recent_rows
    if full_rows < SMALL_FULL_ROWS:
        # Tiny relations: one shuffle does both the distinct and the difference (group the
        # candidates with the known tuples, keep groups only candidates reached); saves a job
        # per round where job latency dominates. Bigger ones take the faster anti join.
        marked = candidates.select(*cols, F.lit(False).alias("_old")).union(
            rel.full_df().select(*cols, F.lit(True).alias("_old")))
        return cut(marked.groupBy(*cols).agg(F.max("_old").alias("_old"))
                    .filter(~F.col("_old")).drop("_old"))
    # new = candidates.distinct() left_anti (stable + recent)
    cand = candidates.distinct()
    if full_rows >= BIG_STABLE_ROWS:
        cand, rows = cut(cand)
        if rows * max(len(cols), 2) <= CANDIDATE_BROADCAST_CELLS:
            # Few candidates against a big relation: scan it once against the broadcast
            # candidates instead of shuffling all of it for the anti join.
            hits = rel.full_df().join(F.broadcast(cand), cols, "left_semi")
            return cut(cand.join(F.broadcast(hits), cols, "left_anti"))
    return cut(cand.join(rel.full_df(), cols, "left_anti"))


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
          counts: Mapping[str, int], recursive: list[bool]) -> dict[str, list[DataFrame]]:
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
            body, types = body_frame(spark, rule, decls, frames, sizes)
            for head in rule_heads(rule, names):
                base[head.relation].append(head_frame(body, types, head, decls[head.relation]))
    return base


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
    if checkpoint not in CHECKPOINTS:
        raise ValueError(f"checkpoint must be one of {CHECKPOINTS}, got {checkpoint!r}")
    if checkpoint == "reliable" and not spark.sparkContext.getCheckpointDir():
        raise ValueError("checkpoint='reliable' needs sparkContext.setCheckpointDir(...)")
    if cancel is not None and cancel.is_set():
        raise Cancelled(f"task {task.name} cancelled before it started")
    t0 = time.perf_counter()
    counts = dict(counts or {})
    decls = program.decls
    names = task.relations
    stats = EvalStats(task=task.name)
    recursive = [bool(r.body) and reads_own(r, names) for r in task.rules]
    recursive_rules = [r for r, rec in zip(task.rules, recursive, strict=True) if rec]
    base = _base(spark, program, task, relations, factdir, counts, recursive)
    first: dict[str, tuple[DataFrame, int]] = {}
    for name in names:
        parts = base[name] or [empty_relation(spark, decls[name])]
        mode = "local" if recursive_rules else checkpoint
        first[name] = cut(union_all(parts).distinct(), mode)
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
    stats.seconds = time.perf_counter() - t0
    out.stats = stats
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
                body, types = body_frame(spark, rule, decls, frames, sizes, first=pos)
                for head in rule_heads(rule, names):
                    to_add[head.relation].append(
                        head_frame(body, types, head, decls[head.relation]))
        found = {}
        for name in names:
            rel = rels[name]
            if to_add[name]:
                new, rows = _new_tuples(union_all(to_add[name]), rel)
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
