"""The update-size table of the differential-dataflow reasoners, on one SparkSession.

For each graph (a uniform random graph and an R-MAT graph, both seeded, same nodes and edges),
each program (transitive closure, same generation) and each batch size (a share of the edges):

  Mat  materialize the rest (the edges without the batch) from scratch: the state's epoch 0
  +    insert the batch as one epoch
  -    delete it again as one epoch

with the ratios +/Mat, -/Mat and -/+ (each time the median of --repeat rounds). Goals: + and -
each below Mat for every batch of 10% or less; - within 1.5x of + at every size. After - every
relation must have its Mat size again, and after + the size of the whole graph's
materialization (the same for every batch).

    .venv/bin/python bench/bench_update_sizes.py [--nodes 1000 --edges 1000 --mode elastic]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

PROGRAMS = {
    "tc": ("path", """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
"""),
    "sg": ("sg", """
.decl edge(x:number, y:number)
.input edge
.decl sg(x:number, y:number)
sg(x, y) :- edge(p, x), edge(p, y), x != y.
sg(x, y) :- edge(a, x), sg(a, b), edge(b, y).
"""),
}
BATCHES = (0.5, 0.25, 0.1, 0.01, 0.001)
RMAT = (0.57, 0.19, 0.19, 0.05)  # the Graph500 quadrant probabilities


def random_graph(nodes: int, edges: int, seed: int) -> list[tuple[int, int]]:
    """Return `edges` distinct random edges (no self loops) between `nodes` nodes."""
    rng = np.random.default_rng(seed)
    out: set[tuple[int, int]] = set()
    while len(out) < edges:
        for a, b in rng.integers(0, nodes, size=(2 * (edges - len(out)), 2)).tolist():
            if a != b and len(out) < edges:
                out.add((a, b))
    return sorted(out)


def rmat_graph(nodes: int, edges: int, seed: int, p=RMAT) -> list[tuple[int, int]]:
    """Return `edges` distinct R-MAT edges (no self loops) between `nodes` nodes."""
    rng = np.random.default_rng(seed)
    scale = int(np.ceil(np.log2(nodes)))
    out: set[tuple[int, int]] = set()
    while len(out) < edges:
        k = 4 * (edges - len(out))
        src, dst = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
        for _ in range(scale):  # one quadrant per bit: a, b, c, d = 00, 01, 10, 11
            q = rng.choice(4, size=k, p=p)
            src, dst = src * 2 + (q >= 2), dst * 2 + (q % 2)
        for a, b in zip(src.tolist(), dst.tolist(), strict=True):
            if a < nodes and b < nodes and a != b and len(out) < edges:
                out.add((a, b))
    return sorted(out)


def write_edges(path: Path, edges) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(edges)))


def epoch(session, sign: int, batch) -> tuple[float, int]:
    """Return the wall seconds and Spark jobs of applying the batch as one epoch (+1 insert,
    -1 delete)."""
    from levelflow.engine.session import jobs_started

    jobs = jobs_started(session.spark)
    t = time.perf_counter()
    for e in batch:
        (session.insert if sign > 0 else session.remove)("edge", e)
    session.commit()
    return time.perf_counter() - t, jobs_started(session.spark) - jobs


def measure(spark, pt, out: str, edges, share: float, seed: int, tmp: Path, mode: str,
            repeat: int = 1):
    """Return (Mat, +, -) seconds (each the median of `repeat` rounds), the sizes after Mat
    and after +, the batch's size and the Spark jobs of (Mat, +, -) in the last round."""
    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.session import jobs_started

    rng = random.Random(seed)
    batch = rng.sample(edges, max(1, round(share * len(edges))))
    rest = sorted(set(edges) - set(batch))
    write_edges(tmp, rest)
    rounds = []
    for _ in range(repeat):  # each round: a fresh state, then + and - on it
        jobs, t = jobs_started(spark), time.perf_counter()
        session = IncrementalSession.bootstrap(spark, pt, tmp, mode=mode)
        mat, mat_jobs = time.perf_counter() - t, jobs_started(spark) - jobs
        mat_size = session.size(out)
        plus, plus_jobs = epoch(session, +1, batch)
        full = session.size(out)
        minus, minus_jobs = epoch(session, -1, batch)
        assert session.size(out) == mat_size, \
            f"{out}: {session.size(out)} after -, {mat_size} at Mat"
        session.close()
        rounds.append((mat, plus, minus))
    mat, plus, minus = (statistics.median(r[i] for r in rounds) for i in range(3))
    return mat, plus, minus, mat_size, full, len(batch), (mat_jobs, plus_jobs, minus_jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--edges", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mode", default="elastic", help="elastic, incremental or scratch")
    parser.add_argument("--programs", default="tc,sg")
    parser.add_argument("--graphs", default="random,rmat")
    parser.add_argument("--repeat", type=int, default=5,
                        help="rounds per batch (Mat, +, -); the table shows their medians")
    args = parser.parse_args()

    from levelflow.engine.session import make_session
    from levelflow.tasks import build_tasks, parse_program

    spark = make_session(master="local[2]", shuffle_partitions=2, driver_memory="2g")
    tmp = Path(tempfile.mkdtemp(prefix="levelflow-bench-sizes-"))
    graphs = {"random": random_graph, "rmat": rmat_graph}
    warm = build_tasks(parse_program(PROGRAMS["tc"][1], "warm.dl"))
    measure(spark, warm, "path", random_graph(50, 60, 1), 0.1, 1, tmp / "warm", args.mode)
    print(f"{args.nodes} nodes, {args.edges} edges, mode {args.mode}; seconds, wall time, "
          f"median of {args.repeat}")
    print(f"{'graph':7} {'prog':4} {'batch':>6} {'edges':>5} {'tuples':>8} {'Mat':>7} "
          f"{'+':>7} {'-':>7} {'+/Mat':>6} {'-/Mat':>6} {'-/+':>5}  jobs Mat/+/-")
    failures = []
    for gname in args.graphs.split(","):
        edges = graphs[gname](args.nodes, args.edges, args.seed)
        for pname in args.programs.split(","):
            out, text = PROGRAMS[pname]
            pt = build_tasks(parse_program(text, f"{pname}.dl"))
            fulls = set()
            for i, share in enumerate(BATCHES):
                mat, plus, minus, _, full, k, jobs = measure(spark, pt, out, edges, share,
                                                       args.seed + i, tmp / f"{gname}-{pname}-{i}",
                                                       args.mode, args.repeat)
                fulls.add(full)
                print(f"{gname:7} {pname:4} {share:6.1%} {k:5d} {full:8d} {mat:7.2f} "
                      f"{plus:7.2f} {minus:7.2f} {plus / mat:6.2f} {minus / mat:6.2f} "
                      f"{minus / plus:5.2f}  {'/'.join(map(str, jobs))}", flush=True)
                if share <= 0.1 and (plus >= mat or minus >= mat):
                    failures.append(f"{gname} {pname} {share:.1%}: + or - not below Mat")
                if minus > 1.5 * plus:
                    failures.append(f"{gname} {pname} {share:.1%}: - above 1.5x +")
            assert len(fulls) == 1, f"{gname} {pname}: + gave different sizes {fulls}"
    print("goals: + and - below Mat for batches <= 10%; - within 1.5x of +: "
          + ("PASS" if not failures else "FAIL"))
    for line in failures:
        print(f"  {line}")
    spark.stop()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
