"""levelflow at the sizes Spark is for, against DuckDB in the same run (issue 45).

    .venv/bin/python bench/bench_scale.py [--edges 1000000,3000000] [--shapes random,powerlaw]
        [--workloads reach,closure] [--sources 4] [--epochs 4] [--plans auto,distributed]
        [--master spark://host:7077]

Graphs (seeded, numpy, distinct edges, written as one TAB fact file in random order):
`random` has E/3 nodes and E uniform edges; `powerlaw` is an R-MAT graph (quadrant
probabilities .57/.19/.19/.05) over the same nodes. Workloads: `reach`, single-source
reachability from node 0; `closure`, the closure from --sources nodes (`tc(x, y)` carrying its
source). DuckDB (a bench-only dependency) runs the same recursion as a recursive CTE with UNION,
2 threads, reading the same TAB file: its read and its query are timed apart, and its count is
the check on levelflow's.

Per graph and workload: `levelflow.run` from the TAB file with every default (the session is
local[2], as the CLI's embedded one on 2 cores): its time, the recursive task's plan, rounds
and Spark jobs, and where the time went (reading the facts, the rest); the ratio is to
DuckDB's read + query. With --epochs K (reach only): a durable state bootstrapped from the
same file (its ratio to the run), K 10-edge epochs (insert, delete, ...) each with its time,
Spark jobs and strategies, then the state closed and opened again and one more epoch (the
first epoch after an open). `--plans` runs each workload once per plan forced (`auto`: every
default), a row each: the designs compared side by side (the global plan's job chain per
round, the local plan's one worker, the distributed plan's supersteps in one barrier job);
`--master` runs on that master instead of local[2]. The load average is printed first, last
and with each row: the machine is shared, so the ratios, measured in one run, are the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

REACH = """
.decl edge(x:number, y:number)
.input edge
.decl src(x:number)
src(0).
.decl reach(y:number)
reach(y) :- src(x), edge(x, y).
reach(y) :- reach(x), edge(x, y).
.printsize reach
"""
CLOSURE = """
.decl edge(x:number, y:number)
.input edge
.decl start(x:number)
{starts}
.decl tc(x:number, y:number)
tc(x, y) :- start(x), edge(x, y).
tc(x, z) :- tc(x, y), edge(y, z).
.printsize tc
"""
DUCK_REACH = """
WITH RECURSIVE reach(y) AS (
  SELECT y FROM edge WHERE x = 0
  UNION SELECT e.y FROM reach r JOIN edge e ON e.x = r.y)
SELECT count(*) FROM reach
"""
DUCK_CLOSURE = """
WITH RECURSIVE tc(x, y) AS (
  SELECT x, y FROM edge WHERE x IN ({starts})
  UNION SELECT t.x, e.y FROM tc t JOIN edge e ON e.x = t.y)
SELECT count(*) FROM tc
"""


def graph(shape: str, edges: int, seed: int = 45) -> tuple[np.ndarray, np.ndarray]:
    """Return the (x, y) columns of a distinct-edge graph of about `edges` edges, shuffled."""
    rng = np.random.default_rng(seed)
    nodes = max(edges // 3, 8)
    if shape == "random":
        x, y = rng.integers(0, nodes, edges), rng.integers(0, nodes, edges)
    else:  # R-MAT: one quadrant per bit level, node ids folded into [0, nodes)
        bits = (nodes - 1).bit_length()
        x = np.zeros(edges, np.int64)
        y = np.zeros(edges, np.int64)
        for _ in range(bits):
            u = rng.random(edges)
            x = (x << 1) | (u >= 0.76)
            y = (y << 1) | (((u >= 0.57) & (u < 0.76)) | (u >= 0.95))
        x, y = x % nodes, y % nodes
    keys = rng.permutation(np.unique(x.astype(np.int64) * nodes + y))
    return keys // nodes, keys % nodes


def load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def duck(facts: Path, queries: dict[str, str]) -> tuple[float, dict[str, tuple[float, int]]]:
    """Return (DuckDB's read of the TAB file, per query (seconds, count))."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 2")
    t0 = time.perf_counter()
    con.execute(f"CREATE TABLE edge AS SELECT * FROM read_csv('{facts}', delim='\t', "
                "header=false, columns={'x': 'BIGINT', 'y': 'BIGINT'})")
    read = time.perf_counter() - t0
    out = {}
    for name, sql in queries.items():
        t0 = time.perf_counter()
        count = con.execute(sql).fetchone()[0]
        out[name] = (time.perf_counter() - t0, count)
    con.close()
    return read, out


def lf_run(spark, program: Path, factdir: Path, plan: str = "auto"):
    """Return (seconds, reading seconds, printsize, the recursive task's plan, rounds, jobs)."""
    import levelflow
    from levelflow.engine import io_meter

    before = io_meter.snapshot()
    t0 = time.perf_counter()
    res = levelflow.run(program, factdir, spark=spark, plan=plan)
    seconds = time.perf_counter() - t0
    reading = io_meter.snapshot().since(before).reading
    stats = [s for s in res.task_stats if s is not None and s.iterations]
    task = stats[-1]
    v = res.task_names.index(task.task)
    jobs = (res.trace.extra or {}).get(v, {}).get("spark_jobs", 0)
    return seconds, reading, dict(res.printsize), task.plan, task.iterations, jobs


def epochs(spark, program: Path, factdir: Path, k: int, nodes: int, run_seconds: float
           ) -> None:
    """Bootstrap a durable state, run k 10-edge epochs, reopen it and run one more."""
    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.session import jobs_started

    state = factdir / "state"
    shutil.rmtree(state, ignore_errors=True)
    before = jobs_started(spark)
    t0 = time.perf_counter()
    s = IncrementalSession.bootstrap(spark, program, factdir, state)
    boot = time.perf_counter() - t0
    print(f"    bootstrap with a durable state: {boot:.2f} s ({boot / run_seconds:.1f}x the "
          f"run), {jobs_started(spark) - before} Spark jobs", flush=True)
    rng = np.random.default_rng(7)
    fresh = [(int(a), int(b)) for a, b in zip(rng.integers(0, nodes, 10),
                                              rng.integers(0, nodes, 10), strict=True)]

    def epoch(s, i: int, label: str) -> float:
        for e in fresh:
            (s.insert if i % 2 == 0 else s.remove)("edge", e)
        before = jobs_started(spark)
        t0 = time.perf_counter()
        r = s.commit()
        seconds = time.perf_counter() - t0
        what = "insert" if i % 2 == 0 else "delete"
        strat = ", ".join(f"{t}={v}" for t, v in r.strategies.items())
        print(f"    {label} epoch {r.epoch} ({what} 10 edges): {seconds:.3f} s, "
              f"{jobs_started(spark) - before} Spark jobs; {strat}", flush=True)
        return seconds

    warm = [epoch(s, i, "warm" if i else "first") for i in range(k)]
    s.close()
    t0 = time.perf_counter()
    s = IncrementalSession.open(spark, state)
    print(f"    open: {time.perf_counter() - t0:.2f} s", flush=True)
    after_open = epoch(s, k, "after open")
    s.close()
    median = float(np.median(warm[1:])) if len(warm) > 1 else warm[0]
    print(f"    warm epochs median {median:.3f} s; first after open {after_open:.3f} s "
          f"({after_open / median:.1f}x)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", default="1000000,3000000")
    ap.add_argument("--shapes", default="random,powerlaw")
    ap.add_argument("--workloads", default="reach,closure")
    ap.add_argument("--sources", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--plans", default="auto")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()

    from levelflow.engine.session import make_session

    print(f"load average {load_average()} on {os.cpu_count()} cores")
    spark = make_session(args.master, driver_memory=args.driver_memory)
    plans = [p for p in args.plans.split(",") if p]
    starts = list(range(args.sources))
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    programs = {"reach": (REACH, DUCK_REACH),
                "closure": (CLOSURE.format(starts="".join(f"start({s}).\n" for s in starts)),
                            DUCK_CLOSURE.format(starts=", ".join(map(str, starts))))}
    workloads = [w for w in args.workloads.split(",") if w]
    for name in workloads:
        (tmp / f"{name}.dl").write_text(programs[name][0])
    warm = tmp / "warm"  # imports and first calls, outside the figures
    warm.mkdir()
    (warm / "edge.facts").write_text("".join(f"{i}\t{i + 1}\n" for i in range(1000)))
    for name in workloads:
        lf_run(spark, tmp / f"{name}.dl", warm)
    print("| graph | edges | workload | DuckDB read + query | levelflow (task's plan) | reading "
          "| rounds | Spark jobs | levelflow / DuckDB | load |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    try:
        for shape in args.shapes.split(","):
            for size in (int(e) for e in args.edges.split(",")):
                x, y = graph(shape, size)
                pacsv.write_csv(pa.table({"x": x, "y": y}), tmp / "edge.facts",
                                pacsv.WriteOptions(include_header=False, delimiter="\t",
                                                   quoting_style="none"))
                read, queries = duck(tmp / "edge.facts", {w: programs[w][1] for w in workloads})
                for w, forced in ((w, p) for w in workloads for p in plans):
                    query, count = queries[w]
                    seconds, reading, sizes, plan, rounds, jobs = lf_run(spark, tmp / f"{w}.dl",
                                                                         tmp, forced)
                    got = next(iter(sizes.values()))
                    assert got == count, (shape, size, w, got, count)
                    print(f"| {shape} | {len(x):,} | {w} ({count:,}) | {read:.2f} + "
                          f"{query:.2f} s | {seconds:.2f} s ({plan}) | {reading:.2f} s | "
                          f"{rounds} | {jobs} | {seconds / (read + query):.1f}x | "
                          f"{load_average()} |", flush=True)
                    if args.epochs and w == "reach" and forced == plans[0]:
                        epochs(spark, tmp / f"{w}.dl", tmp, args.epochs,
                               int(max(x.max(), y.max())) + 1, seconds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average {load_average()}")


if __name__ == "__main__":
    main()
