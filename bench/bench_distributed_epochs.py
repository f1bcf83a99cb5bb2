"""10-edge epochs of a recursive task kept under the distributed plan (issue 45, item 3).

    .venv/bin/python bench/bench_distributed_epochs.py [--edges 30000] [--epochs 4]
        [--designs resident,shipped,spark] [--master local[2]] [--workload reach|closure]

A random graph (bench_scale's: E/3 nodes, E edges, cycles) and single-source reachability
(`reach`) or the closure from 4 sources (`closure`). Per design, a state is bootstrapped
(`IncrementalSession.bootstrap`, no driver plan), then --epochs 10-edge epochs alternate
insert and delete; each prints its seconds, its Spark jobs and the task's strategy, and the
maintained relation is checked against a from-scratch run after every epoch. Designs:
`spark` the path such a task took before (the global plan's bootstrap, DRed as a chain of
Spark jobs: `arranged=False`, which the elastic switch stops and recomputes; `spark-dred`
the same with the switch off); `resident` the distributed plan, each partition's copies kept
in its Python worker between epochs (one barrier job an epoch); `shipped` the distributed
plan with the copies shipped from the state every epoch (the fallback when a worker lost
them); `arranged` the reference a task one worker holds gets (auto: the local or partitioned
plan, its epoch one job in the share that holds its state). The ratio printed is each
design's median epoch to the `spark` design's, same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import CLOSURE, REACH, graph, load_average  # noqa: E402


def scratch_count(spark, program: Path, factdir: Path) -> int:
    """Return the program's printed size evaluated from scratch (the check)."""
    import levelflow

    return next(iter(dict(levelflow.run(program, factdir, spark=spark).printsize).values()))


def design(spark, name: str, program: Path, factdir: Path, k: int, nodes: int) -> list[float]:
    """Bootstrap a state under design `name`, run k 10-edge epochs; return their seconds."""
    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.session import jobs_started

    state = factdir / f"state-{name}"
    shutil.rmtree(state, ignore_errors=True)
    options = {"driver_rows": None}
    if name == "arranged":
        pass  # auto: the local or partitioned plan, one job in the share holding the state
    elif name.startswith("spark"):
        options["arranged"] = False
        if name == "spark-dred":  # the elastic switch off: DRed's job chain to its end
            options["mode"] = "incremental"
    else:
        from levelflow.engine.incremental.backends.worker import dist_job

        options["plan"] = "distributed"
        dist_job.SHIP_ALWAYS = name == "shipped"
    before = jobs_started(spark)
    t0 = time.perf_counter()
    s = IncrementalSession.bootstrap(spark, program, factdir, state, **options)
    print(f"  {name}: bootstrap {time.perf_counter() - t0:.2f} s, "
          f"{jobs_started(spark) - before} Spark jobs", flush=True)
    rng = np.random.default_rng(7)
    fresh = [(int(a), int(b)) for a, b in zip(rng.integers(0, nodes, 10),
                                              rng.integers(0, nodes, 10), strict=True)]
    edges = factdir / "edge.facts"
    text = edges.read_text()
    out = []
    try:
        for i in range(k):
            for e in fresh:
                (s.insert if i % 2 == 0 else s.remove)("edge", e)
            before = jobs_started(spark)
            t0 = time.perf_counter()
            r = s.commit()
            seconds = time.perf_counter() - t0
            jobs = jobs_started(spark) - before
            out.append(seconds)
            got = sum(s.snap.rows[n] for n in ("reach", "tc") if n in s.snap.rows)
            check = factdir / "check"
            check.mkdir(exist_ok=True)
            now = text + "".join(f"{a}\t{b}\n" for a, b in fresh) if i % 2 == 0 else text
            (check / "edge.facts").write_text(now)
            want = scratch_count(spark, program, check)
            strat = ", ".join(f"{t}={v}" for t, v in r.strategies.items())
            print(f"  {name}: epoch {r.epoch} ({'insert' if i % 2 == 0 else 'delete'} 10 "
                  f"edges): {seconds:.3f} s, {jobs} Spark jobs; {strat}; "
                  f"{'ok' if got == want else f'WRONG {got} != {want}'}", flush=True)
    finally:
        s.close()
        if name in ("resident", "shipped"):
            dist_job.SHIP_ALWAYS = False
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=30_000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--designs", default="spark,shipped,resident")
    ap.add_argument("--workload", default="reach", choices=("reach", "closure"))
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()

    from levelflow.engine.session import make_session

    print(f"load average {load_average()} on {os.cpu_count()} cores")
    spark = make_session(args.master, driver_memory="2g")
    tmp = Path(tempfile.mkdtemp(prefix="bench-dist-epochs-"))
    try:
        text = REACH if args.workload == "reach" else \
            CLOSURE.format(starts="".join(f"start({s}).\n" for s in range(4)))
        program = tmp / "p.dl"
        program.write_text(text)
        x, y = graph("random", args.edges)
        pacsv.write_csv(pa.table({"x": x, "y": y}), tmp / "edge.facts",
                        pacsv.WriteOptions(include_header=False, delimiter="\t",
                                           quoting_style="none"))
        nodes = int(max(x.max(), y.max())) + 1
        print(f"{args.workload} over {len(x):,} edges, {nodes:,} nodes, master {args.master}")
        medians = {}
        for name in (d for d in args.designs.split(",") if d):
            medians[name] = float(np.median(design(spark, name, program, tmp, args.epochs,
                                                   nodes)))
        ref = medians.get("spark")
        for name, m in medians.items():
            ratio = f" ({m / ref:.2f}x spark)" if ref else ""
            print(f"{name}: median epoch {m:.3f} s{ratio}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average {load_average()}")


if __name__ == "__main__":
    main()
