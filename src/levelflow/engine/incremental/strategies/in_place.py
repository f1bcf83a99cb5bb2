"""A large change with deletions to an arranged task is recomputed where its state lives.

The elastic rule recomputes a task at once when its change is a large share of what it reads.
On Spark's side that was the task's fixpoint, then a diff against the old version read back
from its Spark-side copy (a shuffle of both), then the durable write: a 50% epoch on
bench_shapes cost 3.6-5.7x a from-scratch run, the diff alone 1.5x. The executors that hold
the task's state (arranged.py) run the same fixpoint and tell the changed (tuple, rank) pairs
apart in memory (local_dred._recomputed), in the epoch's one job; its share-size limit is
lifted, as the change is large enough that DRed would cost more than the recompute.
"""

from __future__ import annotations

import sys

from levelflow.engine.incremental.strategies.dred_polars import RECOMPUTE_FRACTION

EVERY_SHARE = sys.maxsize  # local_dred.update's recompute_rows: any share size recomputes


def recompute_in_place(ctx, task, plan, held) -> bool:
    """Return whether a task's large change is recomputed where its state lives: it runs
    arranged (`plan`), its state is there (`held`), and the change deletes enough of what it
    reads that every share recomputes (local_dred._recompute_cheaper's rule)."""
    if plan is None or held is None or plan.kind == "distributed":
        return False  # a distributed task's large change: recomputed by its plan
    lower = [ctx.versions[n] for n in task.reads_from]
    facts = [ctx.base[n] for n in task.relations if n in ctx.base]
    deleted = sum(v.minus_rows for v in lower + facts)
    read = sum(v.new_rows for v in lower + facts)
    return deleted > 0 and deleted >= RECOMPUTE_FRACTION * read
