"""Durable write of an epoch: a full rewrite of each changed relation against a delta segment.

Workload: the transitive closure of bench_incremental's layered DAG (>= 1,000,000 `path`
tuples at the default size). One state is bootstrapped and copied; on each copy the same
10-edge epoch is committed (strategy incremental, no compaction), once writing every changed
relation whole (the levelflow-state/4 behaviour: no TaskUpdate.stored), once appending
segments, and once appending segments with fsync a no-op (what flushing the epoch costs).
Printed: the time and Spark jobs of StateDir.commit (the durable write) and of the whole
epoch, and the ratios, all on one SparkSession.

    .venv/bin/python bench/bench_durable.py [--layers 12 --width 150 --degree 6]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_incremental import (  # noqa: E402
    fresh_edges,
    jobs_started,
    layered_workload,
    workload_args,
)


def timed_commits(spark):
    """Return a list that StateDir.commit appends (seconds, Spark jobs) to from now on."""
    from levelflow.engine.incremental.state.directory import StateDir

    real, log = StateDir.commit, []

    def commit(self, *args, **kwargs):
        # The epoch's jobs ran in the workers' job groups; a job of our own group first makes
        # the count (the highest job id of no group, + 1) start at the commit.
        spark.sparkContext.parallelize([0], 1).count()
        jobs, t = jobs_started(spark), time.perf_counter()
        out = real(self, *args, **kwargs)
        log.append((time.perf_counter() - t, jobs_started(spark) - jobs))
        return out

    StateDir.commit = commit
    return log


def epoch_on(spark, state: Path, new, full: bool) -> tuple[float, int]:
    """Return (seconds, Spark jobs) of committing `new` edges on `state` as one epoch."""
    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.incremental import epoch as maintain

    real = maintain.Epoch.snapshot

    def whole(self):  # no segments: every changed relation is written whole, as before
        snap, changed, changed_base = real(self)
        snap.stored, snap.base_stored = {}, {}
        return snap, changed, changed_base

    s = IncrementalSession.open(spark, state, mode="incremental")
    for e in new:
        s.insert("edge", e)
    maintain.Epoch.snapshot = whole if full else real
    try:
        jobs, t = jobs_started(spark), time.perf_counter()
        s.commit(compact=False)
        return time.perf_counter() - t, jobs_started(spark) - jobs
    finally:
        maintain.Epoch.snapshot = real
        s.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workload_args(parser)
    args = parser.parse_args()

    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.session import make_session

    rng, edges, tmp = layered_workload(args, "levelflow-bench-durable-")
    spark = make_session(master="local[2]", shuffle_partitions=2, driver_memory="2g")
    try:
        t = time.perf_counter()
        IncrementalSession.bootstrap(spark, tmp / "tc.dl", tmp / "f0", tmp / "s0").close()
        print(f"bootstrap into a state: {time.perf_counter() - t:.2f} s")
        new = fresh_edges(rng, edges, 10, args.layers, args.width)
        writes = timed_commits(spark)
        rows, synced = {}, os.fsync
        for label, full in [("full rewrite", True), ("segments", False),
                            ("segments, no fsync", False)] * 2:  # the first pays warm-up
            state = tmp / f"s{len(writes) + 1}"
            shutil.copytree(tmp / "s0", state)
            os.sync()  # the copy on disk, as a state is between epochs: no commit flushes it
            # What flushing the epoch to disk costs (durable.py): the same commit unflushed.
            os.fsync = (lambda fd: None) if "no fsync" in label else synced
            try:
                rows[label] = (*epoch_on(spark, state, new, full), *writes[-1])
            finally:
                os.fsync = synced
        for label, (sec, jobs, wsec, wjobs) in rows.items():
            print(f"{label:13s} durable write {wsec:6.2f} s ({wjobs} Spark jobs); "
                  f"whole epoch {sec:6.2f} s ({jobs} jobs)")
        full, seg = rows["full rewrite"], rows["segments"]
        print(f"durable write: segments {full[2] / seg[2]:.1f}x faster than a full rewrite "
              f"({seg[2]:.2f} s vs {full[2]:.2f} s); whole epoch {full[0] / seg[0]:.1f}x")
        bare = rows["segments, no fsync"]
        print(f"fsync: a segment epoch's durable write {seg[2]:.2f} s flushed vs {bare[2]:.2f} s "
              f"not ({seg[2] / bare[2]:.2f}x); whole epoch {seg[0] / bare[0]:.2f}x")
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
