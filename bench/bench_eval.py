"""Time the evaluation core alone: reading 10^6 fact lines, and a transitive-closure fixpoint.

Run: .venv/bin/python bench/bench_eval.py [--lines N] [--nodes V] [--edges E] [--layered]
Prints each figure and its ratio to a reference: for fact reading, building the same DataFrame
with createDataFrame from Python tuples; for TC, the figures in /work/shared/notes/spark-local.md
(random 1k edges, ~60k pairs, 10 iterations: ~9 s; layered 10k edges, 39 iterations: ~34 s).
(bench/bench_engine.py times whole `levelflow run`s; this one calls evaluate_task directly.)
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

from levelflow.engine.evaluate import evaluate_task
from levelflow.engine.facts import read_facts, validate_facts
from levelflow.engine.session import make_session
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.ast import Decl

TC = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
"""
REF_TC_RANDOM_S = 9.0
REF_TC_LAYERED_S = 34.0


def bench_read(spark, lines: int, tmp: Path) -> None:
    """Print the time to validate and load `lines` fact lines vs createDataFrame of tuples."""
    rng = random.Random(1)
    path = tmp / "big.facts"
    with path.open("w") as f:
        for i in range(lines):
            f.write(f"{i}\t{rng.randrange(1 << 40)}\tsym{i % 1000}\n")
    d = Decl("big", ("a", "b", "s"), ("number", "number", "symbol"))
    t0 = time.perf_counter()
    validate_facts(path, d, "\t")
    t_validate = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = read_facts(spark, d, path).count()
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    tuples = []
    for line in path.read_text().splitlines():
        a, b, s = line.split("\t")
        tuples.append((int(a), int(b), s))
    m = spark.createDataFrame(tuples, "c0 bigint, c1 bigint, c2 string").distinct().count()
    t_create = time.perf_counter() - t0
    assert n == m == lines
    print(f"read_facts {lines:,} lines: {t_read:.2f} s (of which validation {t_validate:.2f} s); "
          f"createDataFrame of tuples: {t_create:.2f} s; ratio {t_read / t_create:.2f}",
          flush=True)


def bench_tc(spark, edges: list[tuple[int, int]], label: str, ref: float, tmp: Path) -> None:
    """Print the TC fixpoint time on `edges`, its rounds and its ratio to the reference."""
    factdir = tmp / label
    factdir.mkdir()
    (factdir / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in edges))
    pt = build_tasks(parse_program(TC, "tc.dl"))
    t0 = time.perf_counter()
    edge = evaluate_task(spark, pt.program, pt.tasks[0], {}, factdir)
    path = evaluate_task(spark, pt.program, pt.tasks[1], dict(edge), counts=edge.stats.rows)
    dt = time.perf_counter() - t0
    stats = path.stats
    print(f"TC {label}: {len(edges):,} edges -> {stats.rows['path']:,} pairs, "
          f"{stats.iterations} iterations in {dt:.2f} s; reference {ref:.0f} s; "
          f"ratio {dt / ref:.2f}", flush=True)
    print("  new pairs per iteration:", [it["path"] for it in stats.per_iteration])
    print("  seconds per iteration:", [round(s, 2) for s in stats.iteration_seconds], flush=True)


def main() -> None:
    """Run the benchmarks on a local[2] session with 2 shuffle partitions."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000, help="0 skips fact reading")
    ap.add_argument("--nodes", type=int, default=250)
    ap.add_argument("--edges", type=int, default=1000)
    ap.add_argument("--layered", action="store_true", help="also run the 10k-edge layered TC")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    spark = make_session("local[2]", shuffle_partitions=2, driver_memory="2g")
    spark.range(10).count()  # JVM warm-up outside the timings
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if args.lines:
            bench_read(spark, args.lines, tmp)
        edges = sorted({(rng.randrange(args.nodes), rng.randrange(args.nodes))
                        for _ in range(args.edges)})
        bench_tc(spark, edges, "random", REF_TC_RANDOM_S, tmp)
        if args.layered:
            # 40 layers of 250 nodes; each node has one edge to a random node a layer down.
            layered = [(layer * 250 + i, (layer + 1) * 250 + rng.randrange(250))
                       for layer in range(40) for i in range(250)]
            bench_tc(spark, layered, "layered", REF_TC_LAYERED_S, tmp)



if __name__ == "__main__":
    main()
