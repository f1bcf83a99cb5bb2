"""`state check` without Spark: the driver's verification against the Spark scan it replaced.

Run: .venv/bin/python bench/bench_state_check.py [--rows N] [--parts P]
Large: a stored relation of N rows (default 10,000,000: `path(x, y)` with its `_it` ranks)
and a symbol relation of N/10 rows (`named(s, t)`), each written by Spark in P part files as a
bootstrap writes them, their per-file rows and checksums recorded by Spark's own scan
(integrity.scan, the reference). Printed: the seconds integrity.verify takes in the driver
(pyarrow + numpy: `state check` now) and as the one Spark job `state check` used to run, and
their ratio; both must find every file whole (the driver's hashes agree with Spark's).
Small: a 4-epoch state of examples/tc (306 path tuples, bootstrap + 3 updates), then
`levelflow state check` as a fresh process (median of 3) against `levelflow --help` (the
CLI's own start, the floor) in the same run; goal: at most 2 s.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TC = ROOT / "examples" / "tc"


def stored_items(spark, tmp: Path, rows: int, parts: int) -> list:
    """Return the two relations written by Spark under tmp, as a manifest records them."""
    import pyarrow as pa

    from levelflow.engine.incremental.state.integrity import Stored, part_files, scan

    shapes = {
        "path": (rows, ["id % 1000003 AS c0", "(id * 7919) % 1000003 AS c1", "id % 17 AS _it"],
                 pa.schema([("c0", pa.int64()), ("c1", pa.int64()), ("_it", pa.int64())])),
        "named": (rows // 10, ["concat('node-', id % 50021) AS c0",
                               "concat('a longer node name, ', id) AS c1", "id % 3 AS _cnt"],
                  pa.schema([("c0", pa.string()), ("c1", pa.string()), ("_cnt", pa.int64())])),
    }
    items = []
    for name, (n, select, schema) in shapes.items():
        path = tmp / "rel" / name
        spark.range(n, numPartitions=parts).selectExpr(*select) \
            .write.parquet(str(path))
        items.append(Stored(f"relation {name}", path, schema, n, None, None))
    found = scan(spark, items)  # Spark's own sums: what a commit records
    out = []
    for i, item in enumerate(items):
        sizes = part_files(item.path)
        files = {f: [sizes[f], *found[i].get(f, (0, "0"))] for f in sizes}
        total = f"{sum(int(v[2], 16) for v in files.values()):x}"
        out.append(Stored(item.label, item.path, item.schema, item.rows, total, files))
    return out


def timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def large(spark, rows: int, parts: int, tmp: Path) -> None:
    """Time the driver's verify against the Spark job's on a large state's relations."""
    from levelflow.engine.incremental.state import integrity

    items = stored_items(spark, tmp, rows, parts)
    here, found_here = timed(lambda: integrity.verify(items))
    real = integrity.HERE_ROWS
    integrity.HERE_ROWS = -1  # every relation Spark's, as `state check` had it
    try:
        integrity.verify(items, spark)  # a first job warms the JVM's code
        there, found_there = timed(lambda: integrity.verify(items, spark))
    finally:
        integrity.HERE_ROWS = real
    print(f"large: {rows:,} path rows + {rows // 10:,} symbol rows in {parts} part files each")
    print(f"  driver (pyarrow + numpy) {here:6.2f} s, whole: {not found_here}")
    print(f"  Spark job (reference)    {there:6.2f} s, whole: {not found_there}")
    print(f"  driver / Spark: {here / there:.2f}x (goal: at most 1.0)")
    if found_here or found_there:
        print(f"  FAIL: {(found_here or found_there)[0]}")


def small(spark, tmp: Path) -> None:
    """Time `levelflow state check` of a 4-epoch, 306-tuple state as a fresh process."""
    from levelflow.engine.incremental import IncrementalSession

    s = IncrementalSession.bootstrap(spark, TC / "program.dl", TC / "facts", tmp / "st")
    for edge in ((21, 22), (30, 31), (31, 1)):
        s.insert("edge", edge)
        s.commit()
    s.close()
    cli = [sys.executable, "-m", "levelflow"]
    env_path = {"PYTHONPATH": str(ROOT / "src")}

    def seconds(*argv) -> float:
        t = time.perf_counter()
        done = subprocess.run([*cli, *argv], capture_output=True, text=True,
                              env={**env_path, "PATH": "/usr/bin:/bin"})
        took = time.perf_counter() - t
        assert done.returncode == 0, done.stderr
        return took

    check = statistics.median(seconds("state", "check", tmp / "st") for _ in range(3))
    floor = statistics.median(seconds("--help") for _ in range(3))
    print(f"small: `levelflow state check` of 4 epochs, 306 path tuples: {check:.2f} s "
          f"(goal: at most 2 s); `levelflow --help` {floor:.2f} s; ratio {check / floor:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--skip-small", action="store_true")
    args = parser.parse_args()

    from levelflow.engine.session import make_session

    tmp = Path(tempfile.mkdtemp(prefix="levelflow-bench-check-"))
    spark = make_session(master="local[2]", shuffle_partitions=2, driver_memory="2g")
    try:
        large(spark, args.rows, args.parts, tmp / "large")
        if not args.skip_small:
            small(spark, tmp / "small")
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
