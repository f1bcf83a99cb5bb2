"""One epoch's state in memory: per relation its tuples with a derivation count (`_cnt`,
counted tasks) or a rank (`_it`, the others), per input its base facts, and bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from levelflow.engine.evaluate import RANK
from levelflow.engine.incremental.backends.driver_rows import held_empty, without
from levelflow.engine.incremental.state.segments import rewrite_whole

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from levelflow.tasks.ast import Program

COUNT = "_cnt"


@dataclass
class Snapshot:
    """One epoch's relations (tuples + `_cnt` or `_it`), base facts and bookkeeping."""

    epoch: int
    rel: dict  # relation name -> DataFrame (c0.. [+ _cnt])
    base: dict  # input relation name -> DataFrame of base facts (c0..)
    rows: dict[str, int]
    base_rows: dict[str, int]
    counted: set[str]
    scratch_seconds: dict[str, float] = field(default_factory=dict)  # task name -> seconds
    where: dict[str, int | None] = field(default_factory=dict)  # relation -> epoch dir
    base_where: dict[str, int | None] = field(default_factory=dict)
    pieces: dict[str, int] = field(default_factory=dict)  # relation -> cut pieces in its union
    max_rank: dict[str, int] = field(default_factory=dict)  # ranked relation -> highest rank
    # task name -> arranged.Held: where the task's state also lives on the executors
    arranged: dict = field(default_factory=dict)
    # Changed relation -> (removed, added) stored rows, written as a segment (else a new base).
    stored: dict[str, tuple] = field(default_factory=dict)
    base_stored: dict[str, tuple] = field(default_factory=dict)  # input -> (Δ-, Δ+) base facts
    # Relations whose stored ranks are labels, not ranks (strategies/closure_labels.py).
    labelled: set[str] = field(default_factory=set)

    def labels_any(self, relations) -> bool:
        """Return whether any of the relations' stored ranks are labels."""
        return not self.labelled.isdisjoint(relations)

    def tuples(self, name: str) -> DataFrame:
        """Return the tuples of relation `name` (columns c0.., no count or rank); rows the
        driver holds stay held."""
        return without(self.rel[name], COUNT if name in self.counted else RANK)


def empty_snapshot(spark: SparkSession, program: Program, counted: set[str]) -> Snapshot:
    """Return the epoch -1 snapshot: every relation and every base relation empty, held in
    the driver (no JVM call until something reads one on Spark)."""
    rel = {name: held_empty(spark, decl, COUNT if name in counted else RANK)
           for name, decl in program.decls.items()}
    base = {name: held_empty(spark, program.decls[name]) for name in program.inputs}
    return Snapshot(-1, rel, base, dict.fromkeys(program.decls, 0),
                    dict.fromkeys(program.inputs, 0), set(counted),
                    where=dict.fromkeys(program.decls), base_where=dict.fromkeys(program.inputs),
                    max_rank=dict.fromkeys(set(program.decls) - set(counted), 0))


def next_snapshot(old: Snapshot, tasks, updates: dict, base_versions: dict
                  ) -> tuple[Snapshot, set[str], set[str]]:
    """Return the snapshot after an epoch's task updates (`updates`: task id -> TaskUpdate)
    and base facts' change (`base_versions`: input -> Versions), and the relations and base
    facts it changed (not yet on disk)."""
    rel, rows, pieces = dict(old.rel), dict(old.rows), dict(old.pieces)
    max_rank = dict(old.max_rank)
    changed: set[str] = set()
    stored = {}
    scratch = dict(old.scratch_seconds)
    arranged = dict(old.arranged)
    labelled = set(old.labelled)
    for v, upd in updates.items():
        task = tasks[v]
        labelled |= {n for n, now in upd.labelled.items() if now}
        labelled -= {n for n, now in upd.labelled.items() if not now}
        if upd.scratch_seconds is not None:
            scratch[task.name] = upd.scratch_seconds
        if upd.held is not None:
            arranged[task.name] = upd.held
        else:  # updated elsewhere: the executors' copy is stale
            arranged.pop(task.name, None)
        for n, ver in upd.versions.items():
            if n in upd.counts:
                rel[n], rows[n] = upd.counts[n], ver.new_rows
                pieces[n] = ver.pieces  # epochs of lazy counts (_apply_counts)
                changed.add(n)
            elif n in upd.ranked:
                (rel[n], max_rank[n]), rows[n] = upd.ranked[n], ver.new_rows
                pieces[n] = ver.pieces
                changed.add(n)
            if n in upd.stored and not rewrite_whole(ver.plus_rows + ver.minus_rows,
                                                     ver.new_rows, upd.stored[n]):
                stored[n] = upd.stored[n]  # else a new base: a segment would compact
    base, base_rows = dict(old.base), dict(old.base_rows)
    changed_base, base_stored = set(), {}
    for n, ver in base_versions.items():
        if ver.changed:
            base[n], base_rows[n] = ver.new, ver.new_rows
            changed_base.add(n)
            seg = (ver.minus if ver.minus_rows else None, ver.plus if ver.plus_rows else None)
            if not rewrite_whole(ver.plus_rows + ver.minus_rows, ver.new_rows, seg):
                base_stored[n] = seg
    snap = Snapshot(old.epoch + 1, rel, base, rows, base_rows, set(old.counted), scratch,
                    dict(old.where), dict(old.base_where), pieces, max_rank,
                    stored=stored, base_stored=base_stored, arranged=arranged,
                    labelled=labelled)
    return snap, changed, changed_base
