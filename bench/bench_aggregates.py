"""Aggregates maintained against from-scratch evaluation, on one SparkSession.

Workload (>= 1,000,000 input tuples at the default size):
  views(p, c)  :- page(p), c = count : visit(_, p).       a group-by count over V visits
  hops(y, d)   :- the nodes within 6 hops of node 0 over E random edges, with their hop counts
  dist(y, min d : hops(y, d)) :- hops(y, _).               a min above that recursive task
Measured, as ratios to a from-scratch run of the same engine (run_program, auto plans):
  1. a 10-tuple epoch (5 visits, 5 edges; median of 5)    goal: >= 10x faster than from scratch
  2. Spark jobs per aggregate task per epoch               goal: at most 1

    .venv/bin/python bench/bench_aggregates.py [--visits 1000000 --edges 60000] [--small]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from levelflow.engine.session import jobs_started

PROGRAM = """
.decl visit(u:number, p:number)
.input visit
.decl page(p:number)
.input page
.decl edge(x:number, y:number)
.input edge
.decl views(p:number, c:number)
views(p, c) :- page(p), c = count : visit(_, p).
.decl hops(y:number, d:number)
hops(y, 1) :- edge(0, y).
hops(z, d + 1) :- hops(y, d), edge(y, z), d < 6.
.decl dist(y:number, d:number)
dist(y, min d : hops(y, d)) :- hops(y, _).
.printsize views
.printsize dist
"""


def workload(rng: random.Random, visits: int, pages: int, edges: int, nodes: int) -> dict:
    """Return the input relations: visits over pages, random edges over nodes."""
    return {
        "visit": {(u, rng.randrange(pages)) for u in range(visits)},
        "page": {(p,) for p in range(pages)},
        "edge": {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)},
    }


def write_facts(path: Path, facts: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name, rows in facts.items():
        (path / f"{name}.facts").write_text("".join("\t".join(map(str, r)) + "\n"
                                                    for r in rows))


def _scratch_time(spark, pt, facts: Path, runs: int = 2) -> float:
    """Return the best from-scratch time of the same engine (auto plans)."""
    from levelflow.engine.runner import run_program

    times = []
    for _ in range(runs):  # the JVM is still warming up: the faster run is the reference
        t = time.perf_counter()
        run_program(spark, pt, facts, None, jobs=2)
        times.append(time.perf_counter() - t)
    print(f"from scratch (run_program, auto plans, best of {runs}): {min(times):.2f} s "
          f"({', '.join(f'{t:.2f}' for t in times)})")
    return min(times)


def _epoch(spark, session, rng, facts: dict, pages: int, nodes: int) -> tuple[float, dict]:
    """Commit 5 new visits and 5 new edges (one out of node 0); return the seconds and the
    aggregate tasks' jobs."""
    for k in range(5):
        row = (rng.randrange(10**9, 2 * 10**9), rng.randrange(pages))
        session.insert("visit", row)
        facts["visit"].add(row)
        # One edge out of node 0 a time: the hops above it change, and so may the minimum.
        edge = (0 if k == 0 else rng.randrange(nodes), rng.randrange(nodes))
        session.insert("edge", edge)
        facts["edge"].add(edge)
    before = jobs_started(spark)
    r = session.commit()
    jobs = jobs_started(spark) - before
    agg = {k: r.spark_jobs.get(k, 0) for k in r.strategies if k.startswith("@agg")}
    tasks = ", ".join(f"{k}={v} ({r.spark_jobs.get(k, 0)} jobs, {r.task_seconds[k]:.2f} s)"
                      for k, v in r.strategies.items())
    print(f"    epoch {r.epoch}: {r.seconds:.2f} s, {jobs} Spark jobs; {tasks}")
    return r.seconds, agg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visits", type=int, default=1_000_000)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--edges", type=int, default=60_000)
    parser.add_argument("--nodes", type=int, default=30_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--small", action="store_true", help="a quick run at 1/20 of the size")
    parser.add_argument("--mode", default="elastic", choices=("elastic", "incremental"),
                        help="incremental: never switch to a recompute (the strategy alone)")
    args = parser.parse_args()
    if args.small:
        args.visits, args.pages, args.edges, args.nodes = 50_000, 1_000, 3_000, 1_500
        args.epochs = 3

    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.session import make_session
    from levelflow.tasks import build_tasks, parse_program

    rng = random.Random(args.seed)
    facts = workload(rng, args.visits, args.pages, args.edges, args.nodes)
    total = sum(len(r) for r in facts.values())
    print(f"workload: {len(facts['visit']):,} visits over {args.pages:,} pages, "
          f"{len(facts['edge']):,} edges over {args.nodes:,} nodes: {total:,} input tuples")
    tmp = Path(tempfile.mkdtemp(prefix="levelflow-bench-agg-"))
    write_facts(tmp / "f0", facts)
    pt = build_tasks(parse_program(PROGRAM, "aggregates.dl"))
    spark = make_session(master="local[2]", shuffle_partitions=2, driver_memory="4g")
    t = time.perf_counter()
    session = IncrementalSession.bootstrap(spark, pt, tmp / "f0", mode=args.mode)
    print(f"bootstrap (epoch 0): {time.perf_counter() - t:.2f} s")
    scratch = _scratch_time(spark, pt, tmp / "f0")
    print("0. a first 10-tuple epoch (ships state to the executors; aggregates': from bootstrap)")
    first, _ = _epoch(spark, session, rng, facts, args.pages, args.nodes)
    print(f"   first epoch {first:.2f} s: {scratch / first:.1f}x faster than from scratch")
    print(f"1. {args.epochs} epochs of 10 new tuples each")
    times, jobs = [], []
    for _ in range(args.epochs):
        seconds, agg = _epoch(spark, session, rng, facts, args.pages, args.nodes)
        times.append(seconds)
        jobs.append(agg)
    median = statistics.median(times)
    ratio = scratch / median
    print(f"   median epoch {median:.2f} s; from scratch {scratch:.2f} s: {ratio:.1f}x faster "
          f"(goal >= 10x) {'PASS' if ratio >= 10 else 'FAIL'}")
    per_task = sorted({n for j in jobs for n in j.values()})
    print(f"2. Spark jobs per aggregate task per epoch: {per_task} (goal at most 1) "
          f"{'PASS' if max(per_task, default=0) <= 1 else 'FAIL'}")
    # The maintained relations equal a from-scratch evaluation's sizes.
    write_facts(tmp / "last", facts)
    from levelflow.engine.runner import run_program

    res = run_program(spark, pt, tmp / "last", None, jobs=2)
    for name in ("views", "dist"):
        assert session.size(name) == res.relation(name).count(), name
    print("   the maintained views and dist equal a from-scratch run's")
    spark.stop()


if __name__ == "__main__":
    main()
