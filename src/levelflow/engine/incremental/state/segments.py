"""Delta segments: an epoch's change to one stored relation, and when a chain is compacted.

A relation's manifest entry names a base (a Parquet directory of its stored rows as of some
epoch) and a chain of segments, oldest first. A segment is one Parquet directory holding the
stored rows the epoch removed and added, told apart by the column `_op` (-1 removed, +1
added). Stored rows are the tuple columns c0.. plus `_cnt` or `_it` (base facts: c0.. only),
so a count or rank change of a present tuple is "removed old row + added new row". Reading
applies each segment in chain order, its removals first (on the tuple columns), then its
additions: `base - removed_1 + added_1 - removed_2 + added_2 ...`.

Compaction policy: a relation's chain is folded into a new base when it holds more than
MAX_SEGMENTS segments, or when its segments hold more than SEGMENT_FRACTION of the base's rows
(and more than SEGMENT_FLOOR_ROWS, so small relations compact on the count alone). Reading
then costs at most MAX_SEGMENTS small file reads, netted into one anti join and one union
(compose), more than reading the base, and the
rows written over a relation's life stay within (1 + 1/SEGMENT_FRACTION) x the rows changed,
plus one base per MAX_SEGMENTS epochs.
Constant: the layout above. Nothing here writes to disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from levelflow.engine.sql_text import null_of, quoted

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OP = "_op"
MAX_SEGMENTS = 16
SEGMENT_FRACTION = 0.25
SEGMENT_FLOOR_ROWS = 10_000
CHAIN_IN_DRIVER = 2_000_000  # rows of a chain netted in the driver when read (compose)


def segment_schema(schema):
    """Return the Parquet schema of a segment: the stored rows' schema plus `_op`."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    return StructType(list(schema.fields) + [StructField(OP, IntegerType(), True)])


def segment_frame(removed: DataFrame | None, added: DataFrame | None, schema) -> DataFrame:
    """Return one frame of a segment's rows: `removed` tagged -1, `added` tagged +1."""
    def cols(df):  # removed rows may come without their count or rank: NULL then
        have = set(df.columns)
        return [quoted(f.name) if f.name in have else null_of(f) for f in schema.fields]

    parts = [df.selectExpr(*cols(df), f"CAST({sign} AS int) AS {quoted(OP)}")
             for sign, df in ((-1, removed), (1, added)) if df is not None]
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def local_segment(removed, added, schema):
    """Return a segment's rows as one Arrow table in the segment's schema, or None unless the
    driver holds every part (driver_rows.rows_of)."""
    import numpy as np
    import pyarrow as pa

    from levelflow.engine.incremental.backends.driver_rows import rows_of
    from levelflow.engine.types import arrow_schema_of_spark

    parts = [(sign, df, rows_of(df)) for sign, df in ((-1, removed), (1, added))
             if df is not None]
    if not parts or any(table is None for _, _, table in parts):
        return None
    arrow = arrow_schema_of_spark(segment_schema(schema))
    tables = []
    for sign, _, table in parts:
        n = table.num_rows
        cols = [pa.array(np.full(n, sign, np.int32)) if f.name == OP else
                table.column(f.name).cast(f.type) if f.name in table.column_names else
                pa.nulls(n, f.type) for f in arrow]  # removed rows may lack their count/rank
        tables.append(pa.Table.from_arrays(cols, schema=arrow))
    return pa.concat_tables(tables)


def segment_path(epochs: Path, kind: str, name: str, epoch: int) -> Path:
    """Return the directory of relation `name`'s segment of `epoch` (kind: rel or base)."""
    return epochs / str(epoch) / "seg" / kind / name


def apply_segment(current: DataFrame, seg: DataFrame, tuple_cols: list[str],
                  rows: int) -> DataFrame:
    """Return `current` minus the segment's removed tuples, plus its added rows."""

    from levelflow.engine.compile import BROADCAST_ROWS

    kept = _without(current, seg.filter(f"{quoted(OP)} < 0"), tuple_cols, rows <= BROADCAST_ROWS)
    return kept.unionByName(seg.filter(f"{quoted(OP)} > 0").drop(OP))


def _without(current: DataFrame, gone: DataFrame, tuple_cols: list[str], broadcast: bool):
    """Return `current` without the tuples (`tuple_cols`) that `gone` holds."""
    import pyspark.sql.functions as F

    gone = gone.selectExpr(*[f"{quoted(c)} AS {quoted('_r' + c)}" for c in tuple_cols])
    # Null-safe: a nullary relation's placeholder column holds NULL. SQL text: one JVM call.
    cond = [F.expr(" AND ".join(f"{quoted(c)} <=> {quoted('_r' + c)}" for c in tuple_cols))
            ] if tuple_cols else []
    return current.join(F.broadcast(gone) if broadcast else gone, cond, "left_anti")


def net_of_chain(tables: list, tuple_cols: list[str]):
    """Return (tuples, rows) to take out of a base and to add to it, that together do what a
    chain of segments (Arrow tables, oldest first) does: every tuple the chain touches goes,
    and comes back with its last row if the chain's last word on it is an addition."""
    import polars as pl

    events = pl.concat([pl.from_arrow(t).with_columns(
        (pl.lit(2 * k) + (pl.col(OP) > 0).cast(pl.Int64)).alias("_ord"))  # removals first
        for k, t in enumerate(tables)], how="vertical_relaxed")
    touched = events.select(tuple_cols).unique()
    last = events.sort("_ord").group_by(tuple_cols, maintain_order=True).last()
    return touched, last.filter(pl.col(OP) > 0).drop(OP, "_ord")


def compose(spark: SparkSession, base: DataFrame, epochs: Path, kind: str, name: str,
            entry: dict, schema, tuple_cols: list[str]) -> DataFrame:
    """Return a stored relation as its manifest entry describes it: base, then each segment.

    A chain of at most CHAIN_IN_DRIVER rows is netted in the driver (net_of_chain) and applied
    as one anti join and one union: applied segment by segment, each broadcast ran a job
    (compacting a 16-segment chain of a 1M-tuple relation took 6 s, nearly all of it those)."""
    segs = entry.get("segments", [])
    if segs and chain_rows(entry) <= CHAIN_IN_DRIVER:
        return _netted(spark, base, [segment_path(epochs, kind, name, s["epoch"]) for s in segs],
                       schema, tuple_cols)
    out = base
    for seg in segs:
        df = spark.read.schema(segment_schema(schema)).parquet(
            str(segment_path(epochs, kind, name, seg["epoch"])))
        out = apply_segment(out, df, tuple_cols, int(seg["rows"]))
    return out


def _netted(spark: SparkSession, base: DataFrame, paths: list[Path], schema,
            tuple_cols: list[str]) -> DataFrame:
    """Return base with a chain's net change (net_of_chain of its files) applied."""
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType

    from levelflow.engine.incremental.backends.driver_rows import arrow_of, spark_frame
    from levelflow.engine.types import arrow_schema_of_spark

    arrow = arrow_schema_of_spark(segment_schema(schema))
    touched, added = net_of_chain([pq.read_table(p, schema=arrow) for p in paths], tuple_cols)
    fields = {f.name: f for f in schema.fields}
    keys = StructType([fields[c] for c in tuple_cols])
    gone = spark_frame(spark, arrow_of(touched).cast(arrow_schema_of_spark(keys)), keys)
    new = spark_frame(spark, arrow_of(added).cast(arrow_schema_of_spark(schema)), schema)
    return _without(base, gone, tuple_cols, True).unionByName(new)


def chain_rows(entry: dict) -> int:
    """Return the rows held by a relation's segments."""
    return sum(int(s["rows"]) for s in entry.get("segments", []))


def needs_compaction(entry: dict) -> bool:
    """Return whether a relation's chain is past the compaction policy."""
    segs = entry.get("segments", [])
    if not segs:
        return False
    base_rows = int(entry.get("base_rows", entry["rows"]))
    rows = chain_rows(entry)
    return len(segs) > MAX_SEGMENTS or (rows > SEGMENT_FLOOR_ROWS
                                        and rows > SEGMENT_FRACTION * base_rows)


def chain_due(entry: dict, rows: int) -> bool:
    """Return whether one more segment of `rows` rows would put the chain past the policy."""
    return needs_compaction({**entry, "segments": [*entry.get("segments", []), {"rows": rows}]})


def rewrite_whole(changed_rows: int, rows: int, parts) -> bool:
    """Return whether an epoch changing `changed_rows` of a relation of `rows` writes it as a
    new base: its segment alone would be past the compaction policy, which would then read
    it back and write the base anyway (a large epoch wrote its change twice), and the
    segment's `parts` (removed, added) are not all rows the driver holds (those are counted
    exactly when the epoch is written: write._plan_one's chain_due)."""
    from levelflow.engine.incremental.backends.driver_rows import rows_of

    held = all(rows_of(df) is not None for df in parts if df is not None)
    return not held and changed_rows > SEGMENT_FLOOR_ROWS and \
        changed_rows > SEGMENT_FRACTION * rows
