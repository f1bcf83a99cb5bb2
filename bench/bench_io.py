"""Time reading facts against pyarrow's own readers, and one-row micro-batches through a stream.

Run: .venv/bin/python bench/bench_io.py [--rows N] [--batches K]
Reading: one edge table of N rows (default 10,000,000). First the driver's read of the TAB
fact file (facts.fact_table: read and checked by engine/fact_reader.py, made distinct) in
rows/s, against pyarrow's CSV reader parsing the same file into int64 columns (the reference;
goal >= 3M rows/s). Then `levelflow.run` of a program that reads the table and counts it
(`.printsize edge`), from the TAB file, from a Parquet file (`IO=parquet`, read in the driver,
engine/parquet_reader.py; goal >= 10M rows/s) and from a DataFrame computed in Spark (the same
rows), each in rows/s with its ratio to pyarrow's reader of that format (read_csv, read_table)
and the time `run` reports for reading and shipping. The machine's load average is printed
first: the ratios are what to compare across runs on a shared machine.
Streaming: K one-row micro-batches of a file-source stream applied by levelflow.streaming to
a transitive closure, the mean latency per epoch (the foreachBatch call), against the same
one-row change applied by `session.insert` + `commit` (the reference), in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

import levelflow
from levelflow.engine import io_meter
from levelflow.engine.facts import fact_table
from levelflow.engine.incremental.session import IncrementalSession
from levelflow.engine.session import make_session
from levelflow.streaming import batch_function

READ = """
.decl edge(x:number, y:number)
.input edge{options}
.printsize edge
"""
TC = Path(__file__).parent.parent / "examples" / "tc"
# Row i of the edge table, V = N / 4 nodes: x = i mod V, y = (i div V + i * A) mod V, the
# same in numpy and in Spark.
A = 7_919


def edge_columns(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the x and y columns of the edge table (distinct rows, out-degree 4)."""
    ids = np.arange(rows, dtype=np.int64)
    nodes = max(rows // 4, 8)
    return ids % nodes, (ids // nodes + ids * A) % nodes


def edge_frame(spark, rows: int):
    """Return the edge table as a DataFrame computed in Spark (no file behind it)."""
    import pyspark.sql.functions as F

    nodes = max(rows // 4, 8)
    i = F.col("id")
    return spark.range(rows).select((i % nodes).alias("x"),
                                    ((F.floor(i / nodes) + i * A) % nodes).alias("y"))


def timed_run(spark, program: Path, factdir: Path, **options) -> tuple[float, int, object]:
    """Return (seconds, size of edge, the reading and shipping seconds) of one levelflow.run."""
    before, t0 = io_meter.snapshot(), time.perf_counter()
    result = levelflow.run(program, factdir, spark=spark, **options)
    return time.perf_counter() - t0, result.printsize["edge"], io_meter.snapshot().since(before)


def best(runs: int, f) -> float:
    """Return the least seconds of `runs` calls of f (the machine is shared)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def rate(rows: int, seconds: float) -> str:
    """Return rows/s in millions."""
    return f"{rows / seconds / 1e6:.2f}M rows/s"


def bench_read(spark, rows: int, tmp: Path) -> None:
    """Print the driver's read and the three runs against pyarrow's readers."""
    from levelflow.tasks.ast import Decl

    x, y = edge_columns(rows)
    table = pa.table({"x": x, "y": y})
    text_file, parquet_file = tmp / "edge.facts", tmp / "edge.parquet"
    pacsv.write_csv(table, text_file,
                    pacsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none"))
    pq.write_table(table, parquet_file)
    del table, x, y
    int64 = {"x": pa.int64(), "y": pa.int64()}
    t_csv = best(2, lambda: pacsv.read_csv(
        text_file, pacsv.ReadOptions(column_names=["x", "y"]),
        pacsv.ParseOptions(delimiter="\t"), pacsv.ConvertOptions(column_types=int64)))
    t_pq = best(2, lambda: pq.read_table(parquet_file))
    decl = Decl("edge", ("x", "y"), ("number", "number"))
    t_read = best(2, lambda: fact_table(text_file, decl, "\t"))
    print(f"reading {rows:,} edge rows in the driver:", flush=True)
    print(f"  pyarrow read_csv (reference): {t_csv:.2f} s, {rate(rows, t_csv)}")
    print(f"  pyarrow read_table (Parquet reference): {t_pq:.2f} s, {rate(rows, t_pq)}")
    print(f"  fact_table (read, checked, distinct): {t_read:.2f} s, {rate(rows, t_read)}; "
          f"ratio to read_csv {t_read / t_csv:.2f}", flush=True)

    text, parquet = tmp / "text.dl", tmp / "parquet.dl"
    text.write_text(READ.format(options=""))
    parquet.write_text(READ.format(options="(IO=parquet)"))
    warm = tmp / "warm"  # the JVM's first jobs and Python workers, paid before any timing
    warm.mkdir()
    (warm / "edge.facts").write_text("1\t2\n")
    timed_run(spark, text, warm)
    timed_run(spark, text, warm, inputs={"edge": edge_frame(spark, 10)})
    t_text, n_text, io_text = timed_run(spark, text, tmp)
    t_parquet, n_parquet, io_parquet = timed_run(spark, parquet, tmp)
    t_frame, n_frame, _ = timed_run(spark, text, tmp, inputs={"edge": edge_frame(spark, rows)})
    assert n_text == n_parquet == n_frame == rows, (n_text, n_parquet, n_frame)
    print(f"reading {rows:,} edge rows ({n_text:,} distinct) through levelflow.run "
          f"(read, checked, counted):", flush=True)
    print(f"  TAB-separated text: {t_text:.2f} s, {rate(rows, t_text)}; ratio to read_csv "
          f"{t_text / t_csv:.2f} (reading {io_text.reading:.2f} s, shipping "
          f"{io_text.shipping:.2f} s)")
    print(f"  Parquet (IO=parquet): {t_parquet:.2f} s, {rate(rows, t_parquet)}; ratio to "
          f"read_table {t_parquet / t_pq:.2f} (reading {io_parquet.reading:.2f} s)")
    print(f"  DataFrame (inputs=): {t_frame:.2f} s, {rate(rows, t_frame)}", flush=True)


def bench_stream(spark, batches: int, tmp: Path) -> None:
    """Print the mean one-row epoch through the stream against insert + commit."""
    session = IncrementalSession.bootstrap(spark, TC / "program.dl", TC / "facts",
                                           statedir=tmp / "state")
    direct = []
    for i in range(batches):
        t0 = time.perf_counter()
        session.insert("edge", (1000 + i, 2000 + i))
        session.commit()
        direct.append(time.perf_counter() - t0)
    source = tmp / "changes"
    source.mkdir()
    for i in range(batches):
        path = source / f"b{i:03d}.json"
        path.write_text(json.dumps({"x": 3000 + i, "y": 4000 + i, "op": "insert"}) + "\n")
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    stream = (spark.readStream.schema("x long, y long, op string")
              .option("maxFilesPerTrigger", 1).json(str(source)))
    apply = batch_function(session)
    streamed = []

    def timed(df, batch_id):
        t0 = time.perf_counter()
        apply(df, batch_id)
        streamed.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    query = (stream.writeStream.foreachBatch(timed).trigger(availableNow=True)
             .option("checkpointLocation", str(tmp / "chk")).start())
    query.awaitTermination()
    wall = time.perf_counter() - t0
    assert len(streamed) == batches and session.streams == {"default": batches - 1}
    # The first epochs warm the Python workers and the JIT: report the median.
    d, s = statistics.median(direct), statistics.median(streamed)
    print(f"one-row epochs on {TC / 'program.dl'} ({batches} each, median):", flush=True)
    print(f"  session.insert + commit: {d * 1000:.0f} ms (reference)")
    print(f"  micro-batch through levelflow.streaming: {s * 1000:.0f} ms in foreachBatch; "
          f"ratio {s / d:.2f}; the whole query {wall / batches * 1000:.0f} ms per batch",
          flush=True)
    session.close()


def main() -> None:
    """Parse the flags and run both benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="edge rows to read")
    parser.add_argument("--batches", type=int, default=10, help="one-row micro-batches")
    args = parser.parse_args()
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    spark = make_session(master="local[2]", driver_memory="4g")
    with tempfile.TemporaryDirectory(prefix="bench-io-") as tmp:
        bench_read(spark, args.rows, Path(tmp))
        bench_stream(spark, args.batches, Path(tmp))
    spark.stop()


if __name__ == "__main__":
    main()
