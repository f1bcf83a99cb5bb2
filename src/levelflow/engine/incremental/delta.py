"""Updating one task from its inputs' changes: counting, or from scratch (DRed: dred.py).

Constant during a task's update: `Versions` of every relation it reads (old, new, Δ+, Δ-, all
cut) and of its own relations (old only). Produced: each own relation's new version and Δ±.

Counting (non-recursive tasks). A tuple's count is its number of derivations: one per base fact,
per program fact, and per row a rule body yields. For a rule R :- A1, ..., An the change is the
telescoping sum over changed atoms k of  new(A1..Ak-1) × Δ(Ak) × old(Ak+1..An);  a negated atom
!A contributes -Δ of A's projection on its non-wildcard positions (an insertion deletes).
Tuples whose count crosses zero are the net Δ±.

"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from levelflow.engine.compile import BROADCAST_ROWS, body_frame, head_frame
from levelflow.engine.evaluate import (
    Cancelled,
    cast_fact,
    cut,
    fact_rows,
    union_all,
)
from levelflow.engine.incremental.state import COUNT
from levelflow.engine.types import column_names, empty_relation, rows_frame
from levelflow.tasks.ast import Atom, Decl, Negation, Program, Rule, Var, Wildcard

if TYPE_CHECKING:
    import threading

    from pyspark.sql import DataFrame, SparkSession

    from levelflow.tasks.tasks import Task

DELETED = "@D:"  # prefix of the stand-in relation that holds a task's over-deleted tuples
BASE = "@base:"  # prefix of the stand-in relation that holds an input relation's base facts


class Versions:
    """One relation during an epoch: old and new tuples, net Δ+ and Δ- (all cut), row counts."""

    __slots__ = ("decl", "old", "new", "plus", "minus", "old_rows", "new_rows", "plus_rows",
                 "minus_rows", "_proj", "pieces")

    def __init__(self, decl: Decl, old: DataFrame, old_rows: int, pieces: int = 1) -> None:
        self.decl = decl
        self.pieces = pieces  # cut pieces whose union `new` is (merged past MERGE_PIECES)
        self.old = self.new = old
        self.old_rows = self.new_rows = old_rows
        self.plus = self.minus = None
        self.plus_rows = self.minus_rows = 0
        self._proj: dict = {}

    @property
    def changed(self) -> bool:
        """Return whether the relation has a non-empty net change."""
        return bool(self.plus_rows or self.minus_rows)

    def set_change(self, new, new_rows, plus, plus_rows, minus, minus_rows) -> None:
        """Record the relation's new version and its net change."""
        self.new, self.new_rows = new, new_rows
        self.plus, self.plus_rows, self.minus, self.minus_rows = plus, plus_rows, minus, minus_rows

    def delta(self, atom: Atom, negated: bool, deleting: bool) -> tuple[DataFrame | None, int]:
        """Return the tuples through which `atom` loses (deleting) or gains derivations.

        A positive atom loses through Δ-, gains through Δ+. A negated atom `!A` loses where
        A's projection on its non-wildcard positions became present, gains where it vanished.
        """
        if not negated:
            return (self.minus, self.minus_rows) if deleting else (self.plus, self.plus_rows)
        keep = tuple(i for i, a in enumerate(atom.args) if not isinstance(a, Wildcard))
        became_present = deleting
        if len(keep) == self.decl.arity:
            return (self.plus, self.plus_rows) if became_present else (self.minus,
                                                                       self.minus_rows)
        key = (keep, became_present)
        if key not in self._proj:
            self._proj[key] = self._projected(keep, became_present)
        return self._proj[key]

    def _projected(self, keep: tuple[int, ...], present: bool) -> tuple[DataFrame | None, int]:
        """Return projections that became present (or absent), padded to full arity with NULLs."""
        import pyspark.sql.functions as F

        from levelflow.engine.types import SQL_TYPES

        src, rows, other, other_rows = (
            (self.plus, self.plus_rows, self.old, self.old_rows) if present
            else (self.minus, self.minus_rows, self.new, self.new_rows))
        if not rows:
            return None, 0
        cols = [f"c{i}" for i in keep]
        if cols:
            changed = anti_join_small(src.select(*cols).distinct(), other.select(*cols), other_rows,
                             cols)
        elif (self.old_rows if present else self.new_rows) == 0:
            changed = src.limit(1)  # `!r(_, _)`: the relation became non-empty (or empty)
        else:
            return None, 0
        padded = changed.select(*[
            F.col(f"c{i}") if i in keep else F.lit(None).cast(SQL_TYPES[t]).alias(f"c{i}")
            for i, t in enumerate(self.decl.types)])
        return cut(padded)


@dataclass
class TaskUpdate:
    """What updating one task produced: per own relation its Versions, and how it was done."""

    task: int
    strategy: str  # "counting", "dred", "scratch", or "switched" (an update stopped, then scratch)
    seconds: float
    versions: dict  # relation name -> Versions (new / plus / minus set)
    counts: dict = field(default_factory=dict)  # counted relation -> new counts (c.., _cnt)
    ranked: dict = field(default_factory=dict)  # DRed relation -> (new tuples + _it, max rank)
    scratch_seconds: float | None = None
    iterations: int = 0


class TaskContext:
    """Everything a task's update reads: the program, the Versions of relations, base facts."""

    def __init__(self, spark: SparkSession, program: Program, versions: Mapping[str, Versions],
                 old_counts: Mapping[str, DataFrame], base: Mapping[str, Versions],
                 old_ranked: Mapping[str, DataFrame] | None = None,
                 max_rank: Mapping[str, int] | None = None) -> None:
        self.spark = spark
        self.program = program
        self.decls = program.decls
        self.versions = versions
        self.old_counts = old_counts
        self.base = base  # input relation -> Versions of its base facts
        self.old_ranked = old_ranked or {}  # DRed relation -> old tuples with their RANK
        self.max_rank = max_rank or {}  # DRed relation -> its highest rank

    def sizes(self, rule: Rule, new: bool) -> dict[int, int]:
        """Return known row counts per body atom position (for join order and broadcasts)."""
        out = {}
        for i, atom, _ in atoms_of(rule):
            v = self.versions.get(atom.relation)
            if v is not None:
                out[i] = v.new_rows if new else v.old_rows
        return out


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


def atoms_of(rule: Rule) -> list[tuple[int, Atom, bool]]:
    """Return (position, atom, negated) for every positive or negated atom of a rule body."""
    out = []
    for i, lit in enumerate(rule.body):
        if isinstance(lit, Atom):
            out.append((i, lit, False))
        elif isinstance(lit, Negation):
            out.append((i, lit.atom, True))
    return out


def countable(program: Program, task: Task) -> bool:
    """Return whether the counting algorithm maintains this task exactly.

    Recursive tasks are not (DRed does them). Nor are rules whose body rows do not count
    derivations: a nullary head (one row whatever the body), a positive atom without variables
    (joined as "exists"), a body without positive atoms.
    """
    if task.recursive:
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


# ---------------------------------------------------------------------------------------------
# Counting.


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
            frames = {i: ctx.versions[a.relation].new for i, a, _ in atoms_of(rule)}
            for name, df in heads_of(ctx, rule, task.relations, frames, ctx.sizes(rule, True)):
                parts[name].append(df)
    out = {}
    for name in task.relations:
        decl = ctx.decls[name]
        cols = column_names(decl.arity)
        bag = union_all(parts[name]) if parts[name] else empty_relation(ctx.spark, decl)
        out[name] = bag.groupBy(*cols).agg(F.count(F.lit(1)).alias(COUNT))
    return out


def count_update(ctx: TaskContext, task: Task) -> dict[str, tuple]:
    """Return per relation (new counts, Δ+, Δ+ rows, Δ-, Δ- rows, new rows, counts changed)."""
    import pyspark.sql.functions as F

    signed: dict[str, list[DataFrame]] = {n: [] for n in task.relations}
    for name in task.relations:
        b = ctx.base.get(name)
        if b is not None and b.changed:
            if b.plus_rows:
                signed[name].append(b.plus.withColumn("_s", F.lit(1)))
            if b.minus_rows:
                signed[name].append(b.minus.withColumn("_s", F.lit(-1)))
    for rule in task.rules:
        if not rule.body:
            continue
        atoms = atoms_of(rule)
        for i, atom, neg in atoms:
            ver = ctx.versions[atom.relation]
            if not ver.changed:
                continue
            # new(A1..Ai-1) x delta(Ai) x old(Ai+1..An)
            frames, sizes = {}, {}
            for j, a, _ in atoms:
                if j != i:
                    v = ctx.versions[a.relation]
                    frames[j] = v.new if j < i else v.old
                    sizes[j] = v.new_rows if j < i else v.old_rows
            for deleting in (False, True):
                df, rows = ver.delta(atom, neg, deleting)
                if not rows:
                    continue
                frames[i], sizes[i] = bcast_small(df, rows), rows
                sign = -1 if deleting else 1
                variant = as_positive(rule, i) if neg else rule
                for name, heads in heads_of(ctx, variant, task.relations, dict(frames), sizes,
                                          first=i):
                    signed[name].append(heads.withColumn("_s", F.lit(sign)))
    out = {}
    for name in task.relations:
        old_c = ctx.old_counts[name]
        old = ctx.versions[name]
        if not signed[name]:
            out[name] = (old_c, None, 0, None, 0, old.old_rows, False)
            continue
        cols = column_names(ctx.decls[name].arity)
        dc, rows = cut(union_all(signed[name]).groupBy(*cols).agg(F.sum("_s").alias("_d"))
                        .filter(F.col("_d") != 0))
        if not rows:
            out[name] = (old_c, None, 0, None, 0, old.old_rows, False)
            continue
        keys = F.broadcast(dc.select(*cols)) if rows <= BROADCAST_ROWS else dc.select(*cols)
        before = F.coalesce(F.col(COUNT), F.lit(0))
        touched = bcast_small(old_c.join(keys, cols, "left_semi"), rows)
        upd, _ = cut(dc.join(touched, cols, "left").select(
            *cols, before.alias("_old"), (before + F.col("_d")).alias("_new")))
        plus, plus_rows = cut(upd.filter((F.col("_old") <= 0) & (F.col("_new") > 0))
                               .select(*cols))
        minus, minus_rows = cut(upd.filter((F.col("_old") > 0) & (F.col("_new") <= 0))
                                 .select(*cols))
        ukeys = upd.select(*cols)
        ukeys = F.broadcast(ukeys) if rows <= BROADCAST_ROWS else ukeys
        new_c = old_c.join(ukeys, cols, "left_anti").unionByName(
            upd.filter(F.col("_new") > 0).select(*cols, F.col("_new").alias(COUNT)))
        out[name] = (new_c, plus, plus_rows, minus, minus_rows,
                     old.old_rows + plus_rows - minus_rows, True)
    return out


# ---------------------------------------------------------------------------------------------
# From scratch (bootstrap, unsupported shapes, and the elastic switch's fallback).


def scratch_sets(ctx: TaskContext, task: Task, cancel=None) -> tuple[dict, int]:
    """Return each relation's new tuples (with RANK) evaluated from scratch, and the rounds."""
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
        run_task = dataclasses.replace(task, rules=task.rules + tuple(extra_rules))
    from levelflow.engine.plans import choose_plan, evaluate_planned

    # From scratch, a task runs as `run` would run it: under the plan its shape and size give.
    plan = choose_plan(run_task, program.decls, sum(counts.values()))
    result = evaluate_planned(ctx.spark, program, run_task, relations, None, plan=plan,
                              cancel=cancel, counts=counts, ranked=True)
    return {n: (result[n], result.stats.rows[n]) for n in task.relations}, \
        result.stats.iterations


def diff(old: DataFrame, old_rows: int, new: DataFrame, new_rows: int, cols) -> tuple:
    """Return (Δ+, Δ+ rows, Δ-, Δ- rows) between two versions of a relation."""
    if not old_rows:
        plus, plus_rows = (new, new_rows) if new_rows else (None, 0)
        return plus, plus_rows, None, 0
    if not new_rows:
        return None, 0, old, old_rows
    import pyspark.sql.functions as F

    # One shuffle of both versions instead of one anti join each way: per tuple, which
    # versions hold it (1 old, 2 new); the tuples in only one of them are the change.
    tagged = old.select(*cols, F.lit(1).alias("_in")).union(
        new.select(*cols, F.lit(2).alias("_in")))
    changed, rows = cut(tagged.groupBy(*cols).agg(F.sum("_in").alias("_in"))
                         .filter(F.col("_in") != 3))
    if not rows:
        return None, 0, None, 0
    plus, plus_rows = cut(changed.filter(F.col("_in") == 2).select(*cols))
    minus, minus_rows = cut(changed.filter(F.col("_in") == 1).select(*cols))
    return (plus if plus_rows else None), plus_rows, (minus if minus_rows else None), minus_rows


def timed(fn, *args, **kwargs):
    """Return (fn's result, wall seconds)."""
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t
