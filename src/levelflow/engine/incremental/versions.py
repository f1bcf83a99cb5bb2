"""The records of one task's update in an epoch: what it reads and what it produces.

Constant during a task's update: `Versions` of every relation it reads (old, new, Δ+, Δ-, all
cut) and of its own relations (old only), in a `TaskContext`. Produced: a `Change` per own
relation, gathered into the task's `TaskUpdate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from levelflow.engine.evaluate import (
    cut,
)
from levelflow.engine.incremental.backends.spark_broadcast import anti_join_small
from levelflow.tasks.ast import Atom, Decl, Program, Rule, Wildcard

if TYPE_CHECKING:

    from pyspark.sql import DataFrame, SparkSession


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


@dataclass(slots=True)
class Change:
    """One own relation's outcome of a task update: its new contents and its net change.

    `new`: counting's new counts (with COUNT), DRed's new ranked tuples, or None when DRed
    kept the tuples and their ranks. `dirty` (counting): whether any count changed; `pieces`
    and `top` (DRed): the cut pieces `new` is made of and the highest rank in the task.
    """

    new: object
    plus: object = None
    plus_rows: int = 0
    minus: object = None
    minus_rows: int = 0
    rows: int = 0  # tuples in the new version
    dirty: bool = False
    pieces: int = 1
    top: int = 0
    stored: tuple | None = None  # (removed, added) stored rows, when known cheaply: TaskUpdate
    whole: bool = False  # counting: `new` is built from counts the driver holds, not a plan


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
    held: object = None  # dred_job.Held: the task's state on the executors, if updated there
    # Changed relation -> (removed, added) stored rows: the commit appends them as a delta
    # segment (state/directory.py, state/segments.py) instead of rewriting the relation.
    # `added`: the new rows
    # (c0.. + _cnt or _it) of tuples added or whose count or rank changed; `removed`: the old
    # tuples gone or replaced (c0.., the count or rank column optional: removal matches on
    # the tuple columns); either may be None for none. Absent: the commit writes a new base.
    stored: dict[str, tuple[DataFrame | None, DataFrame | None]] = field(default_factory=dict)
    # Relation -> whether its stored ranks are now labels (closure_labels.py); absent: as before.
    labelled: dict[str, bool] = field(default_factory=dict)


class TaskContext:
    """Everything a task's update reads: the program, the Versions of relations, base facts."""

    def __init__(self, spark: SparkSession, program: Program, versions: Mapping[str, Versions],
                 old_counts: Mapping[str, DataFrame], base: Mapping[str, Versions],
                 old_ranked: Mapping[str, DataFrame] | None = None,
                 max_rank: Mapping[str, int] | None = None,
                 driver_rows: int | None = None, plan: str = "auto") -> None:
        self.spark = spark
        # "distributed": a recursive task the routing serves is kept under the distributed
        # plan whatever its size (the session's `plan`); "auto": as its size gives.
        self.plan = plan
        # A task reading at most this many rows runs in the driver (plans/driver.py), from
        # scratch and in its epochs; None: on Spark.
        self.driver_rows = driver_rows
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
        for i, atom, _ in rule.body_atoms():
            v = self.versions.get(atom.relation)
            if v is not None:
                out[i] = v.new_rows if new else v.old_rows
        return out
