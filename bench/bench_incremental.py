"""Incremental maintenance against from-scratch evaluation, on one SparkSession.

Workload: transitive closure of a layered DAG (W nodes per layer, D random edges from each node
to the next layer), >= 1,000,000 derived `path` tuples at the default size, plus a non-recursive
`cyclic` task. The recursive task runs its epochs where its state lives (one Spark job per
epoch, engine/incremental/backends/worker/dred_job.py). Measured, each as a ratio to a
from-scratch run of the
same engine (run_program, auto plans), with the defaults (elastic switch on):
  1. a 10-edge insertion (median of 9)          goal: >= 5x faster than from scratch
  2. a 10-edge deletion (median of 9)           goal: within 1.5x of the insertion
  3. an update of 10% of the edges (mixed)      goal: no slower than 1.25x from scratch
  4. Zhao et al.'s elastic workload: an initial epoch, 6 small updates (10 edges), 1 large
     (10%), 4 small, 1 large; the total                     goal: <= 4x one from-scratch run
  5. Spark jobs per epoch of the closure task   goal: <= 1 (+1 for the durable write)
Every epoch prints its time, the Spark jobs of each task and of the whole epoch, the strategy of
each task and whether it ran arranged. 5 also commits one epoch into a state directory.
With --large, 1 runs again on a closure of >= 10,000,000 tuples (goal: >= 10x).

    .venv/bin/python bench/bench_incremental.py [--layers 12 --width 150 --degree 6] [--large]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from levelflow.engine.session import jobs_started

PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl cyclic(x:number)
cyclic(x) :- path(x, x).
.output path
"""


def layered_edges(rng: random.Random, layers: int, width: int, degree: int) -> set[tuple]:
    """Return a layered DAG: node l*width+i has `degree` edges into layer l+1."""
    edges = set()
    for layer in range(layers - 1):
        for i in range(width):
            u = layer * width + i
            for j in rng.sample(range(width), degree):
                edges.add((u, (layer + 1) * width + j))
    return edges


def closure_size(edges: set[tuple], nodes: int) -> int:
    """Return the number of transitive-closure pairs (Python ints as bitsets)."""
    succ: dict[int, list[int]] = {}
    for u, v in edges:
        succ.setdefault(u, []).append(v)
    reach = [0] * nodes
    for u in sorted(succ, reverse=True):  # layers are numbered in topological order
        bits = 0
        for v in succ[u]:
            bits |= (1 << v) | reach[v]
        reach[u] = bits
    return sum(bin(b).count("1") for b in reach)


def fresh_edges(rng, edges, k, layers, width) -> list[tuple]:
    """Return k new layer-to-next-layer edges not in `edges`."""
    out: set[tuple] = set()
    while len(out) < k:
        layer = rng.randrange(layers - 1)
        e = (layer * width + rng.randrange(width), (layer + 1) * width + rng.randrange(width))
        if e not in edges:
            out.add(e)
    return sorted(out)


def write_facts(path: Path, edges) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(edges)))


def workload_args(parser: argparse.ArgumentParser) -> None:
    """Add the layered workload's options (its size and seed) to a bench's parser."""
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=150)
    parser.add_argument("--degree", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)


def layered_workload(args, prefix: str) -> tuple[random.Random, set, Path]:
    """Return (rng, edges, a temp dir holding f0/edge.facts and tc.dl) for the parsed options,
    and say what the workload is."""
    rng = random.Random(args.seed)
    edges = layered_edges(rng, args.layers, args.width, args.degree)
    print(f"workload: layered TC, {len(edges)} edges, "
          f"{closure_size(edges, args.layers * args.width)} path tuples")
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    write_facts(tmp / "f0", edges)
    (tmp / "tc.dl").write_text(PROGRAM)
    return rng, edges, tmp


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _epoch(spark, s, inserts=(), removes=()):
    """Commit one epoch; print and return (seconds, the path task's Spark jobs)."""
    for e in inserts:
        s.insert("edge", e)
    for e in removes:
        s.remove("edge", e)
    before = jobs_started(spark)
    r = s.commit()
    jobs = jobs_started(spark) - before
    tasks = ", ".join(f"{k}={v}" + ("/arranged" if k in r.arranged else "") +
                      f" ({r.spark_jobs.get(k, 0)} jobs)" for k, v in r.strategies.items())
    d = r.deltas.get("path")
    change = f"path +{d.added_rows} -{d.removed_rows}" if d else "path unchanged"
    print(f"    epoch {r.epoch}: {r.seconds:.2f} s, {jobs} Spark jobs, {change}; {tasks}")
    return r.seconds, r.spark_jobs.get("path", 0)


def _scratch_time(spark, pt, facts, derived, runs=2) -> float:
    """Return the best from-scratch time of the same engine (auto plans)."""
    from levelflow.engine.runner import run_program

    times = []
    for _ in range(runs):  # the JVM is still warming up: the faster run is the reference
        t = time.perf_counter()
        res = run_program(spark, pt, facts, None, jobs=2)
        times.append(time.perf_counter() - t)
        assert res.task_stats[pt.task_of("path").id].rows["path"] == derived
    print(f"from scratch, the same engine (run_program, auto plans, best of {runs}): "
          f"{min(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)}); ratios are against it")
    return min(times)


def _insertion(spark, pt, tmp, args, layers, width, goal) -> None:
    """Measure a 10-edge insertion on a fresh closure of the given size against scratch."""
    from levelflow.engine.incremental import IncrementalSession

    rng = random.Random(args.seed)
    edges = layered_edges(rng, layers, width, args.degree)
    derived = closure_size(edges, layers * width)
    print(f"workload: layered TC, {layers} layers x {width} nodes, {len(edges)} edges, "
          f"{derived:,} path tuples")
    write_facts(tmp / f"f{width}", edges)
    scratch = _scratch_time(spark, pt, tmp / f"f{width}", derived)
    s = IncrementalSession.bootstrap(spark, pt, tmp / f"f{width}", switch=args.switch)
    first = fresh_edges(rng, edges, 10, layers, width)
    _epoch(spark, s, inserts=first)  # the session's first epoch ships the state
    edges |= set(first)
    print(f"1. insert 10 edges, {REPEAT} times")
    t, _ = _repeated(spark, s, rng, edges, layers, width, inserting=True)
    assert s.size("path") == closure_size(edges, layers * width)
    print(f"   speed-up vs from scratch: {scratch / t:.1f}x (goal >= {goal}x) "
          f"{verdict(scratch / t >= goal)}")
    s.close()


REPEAT = 9  # 10-edge epochs measured: their median is the figure (of 5, one epoch of
# 0.2-0.25 s among 0.10-0.16 s moved the deletion/insertion ratio by up to 0.3)


def _repeated(spark, s, rng, edges: set, layers: int, width: int, inserting: bool):
    """Run REPEAT epochs of 10 new edges (or 10 removed), updating `edges`; return the median
    seconds and the path task's Spark jobs of the last."""
    times = []
    for _ in range(REPEAT):
        if inserting:
            change = fresh_edges(rng, edges, 10, layers, width)
            seconds, jobs = _epoch(spark, s, inserts=change)
            edges |= set(change)
        else:
            change = rng.sample(sorted(edges), 10)
            seconds, jobs = _epoch(spark, s, removes=change)
            edges -= set(change)
        times.append(seconds)
    median = statistics.median(times)
    print(f"   median {median:.2f} s ({', '.join(f'{t:.2f}' for t in times)})")
    return median, jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workload_args(parser)
    parser.add_argument("--switch", type=float, default=0.2)
    parser.add_argument("--large", action="store_true",
                        help="also a 10-edge insertion on >= 10M tuples (14 x 420 nodes)")
    args = parser.parse_args()

    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.session import make_session
    from levelflow.tasks import build_tasks, parse_program

    rng = random.Random(args.seed)
    layers, width = args.layers, args.width
    edges = layered_edges(rng, layers, width, args.degree)
    nodes = layers * width
    derived = closure_size(edges, nodes)
    print(f"workload: layered TC, {layers} layers x {width} nodes, {len(edges)} edges, "
          f"{derived:,} path tuples")
    tmp = Path(tempfile.mkdtemp(prefix="levelflow-bench-inc-"))
    write_facts(tmp / "f0", edges)
    pt = build_tasks(parse_program(PROGRAM, "tc_layered.dl"))
    spark = make_session(master="local[2]", shuffle_partitions=2, driver_memory="4g")
    t = time.perf_counter()
    session = IncrementalSession.bootstrap(spark, pt, tmp / "f0", switch=args.switch)
    print(f"bootstrap (epoch 0, from scratch with ranks and counts): "
          f"{time.perf_counter() - t:.2f} s")
    scratch = _scratch_time(spark, pt, tmp / "f0", derived)
    current = set(edges)

    def check():
        assert session.size("path") == closure_size(current, nodes)

    print("0. insert 10 edges (the first epoch of a session ships the state to the executors)")
    new = fresh_edges(rng, current, 10, layers, width)
    _epoch(spark, session, inserts=new)
    current |= set(new)
    check()
    print(f"1. insert 10 edges, {REPEAT} times")
    t_ins, jobs_ins = _repeated(spark, session, rng, current, layers, width, inserting=True)
    check()
    r1 = scratch / t_ins
    print(f"   speed-up vs from scratch: {r1:.1f}x (goal >= 5x) {verdict(r1 >= 5)}")
    print(f"2. remove 10 edges, {REPEAT} times")
    t_del, jobs_del = _repeated(spark, session, rng, current, layers, width, inserting=False)
    check()
    r2 = t_del / t_ins
    print(f"   deletion / insertion: {r2:.2f}x (goal <= 1.5x) {verdict(r2 <= 1.5)}; "
          f"speed-up vs from scratch: {scratch / t_del:.1f}x")
    k = len(current) // 10
    gone = rng.sample(sorted(current), k // 2)
    new = fresh_edges(rng, current, k - k // 2, layers, width)
    print(f"3. update 10% of the edges ({k}: {len(gone)} removed, {len(new)} added)")
    t_big, jobs_big = _epoch(spark, session, inserts=new, removes=gone)
    current = (current - set(gone)) | set(new)
    check()
    r3 = t_big / scratch
    print(f"   update / from scratch: {r3:.2f}x (goal <= 1.25x) {verdict(r3 <= 1.25)}")
    session.close()

    print("4. elastic workload: initial + 6 small + 1 large + 4 small + 1 large")
    write_facts(tmp / "f4", current)
    t = time.perf_counter()
    s4 = IncrementalSession.bootstrap(spark, pt, tmp / "f4", switch=args.switch)
    total = time.perf_counter() - t
    print(f"    epoch 0: {total:.2f} s (initial, from scratch)")
    path_jobs = []
    for size in ["small"] * 6 + ["large"] + ["small"] * 4 + ["large"]:
        k = 10 if size == "small" else len(current) // 10
        gone = rng.sample(sorted(current), k // 2)
        new = fresh_edges(rng, current, k - k // 2, layers, width)
        seconds, jobs = _epoch(spark, s4, inserts=new, removes=gone)
        total += seconds
        path_jobs.append(jobs)
        current = (current - set(gone)) | set(new)
    assert s4.size("path") == closure_size(current, nodes)
    r4 = total / scratch
    print(f"   total {total:.2f} s = {r4:.2f}x one from-scratch run (goal <= 4x) "
          f"{verdict(r4 <= 4)}")
    s4.close()

    print("5. Spark jobs per epoch of the closure task, and with a durable write")
    jobs = [jobs_ins, jobs_del, jobs_big, *path_jobs[1:]]  # the first epoch ships the state
    state = tmp / "state"
    s5 = IncrementalSession.bootstrap(spark, pt, tmp / "f4", statedir=state, switch=args.switch)
    for _ in range(3):
        new = fresh_edges(rng, current, 10, layers, width)
        before = jobs_started(spark)
        seconds, path = _epoch(spark, s5, inserts=new)
        current |= set(new)
    durable = jobs_started(spark) - before
    s5.close()
    # At most one: an epoch the driver applies (its state held there) runs none.
    print(f"   closure task, per epoch: {sorted(set(jobs))} (goal <= 1) {verdict(max(jobs) <= 1)}; "
          f"a durable epoch: {path} for the closure task, {durable} in all ({seconds:.2f} s)")
    if args.large:
        print("1L. the 10-edge insertion on >= 10,000,000 tuples")
        _insertion(spark, pt, tmp, args, 14, 420, 10)
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
