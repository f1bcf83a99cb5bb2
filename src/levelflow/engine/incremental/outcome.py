"""What an epoch's tasks produced: each task's Changes as a TaskUpdate, the EpochResult.

Functions of a running `epoch.Epoch` (its versions, program and updates), read only.
"""

from __future__ import annotations

import time
from pathlib import Path

from levelflow.engine.evaluate import cut
from levelflow.engine.incremental.backends.driver_rows import (
    held_columns,
    held_empty,
    without,
)
from levelflow.engine.incremental.results import Delta, EpochResult
from levelflow.engine.incremental.state.snapshot import COUNT
from levelflow.engine.incremental.versions import TaskUpdate, Versions
from levelflow.engine.types import column_names
from levelflow.traces.model import JobTrace


def apply_counts(epoch, v, out, strategy, t0) -> TaskUpdate:
    """Return the TaskUpdate of a counted task from its relations' Changes: new counts that
    are plans over the old ones are cut, those built from the driver's counts stay lazy."""
    versions, counts, stored = {}, {}, {}
    for n, ch in out.items():
        old = epoch.versions[n]
        ver = Versions(epoch.program.decls[n], old.old, old.old_rows)
        if ch.dirty:
            new_c = ch.new
            if not ch.whole and strategy == "counting":
                new_c = cut(new_c)[0]
            counts[n] = new_c
            tuples = without(new_c, COUNT)
            ver.set_change(tuples, ch.rows, ch.plus, ch.plus_rows, ch.minus, ch.minus_rows)
            if ch.stored is not None:
                stored[n] = ch.stored
        versions[n] = ver
    return TaskUpdate(v, strategy, time.perf_counter() - t0, versions, counts,
                      stored=stored)


def apply_sets(epoch, v, out, strategy, t0, rounds) -> TaskUpdate:
    """Return the TaskUpdate of a set-maintained (DRed, ranked) task."""
    versions, ranked, stored = {}, {}, {}
    for n, ch in out.items():
        old = epoch.versions[n]
        ver = Versions(epoch.program.decls[n], old.old, old.old_rows, old.pieces)
        if ch.plus_rows or ch.minus_rows:
            cols = column_names(epoch.program.decls[n].arity)
            tuples = held_columns(ch.new, cols)
            ver.set_change(tuples, ch.rows, ch.plus, ch.plus_rows, ch.minus, ch.minus_rows)
        if ch.new is not None:
            # Same tuples can come with new ranks (a tuple lost its support and was
            # re-derived later): keep them, or a later deletion trusts a stale rank.
            ver.pieces = ch.pieces
            ranked[n] = (ch.new, ch.top)
            if ch.stored is not None:
                stored[n] = ch.stored
        versions[n] = ver
    return TaskUpdate(v, strategy, time.perf_counter() - t0, versions, ranked=ranked,
                      iterations=rounds, stored=stored)


def epoch_result(epoch, seconds: float) -> EpochResult:
    """Return the EpochResult of the finished epoch."""
    deltas = {}
    for n, ver in epoch.versions.items():
        if ver.changed:
            decl = epoch.program.decls[n]
            deltas[n] = Delta(ver.plus if ver.plus_rows else held_empty(epoch.spark, decl),
                              ver.minus if ver.minus_rows else held_empty(epoch.spark, decl),
                              ver.plus_rows, ver.minus_rows)
    names = epoch.pt.graph.names
    number = epoch.snap.epoch + 1
    durations = [0.0] * len(epoch.pt.tasks)
    for v, u in epoch.updates.items():
        durations[v] = u.seconds
    trace = JobTrace(graph=epoch.pt.graph, durations=durations,
                     initial=tuple(epoch.initial()), activations=dict(epoch.activations),
                     name=f"{Path(epoch.program.file).stem}-epoch{number}",
                     processors=epoch.jobs)
    return EpochResult(
        epoch=number, deltas=deltas, ran=len(epoch.updates),
        total=len(epoch.pt.tasks),
        strategies={names[v]: u.strategy for v, u in sorted(epoch.updates.items())},
        task_seconds={names[v]: u.seconds for v, u in sorted(epoch.updates.items())},
        seconds=seconds, trace=trace,
        schedule=sorted(epoch.schedule, key=lambda row: (row[2], row[1])),
        spark_jobs={names[v]: n for v, n in sorted(epoch.task_jobs.items())},
        arranged=tuple(names[v] for v, u in sorted(epoch.updates.items())
                       if u.held is not None))
