"""One worker against two on a standalone Spark cluster (issue 45: 2 workers faster than 1).

    .venv/bin/python bench/bench_cluster.py [--edges 10000000] [--shape random]
        [--plans auto,distributed] [--reps 3] [--worker-memory 6g]

A Spark standalone master and K workers of one core each start on 127.0.0.1 from the pyspark
installation (K = 1, then 2, alternated --reps times: the machine is shared). On each cluster
a driver process (this script with --on) runs bench_scale's reachability over the same graph
(a TAB file, --shape and --edges as there) with each --plans plan forced, after a warm-up run
over 1,000 edges under the distributed plan, so that the executors' Python workers are up (on
the cluster auto distributes the 10M-edge task). Per run: seconds, the recursive task's plan,
its rounds and Spark jobs, and the seconds reading the facts. The figure is the median run
with 2 workers against the median with 1, per plan. The load average is printed with every
row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import REACH, graph, lf_run, load_average  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive_workers(ui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
            return sum(w.get("state") == "ALIVE" for w in json.load(r).get("workers", []))
    except OSError:
        return 0


class Cluster:
    """A standalone master and `workers` one-core workers, stopped on exit."""

    def __init__(self, workers: int, memory: str, logs: Path) -> None:
        import pyspark

        home = Path(pyspark.__file__).resolve().parent
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_LOG_DIR=str(logs))
        port, ui = free_port(), free_port()
        spark_class = str(home / "bin" / "spark-class")
        self.url = f"spark://127.0.0.1:{port}"
        self.procs = [subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui)], env=env, start_new_session=True,
            stdout=open(logs / "master.log", "w"), stderr=subprocess.STDOUT)]
        for w in range(workers):
            self.procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--host",
                 "127.0.0.1", "--cores", "1", "--memory", memory, "--webui-port",
                 str(free_port()), "--work-dir", str(logs / f"work{w}")], env=env,
                start_new_session=True, stdout=open(logs / f"worker{w}.log", "w"),
                stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 120
        while alive_workers(ui) < workers:
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the cluster did not come up; logs in {logs}")
            time.sleep(0.3)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait(5)


def on_cluster(master: str, workdir: Path, plans: list[str], executor_memory: str) -> None:
    """The driver process: one warm-up and one measured run per plan, a JSON line each."""
    from levelflow.engine.session import make_session

    spark = make_session(master, driver_memory="4g",
                         extra={"spark.executor.memory": executor_memory})
    # Warm executors: their Python workers started, their JVMs past the first jobs' JIT.
    lf_run(spark, workdir / "reach.dl", workdir / "warm", "distributed")
    for plan in plans:
        seconds, reading, sizes, got, rounds, jobs = lf_run(spark, workdir / "reach.dl",
                                                            workdir, plan)
        print(json.dumps({"plan": plan, "seconds": seconds, "reading": reading,
                          "reach": sizes["reach"], "task_plan": got, "rounds": rounds,
                          "jobs": jobs}), flush=True)
    spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=int, default=10_000_000)
    ap.add_argument("--shape", default="random")
    ap.add_argument("--plans", default="auto")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--worker-memory", default="6g")
    ap.add_argument("--on", help=argparse.SUPPRESS)  # the driver process: a master URL
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    plans = [p for p in args.plans.split(",") if p]
    executor_memory = f"{max(int(args.worker_memory[:-1]) - 1, 1)}{args.worker_memory[-1]}"
    if args.on:
        on_cluster(args.on, Path(args.workdir), plans, executor_memory)
        return
    print(f"load average {load_average()} on {os.cpu_count()} cores")
    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    try:
        (tmp / "reach.dl").write_text(REACH)
        (tmp / "warm").mkdir()
        (tmp / "warm" / "edge.facts").write_text("".join(f"{i}\t{i + 1}\n" for i in range(1000)))
        x, y = graph(args.shape, args.edges)
        pacsv.write_csv(pa.table({"x": x, "y": y}), tmp / "edge.facts",
                        pacsv.WriteOptions(include_header=False, delimiter="\t",
                                           quoting_style="none"))
        print(f"{args.shape} graph, {len(x):,} edges; workers of 1 core and "
              f"{args.worker_memory} each")
        print("| workers | plan | seconds | task's plan | rounds | Spark jobs | reading | load |")
        print("| ---: | --- | ---: | --- | ---: | ---: | ---: | --- |")
        times: dict[tuple[int, str], list[float]] = {}
        for _ in range(args.reps):
            for workers in (1, 2):
                logs = tmp / f"logs{workers}"
                shutil.rmtree(logs, ignore_errors=True)
                logs.mkdir()
                cluster = Cluster(workers, args.worker_memory, logs)
                try:
                    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
                    out = subprocess.run(
                        [sys.executable, __file__, "--on", cluster.url, "--workdir", str(tmp),
                         "--plans", args.plans, "--worker-memory", args.worker_memory],
                        env=env, capture_output=True, text=True, check=False)
                finally:
                    cluster.stop()
                if out.returncode:
                    sys.exit(f"the driver failed ({workers} workers):\n{out.stderr[-3000:]}")
                for line in out.stdout.splitlines():
                    r = json.loads(line)
                    times.setdefault((workers, r["plan"]), []).append(r["seconds"])
                    print(f"| {workers} | {r['plan']} | {r['seconds']:.2f} | {r['task_plan']} "
                          f"| {r['rounds']} | {r['jobs']} | {r['reading']:.2f} | "
                          f"{load_average()} |", flush=True)
        for plan in plans:
            one = statistics.median(times[(1, plan)])
            two = statistics.median(times[(2, plan)])
            verdict = "PASS" if two < one else "FAIL"
            print(f"{plan}: 1 worker {one:.2f} s, 2 workers {two:.2f} s: 2 workers take "
                  f"{two / one:.2f}x the time of 1 (goal < 1): {verdict}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average {load_average()}")


if __name__ == "__main__":
    main()
