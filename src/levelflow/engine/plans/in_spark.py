"""Run a task's whole fixpoint inside Spark tasks: one Spark job per task, whatever its rounds.

The task's inputs (lower relations, fact files) are packed into one frame: a `_src` column names
the source, and each source keeps its own columns `s<src>_c<j>` (null in the other sources'
rows). Under the local plan that frame is coalesced into one partition; under the partitioned
plan the frame is copied once per share (a union of one-partition copies: no shuffle), and
share p keeps only the tuples whose carried key hashes to p. A Python function (mapInArrow) runs
fixpoint.run_task on its partition and returns the relations packed the same way (`_rel`,
`o<rel>_c<j>`, and `_it` the round a tuple was found in). The result is cut by one eager
localCheckpoint; its row counts and rounds are observed on the JVM side during that same job,
and each relation is a filter over the checkpointed rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from levelflow.engine.types import relation_schema
from levelflow.tasks.ast import Decl, Rule

# Prefix of the stand-in relation holding an input's base facts in an incremental from-scratch
# run (incremental/scratch.py); shipped every epoch, so never kept on the executors.
BASE_FACTS = "@base:"
STATS_REL = -1  # the `_rel` of the one row per share that carries its round count in `_it`


@dataclass(frozen=True, slots=True)
class Layout:
    """What the Python side needs to unpack inputs and pack outputs (pickled to the workers)."""

    rules: tuple[Rule, ...]
    names: tuple[str, ...]  # the task's relations, in `_rel` order
    decls: dict[str, Decl]  # every relation the rules touch
    sources: tuple[tuple[str, bool], ...]  # per `_src`: (relation, is it that relation's facts)
    facts: dict[str, list[tuple]]  # the program's own facts, per relation of the task
    key: dict[str, int] | None  # partitioned plan: the carried position per relation
    parts: int
    closure: bool = False  # the task is a path expression's closure: plans/closure.py runs it
    # (lineage, token): also leave each share's result on its executor (plans/resident.py),
    # where the task's incremental epochs find it (incremental/arranged.py).
    keep: tuple[str, str] | None = None


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

    packed = spark.range(1).select(F.lit(-1).alias("_src"))  # every share gets a row
    for s, df in enumerate(frames):
        cols = [F.col(c).alias(f"s{s}_{c}") for c in df.columns]
        packed = packed.unionByName(df.select(F.lit(s).alias("_src"), *cols),
                                    allowMissingColumns=True)
    packed = packed.coalesce(1)
    if layout.parts == 1:
        return packed
    # A union of one-partition copies is one partition per share, and no shuffle: one job.
    copies = [packed.withColumn("_part", F.lit(p)) for p in range(layout.parts)]
    out = copies[0]
    for copy in copies[1:]:
        out = out.union(copy)
    return out


def run_packed(spark, layout: Layout, frames: Sequence, checkpoint: str = "local"):
    """Return (checkpointed packed result, rows per relation, rounds) after one Spark job."""
    import pyspark.sql.functions as F
    from pyspark.sql import Observation

    from levelflow.engine.evaluate import _forget_stats
    from levelflow.engine.plans.worker import evaluate_partition

    def run(batches):
        return evaluate_partition(layout, batches)

    schema = packed_schema(layout.names, layout.decls)
    out = pack_inputs(spark, layout, frames).mapInArrow(run, schema)
    seen = Observation()
    rel = F.col("_rel")
    metrics = [F.sum(F.when(rel == r, 1).otherwise(0)).alias(f"r{r}")
               for r in range(len(layout.names))]
    metrics.append(F.max(F.when(rel == STATS_REL, F.col("_it"))).alias("rounds"))
    out = out.observe(seen, *metrics)
    out = out.checkpoint(eager=True) if checkpoint == "reliable" else out.localCheckpoint(True)
    got = seen.get
    rows = {name: int(got[f"r{r}"] or 0) for r, name in enumerate(layout.names)}
    return _forget_stats(out), rows, int(got["rounds"] or 0)


def unpack(packed, layout: Layout, ranked: bool) -> dict:
    """Return each relation of the task as a frame over the checkpointed packed result."""
    import pyspark.sql.functions as F

    out = {}
    for r, name in enumerate(layout.names):
        decl = layout.decls[name]
        cols = [F.col(f"o{r}_{f.name}").alias(f.name) for f in relation_schema(decl).fields]
        if ranked:
            cols.append(F.col("_it"))
        out[name] = packed.filter(F.col("_rel") == r).select(*cols)
    return out
