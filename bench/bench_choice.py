"""choice-domain maintained against from-scratch evaluation.

Workload: `pick(x, y) choice-domain x` over --rows random edges (--keys keys, so about
rows / keys candidates per key), and a relation reading the choice. Measured on one
SparkSession: a from-scratch run (the second of two), then a 10-edge epoch (5 removed, often
chosen ones, and 5 inserted), median of --repeat, the Spark jobs each epoch ran, and the ratio.
An epoch runs two jobs: `@worse_pick` and `pick` (counting in the workers that keep their
counts); `@cand_pick` and `back` copy a relation's change reordered, with no job
(strategies/renaming.py).

    .venv/bin/python bench/bench_choice.py [--rows 100000 --keys 25000]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

PROGRAM = """
.decl edge(x: number, y: number)
.input edge
.decl pick(x: number, y: number) choice-domain x
pick(x, y) :- edge(x, y).
.decl back(y: number, x: number)
back(y, x) :- pick(x, y).
.printsize back
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=25_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.runner import run_program
    from levelflow.engine.session import make_session
    from levelflow.tasks import build_tasks, parse_program

    rng = random.Random(1)
    edges = {(rng.randrange(args.keys), rng.randrange(10 * args.keys))
             for _ in range(args.rows)}
    tmp = Path(tempfile.mkdtemp(prefix="levelflow-bench-choice-"))
    (tmp / "f0").mkdir()
    (tmp / "f0" / "edge.facts").write_text("".join(f"{x}\t{y}\n" for x, y in sorted(edges)))
    pt = build_tasks(parse_program(PROGRAM, "choice.dl"))
    spark = make_session(master="local[2]", shuffle_partitions=2, driver_memory="2g")
    try:
        runs = []
        for k in range(2):  # the second run: the JVM warmed up, as the epochs find it
            start = time.perf_counter()
            run_program(spark, pt, tmp / "f0", tmp / f"out{k}", jobs=2)
            runs.append(time.perf_counter() - start)
        scratch = runs[-1]
        start = time.perf_counter()
        s = IncrementalSession.bootstrap(spark, pt, tmp / "f0", mode="incremental")
        boot = time.perf_counter() - start
        times, jobs = [], []
        for _ in range(args.repeat):
            for row in rng.sample(sorted(edges), 5):
                s.remove("edge", row)
                edges.discard(row)
            for _ in range(5):
                row = (rng.randrange(args.keys), rng.randrange(10 * args.keys))
                s.insert("edge", row)
                edges.add(row)
            start = time.perf_counter()
            result = s.commit()
            times.append(time.perf_counter() - start)
            jobs.append(sum(result.spark_jobs.values()))
        epoch = statistics.median(times)
        # The first epoch after the bootstrap apart from the warm ones (issue 30: <= 2x).
        warm = statistics.median(times[1:]) if len(times) > 1 else times[0]
        print(f"bootstrap {boot:.2f} s; first epoch {times[0]:.2f} s ({jobs[0]} jobs), warm "
              f"median {warm:.2f} s ({times[0] / warm:.1f}x)", flush=True)
        print(f"choice over {len(edges):,} edges, {args.keys:,} keys: from scratch "
              f"{scratch:.2f} s; 10-edge epoch {epoch:.2f} s (median of {args.repeat}; "
              f"each {', '.join(f'{t:.2f}' for t in times)} s; Spark jobs per epoch "
              f"{', '.join(map(str, jobs))}); {scratch / epoch:.1f}x")
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
