"""`levelflow serve` over HTTP against the in-process session it wraps.

Workload: the transitive closure of bench_incremental's layered DAG (>= 1,000,000 `path`
tuples at the default size), bootstrapped into a state. Measured on one SparkSession, strategy
as `serve`'s default (elastic):
  1. a 10-edge epoch committed in process with IncrementalSession.commit (median of --repeat)
  2. a 10-edge epoch POSTed to the server (median of --repeat), and the ratio to 1
  3. a stream of --stream one-fact epochs POSTed one after the other: epochs per second
Every epoch is durable (a segment per changed relation); compaction runs after each answer.

    .venv/bin/python bench/bench_serve.py [--layers 12 --width 150 --degree 6]
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_incremental import (  # noqa: E402
    fresh_edges,
    layered_workload,
    workload_args,
)


def post(conn: http.client.HTTPConnection, body: str) -> dict:
    """Return the JSON answer to POST /epoch on a kept-alive connection."""
    conn.request("POST", "/epoch", body)
    resp = conn.getresponse()
    text = resp.read().decode()
    assert resp.status == 200, text
    return json.loads(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    workload_args(parser)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stream", type=int, default=50)
    args = parser.parse_args()

    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.session import make_session
    from levelflow.server import EpochService, make_server

    rng, edges, tmp = layered_workload(args, "levelflow-bench-serve-")
    spark = make_session(master="local[2]", shuffle_partitions=2, driver_memory="2g")
    try:
        s = IncrementalSession.bootstrap(spark, tmp / "tc.dl", tmp / "f0", tmp / "state")
        used = set(edges)

        def batch(k):
            new = fresh_edges(rng, used, k, args.layers, args.width)
            used.update(new)
            return new

        inproc = []
        for _ in range(args.repeat):
            for e in batch(10):
                s.insert("edge", e)
            t = time.perf_counter()
            s.commit()
            inproc.append(time.perf_counter() - t)
        server = make_server(EpochService(s, str(tmp / "state")), "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=600)
        http_s, jobs = [], []
        for _ in range(args.repeat):
            body = "".join(f"+edge({a},{b})\n" for a, b in batch(10))
            t = time.perf_counter()
            jobs.append(post(conn, body)["spark_jobs"])
            http_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        for a, b in batch(args.stream):
            post(conn, f"+edge({a},{b})\n")
        stream = time.perf_counter() - t
        a, h = statistics.median(inproc), statistics.median(http_s)
        print(f"10-edge epoch in process (session.commit): {a:.2f} s (median of {args.repeat})")
        print(f"10-edge epoch over HTTP (POST /epoch):     {h:.2f} s (median of {args.repeat}; "
              f"{statistics.median(jobs):.0f} Spark jobs); {h / a:.2f}x the in-process time")
        print(f"stream of {args.stream} one-fact epochs over HTTP: {args.stream / stream:.2f} "
              f"epochs/s ({stream / args.stream:.2f} s each)")
        server.shutdown()
        s.close()
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
