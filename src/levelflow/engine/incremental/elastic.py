"""The elastic switch: when an update is stopped and its task recomputed from scratch instead.

An update that runs longer than `switch` x the task's last from-scratch time (never under
SWITCH_FLOOR_SECONDS) is cancelled (an event its strategy checks, and Spark's job tag), and a
change to LARGE_CHANGE or more of what a recursive task reads is recomputed at once.
"""

from __future__ import annotations

import contextlib
import threading
import uuid

MODES = ("elastic", "incremental", "scratch")
# The elastic switch: an update stops after this fraction of the task's last from-scratch time.
SWITCH = 0.2
# Below this budget the switch would only measure Spark's per-job overhead, not the work.
SWITCH_FLOOR_SECONDS = 1.0
# A change to this fraction of the tuples a DRed task reads is large: under the elastic mode
# the task is recomputed at once ("bootstrap") instead of spending the budget to find out.
LARGE_CHANGE = 0.05
# The same two thresholds for a task updated where its state lives (dred_job.py). Its update is
# one job whose cost follows the change, so it pays up to much larger changes (a 10% change of
# the 1M-tuple closure bench: 0.8x a from-scratch run). The switch fires when the update has
# cost as much as the fallback would (the ski-rental rule): the fixpoint, then the diff against
# the old version, measured at 2.5-3x the fixpoint alone on that bench; a lower budget fired
# under load spikes and tripled those epochs.
# They scale the session's settings (5% -> 25%, 0.2x -> 3x at the defaults; 0 stays 0).
# Not lower: recomputed where the state lives (strategies/in_place.py), every tuple is ranked
# anew and each (tuple, rank) pair that differs is sent back and written (dred_polars'
# _recomputed): after a few DRed epochs a recompute of a 2-10% change cost 2-8x a from-scratch
# run on bench_shapes at 1M pairs (every shape, its write alone 1-4 s), where DRed cost
# 0.1-1.2x. A closure sends only the tuples that changed (closure_labels.py), yet its first
# recompute after DRed epochs re-ranks every tuple in the worker: at the session's threshold
# its 10% epochs cost 2.6-4.4x a from-scratch run, against 0.15-0.84x by DRed.
ARRANGED_LARGE_CHANGE = 5.0
ARRANGED_SWITCH = 15.0
# An aggregate task whose state the driver keeps (strategies/aggregate_state.py) updates in at
# most one small job whatever its size: it stops once it cost what the fallback would, the
# recompute and its diff (this x the session's switch: 1x the from-scratch time at 0.2).
AGGREGATE_SWITCH = 5.0
# A bootstrap counts a counted task in the driver, which keeps its counts, when it reads at most
# this many rows: every one goes to Python, where Spark's count keeps them in the JVM (the
# closure bench's cyclic(x) :- path(x, x) over 1M tuples: 0.9 s against 0.1 s).
BOOTSTRAP_COUNT_ROWS = 100_000


@contextlib.contextmanager
def cancelled_after(spark, budget: float | None):
    """Yield an Event set, and the block's Spark jobs cancelled, once `budget` seconds pass
    (None: never); the block's jobs carry a tag of their own (none while Spark is not in use:
    work in the driver watches the Event)."""
    from levelflow.engine.session import spark_in_use

    cancel = threading.Event()
    if budget is None:  # nothing cancels the block's jobs: no tag (two py4j calls) needed
        yield cancel
        return
    tag = f"levelflow-inc-{uuid.uuid4().hex[:12]}"
    sc = spark.sparkContext if spark_in_use(spark) else None

    def fire():
        cancel.set()
        if sc is not None:
            sc.cancelJobsWithTag(tag)

    timer = threading.Timer(budget, fire)
    timer.daemon = True
    # Its jobs interrupt their tasks when cancelled: a SparkWorkers thread's jobs all do.
    if sc is not None:
        sc.addJobTag(tag)
    try:
        timer.start()
        yield cancel
    finally:
        timer.cancel()
        if sc is not None:
            sc.removeJobTag(tag)
