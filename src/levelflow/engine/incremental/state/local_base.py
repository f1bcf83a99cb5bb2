"""A relation's new base built in the driver from its stored base, chain and the epoch's segment.

When an epoch's segment, held by the driver, would put a relation's chain past the compaction
policy, the compaction that followed in the commit read the whole chain back through Spark and
wrote it again (7-40 s on bench_shapes' cyclic graphs at 1M tuples, where a deletion inside a
component re-ranks a large share of the closure). The stored files are Parquet the driver reads
as well: base, then the chain netted (each tuple's last row, by sorted packed keys), written
by pyarrow as the epoch's new base, with no Spark job.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa

from levelflow.engine.incremental.state.segments import (
    OP,
    chain_rows,
    segment_path,
    segment_schema,
)
from levelflow.engine.plans.keys import pack_expr, packable

# Rows (base and chain) above which the new base is left to Spark: the driver holds them all
# (16M rows of a 2-column relation: about 0.4 GB, 1.5 GB at its peak). At 10M the driver built
# the base in 2.1 s where Spark's union and anti join of the chain took 11.6 s.
LOCAL_BASE_ROWS = 16_000_000


def local_base(epochs: Path, kind: str, name: str, entry: dict, segment: pa.Table | None,
               schema, tuple_cols: list[str]) -> pa.Table | None:
    """Return the stored rows of relation `name` (`kind` rel or base) after `segment` (None:
    as stored), from the base and chain its manifest `entry` names; None past
    LOCAL_BASE_ROWS."""
    import pyarrow.parquet as pq

    from levelflow.engine.types import arrow_schema_of_spark

    base_rows = int(entry.get("base_rows", entry["rows"]))
    if segment is None:
        segment = arrow_schema_of_spark(segment_schema(schema)).empty_table()
    if base_rows + chain_rows(entry) + segment.num_rows > LOCAL_BASE_ROWS:
        return None
    arrow, seg_arrow = arrow_schema_of_spark(schema), arrow_schema_of_spark(segment_schema(schema))
    base = pl.from_arrow(pq.read_table(epochs / str(entry["epoch"]) / kind / name,
                                       schema=arrow))
    chain = [pl.from_arrow(pq.read_table(segment_path(epochs, kind, name, s["epoch"]),
                                         schema=seg_arrow))
             for s in entry.get("segments", [])]
    # Each tuple's last word in chain order wins, a segment's removals before its additions
    # (a Spark-written segment's rows come in any order).
    events = []
    for seg in [*chain, pl.from_arrow(segment.select(seg_arrow.names))]:
        events += [seg.filter(pl.col(OP) < 0), seg.filter(pl.col(OP) > 0)]
    return _applied(base, pl.concat(events, how="vertical_relaxed"), tuple_cols) \
        .select(base.columns).to_arrow().cast(arrow)


def _applied(base: pl.DataFrame, events: pl.DataFrame, tuple_cols: list[str]) -> pl.DataFrame:
    """Return the base's rows no event touches, and each touched tuple's last event where it
    is an addition: by sorted packed keys where the tuples pack (a hash unique over base and
    chain took 2.6 s at 3M rows), else by one unique."""
    keys = [df.select(tuple_cols) for df in (base, events)]
    if not all(packable(k) for k in keys):
        last = pl.concat([base.with_columns(pl.lit(0, pl.Int32).alias(OP)), events],
                         how="vertical_relaxed").unique(subset=tuple_cols, keep="last")
        return last.filter(pl.col(OP) >= 0).drop(OP)
    base_keys, event_keys = (k.select(pack_expr(tuple_cols))["_key"] for k in keys)
    # Hash unique and membership: at 10M base rows and 3.7M events, np.unique's sort and a
    # binary search per base key took 2.5 s where these take 0.9.
    last = events.with_columns(event_keys).unique("_key", keep="last", maintain_order=True)
    untouched = ~base_keys.is_in(last["_key"].implode())
    return pl.concat([base.filter(untouched), last.filter(pl.col(OP) > 0).drop(OP, "_key")],
                     how="vertical_relaxed")
