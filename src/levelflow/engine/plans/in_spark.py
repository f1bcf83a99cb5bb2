"""Run a task's whole fixpoint inside Spark tasks: one Spark job per task, whatever its rounds.

The task's inputs (lower relations, fact files) are packed into one frame: a `_src` column names
the source, and each source keeps its own columns `s<src>_c<j>` (null in the other sources'
rows). Under the local plan that frame is coalesced into one partition; under the partitioned
plan the frame is copied once per share (a union of one-partition copies: no shuffle), and
share p keeps only the tuples whose carried key hashes to p. A Python function (mapInArrow) runs
fixpoint.run_task on its partition and returns the relations packed the same way (`_rel`,
`o<rel>_c<j>`, and `_it` the round a tuple was found in). The result is cut by one job that
stores it as column batches (cached_cut; a localCheckpoint where that is unavailable, or the
reliable checkpoint when asked); its row counts and rounds are observed on the JVM side during
that same job, and each relation is a filter over the stored rows. A task whose tuples nothing
reads (`.printsize` only) skips the storing: its job brings back one count row per share and
relation (run_counted), and its relations stay the unstored plan, which runs again if read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from levelflow.engine import io_meter
from levelflow.engine.plans.layout import COUNT_REL, STATS_REL, Layout
from levelflow.engine.sql_text import count_where, exprs, quoted
from levelflow.engine.types import relation_schema

# A driver-held source is shipped in pieces of at most this many rows (united_sources) and
# this many bytes: a piece is one task's data on its way to an executor (blob_frame).
BLOB_ROWS = 1_000_000
BLOB_BYTES = 32 << 20
BLOB_MIN_ROWS = 50_000


def packed_schema(names, decls, extra=()):
    """Return the Spark schema of a packed output: `_rel`, the extra fields, `_it`, then each
    relation's columns `o<rel>_c<j>` (matches worker.output_schema)."""
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    fields = [StructField("_rel", IntegerType(), False), *extra, StructField("_it", LongType())]
    for r, name in enumerate(names):
        for f in relation_schema(decls[name]).fields:
            fields.append(StructField(f"o{r}_{f.name}", f.dataType, True))
    return StructType(fields)


def pack_inputs(spark, layout: Layout, frames: Sequence):
    """Return one frame holding every source's rows (`_src`, `s<src>_c<j>`), plus a marker row."""
    import pyspark.sql.functions as F

    packed = united_sources(spark, frames).coalesce(1)
    if layout.parts == 1:
        return packed
    # A union of one-partition copies is one partition per share, and no shuffle: one job.
    copies = [packed.withColumn("_part", F.lit(p)) for p in range(layout.parts)]
    out = copies[0]
    for copy in copies[1:]:
        out = out.union(copy)
    return out


def united_sources(spark, frames: Sequence):
    """Return every source's rows in one frame (`_src`, `s<src>_c<j>`), plus a marker row; a
    source the driver holds as an Arrow table (driver_rows.driver_table) comes as `_blob` rows
    instead, its table in Arrow IPC pieces (worker.source_frames decodes them)."""
    from levelflow.engine.incremental.backends.driver_rows import driver_table

    packed = spark.range(1).selectExpr("-1 AS _src")  # every share gets a row
    blobs: list[tuple[int, bytes]] = []
    for s, df in enumerate(frames):  # SQL text: one JVM call per column, not three
        table = driver_table(df)
        if table is not None:
            blobs += blob_pieces(s, table, spark.sparkContext.defaultParallelism)
            continue
        cols = [f"{quoted(c)} AS {quoted(f's{s}_{c}')}" for c in df.columns]
        packed = packed.unionByName(df.selectExpr(f"{s} AS _src", *cols),
                                    allowMissingColumns=True)
    if blobs:
        packed = packed.unionByName(blob_frame(spark, blobs), allowMissingColumns=True)
    return packed


def blob_pieces(src: int, table, parallelism: int) -> list[tuple[int, bytes]]:
    """Return (src, Arrow IPC stream) pieces of a source's table, its columns named as packed
    (`s<src>_c<j>`): at most BLOB_ROWS rows and BLOB_BYTES a piece, and 4 pieces a core where
    each still has BLOB_MIN_ROWS, so that a distributed plan's shuffle deals them out evenly."""
    rows = table.num_rows
    pieces = max(-(-rows // BLOB_ROWS), -(-table.nbytes // BLOB_BYTES),
                 min(4 * max(parallelism, 1), rows // BLOB_MIN_ROWS), 1)
    step = max(-(-rows // pieces), 1)
    named = table.rename_columns([f"s{src}_{c}" for c in table.column_names])
    return [(src, _ipc(named.slice(start, step))) for start in range(0, max(rows, 1), step)]


def _ipc(table) -> bytes:
    """Return a table as one Arrow IPC stream."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def blob_frame(spark, blobs: list[tuple[int, bytes]]):
    """Return a frame of `_src`, `_blob` rows, a partition each: a few rows, whatever the
    tables' sizes, which Spark moves as bytes with no conversion per tuple."""
    from pyspark.sql import DataFrame
    from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

    schema = StructType([StructField("_src", IntegerType(), False),
                         StructField("_blob", BinaryType(), False)])
    sc = spark.sparkContext
    with io_meter.timed("shipping"):
        # Not createDataFrame: its local relation travels whole inside every task, which a
        # cluster refuses past spark.rpc.message.maxSize (128 MB). A parallelized collection
        # sends each task its own partition; the JVM unpickles it with no Python worker.
        pieces = sc.parallelize(blobs, len(blobs))
        try:
            rows = sc._jvm.SerDeUtil.toJavaArray(
                sc._jvm.SerDeUtil.pythonToJava(pieces._jrdd, True))
            return DataFrame(spark._jsparkSession.applySchemaToPythonRDD(rows.rdd(),
                                                                         schema.json()), spark)
        except Exception:  # noqa: BLE001 - no JVM gateway (Spark Connect): a Python pass
            return spark.createDataFrame(pieces, schema)


def cached_cut(df, observed: str):
    """Return (df materialized as column batches, re-rooted on them; the values observed under
    `observed`) after one Spark job; None where the JVM calls are unavailable.

    What localCheckpoint does, stored as Spark's cache stores a frame (column batches, not one
    Java-serialized object per row: that took most of a large result's time, and reading it
    back again). Uncompressed: gathering the compression statistics (a boxed hash map per
    value) cost more than the rest of the job. Nothing is registered with the cache manager,
    so the batches go when the frame does (Spark's cleaner unpersists unreachable RDDs).
    """
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    try:
        jvm, jspark = spark._jvm, spark._jsparkSession
        level = spark.sparkContext._getJavaStorageLevel(StorageLevel.MEMORY_AND_DISK_DESER)
        conf = jspark.sessionState().conf().clone()  # the session's own conf stays as it is
        conf.setConfString("spark.sql.inMemoryColumnarStorage.compressed", "false")
        serializer = jvm.org.apache.spark.sql.execution.columnar.DefaultCachedBatchSerializer()
        plan = df._jdf.queryExecution().executedPlan()
        metrics = getattr(jvm.org.apache.spark.sql.execution, "CollectMetricsExec$")
        collect = metrics.__getattr__("MODULE$").collect
        schema, output = df._jdf.schema(), plan.output()
    except Exception:  # noqa: BLE001 - e.g. Spark Connect: the caller checkpoints instead
        return None
    batches = serializer.convertInternalRowToCachedBatch(plan.execute(), output, level, conf)
    batches.persist(level).count()  # the one job: runs the plan, fills the batches
    row = collect(plan).get(observed).get()
    rows = serializer.convertCachedBatchToInternalRow(batches, output, output, conf)
    out = DataFrame(jspark.internalCreateDataFrame(rows, schema, False), spark)
    return out, [row.get(i) for i in range(row.length())]


def _packed_metrics(layout: Layout) -> list:
    """Return the metrics observed over a packed result: rows per relation, then rounds."""
    return exprs(*[count_where(f"_rel = {r}", f"r{r}")
                   for r in range(len(layout.names))],
                 f"max(CASE WHEN _rel = {STATS_REL} THEN _it END) AS rounds")


def _evaluated(spark, layout: Layout, frames: Sequence):
    """Return the packed result of running the task's workers over its packed inputs (lazy)."""
    from levelflow.engine.plans.worker import evaluate_partition

    schema = packed_schema(layout.names, layout.decls)
    if layout.routing is not None:  # every partition at once: they swap rows (exchange.py)
        from levelflow.engine.plans import exchange
        from levelflow.engine.plans.distributed import evaluate_distributed

        timeout = exchange.TIMEOUT_SECONDS  # read here: tests lower it in the driver
        where = exchange.meeting(spark, layout.token, layout.parts)
        # Each task reads any slice and routes its rows. Shuffles before and after: a barrier
        # stage may not coalesce its input, and what reads its result (a take, a union) would
        # otherwise be refused for sharing its stage. Its Python runs in every partition.
        return united_sources(spark, frames).repartition(layout.parts).mapInArrow(
            lambda batches: evaluate_distributed(layout, batches, timeout, where), schema,
            barrier=True).repartition(layout.parts)

    def run(batches):
        return evaluate_partition(layout, batches)

    return pack_inputs(spark, layout, frames).mapInArrow(run, schema)


def run_counted(spark, layout: Layout, frames: Sequence):
    """Return (the packed result, unmaterialized, rows per relation, rounds) after one Spark job
    that brings back only the counts: reading the result runs the task again."""
    counted = _evaluated(spark, replace(layout, emit=False), frames).collect()
    rows = {name: sum(int(row["_it"]) for row in counted if row["_rel"] == COUNT_REL - r)
            for r, name in enumerate(layout.names)}
    rounds = max((int(row["_it"]) for row in counted if row["_rel"] == STATS_REL), default=0)
    return _evaluated(spark, layout, frames), rows, rounds


def run_packed(spark, layout: Layout, frames: Sequence, checkpoint: str = "local"):
    """Return (materialized packed result, rows per relation, rounds) after one Spark job."""
    import uuid

    from levelflow.engine.evaluate import cut_observed

    out = _evaluated(spark, layout, frames)
    name = f"packed-{uuid.uuid4().hex}"
    cached = cached_cut(out.observe(name, *_packed_metrics(layout)), name) \
        if checkpoint == "local" else None
    if cached is not None:
        out, got = cached
    else:
        out, seen = cut_observed(out, _packed_metrics(layout), checkpoint)
        got = list(seen.values())
    rows = {name: int(got[r] or 0) for r, name in enumerate(layout.names)}
    return out, rows, int(got[-1] or 0)


def unpack(packed, layout: Layout, ranked: bool) -> dict:
    """Return each relation of the task as a frame over the checkpointed packed result."""
    out = {}
    for r, rel in enumerate(layout.names):
        cols = [f"{quoted(f'o{r}_{f.name}')} AS {quoted(f.name)}"
                for f in relation_schema(layout.decls[rel]).fields]
        out[rel] = packed.filter(f"_rel = {r}").selectExpr(*cols, *(["_it"] if ranked else []))
    return out
