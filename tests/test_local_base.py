"""state/local_base.py: a relation's new base built in the driver from its stored base and
chain equals the chain applied in order (segments.net_of_chain), whatever order a segment's
rows are stored in."""

from __future__ import annotations

import random

import polars as pl
import pyarrow.parquet as pq
import pytest

from levelflow.engine.incremental.state.local_base import local_base
from levelflow.engine.incremental.state.segments import net_of_chain, segment_path

SEG = {"c0": pl.Int64, "c1": pl.Int64, "_it": pl.Int64, "_op": pl.Int32}


def _segment(rng: random.Random, n: int, low: int) -> pl.DataFrame:
    rows = [(low + rng.randrange(1200), rng.randrange(7), rng.randrange(5), rng.choice([-1, 1]))
            for _ in range(n)]
    return pl.DataFrame(rows, schema=SEG, orient="row").sort("_op")  # removals first


@pytest.mark.parametrize("low", [0, -600])  # tuples that pack into keys, and that do not
def test_the_driver_built_base_is_the_chain_applied_in_order(tmp_path, low):
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField(c, LongType()) for c in ("c0", "c1", "_it")])
    rng = random.Random(1)
    base = pl.DataFrame({"c0": range(low, low + 1000), "c1": [i % 7 for i in range(1000)],
                         "_it": [1] * 1000})
    (tmp_path / "3" / "rel" / "p").mkdir(parents=True)
    pq.write_table(base.to_arrow(), tmp_path / "3/rel/p/part-0.parquet")
    stored = []
    for epoch in (4, 5):  # on disk in any order, as Spark writes a segment
        seg = _segment(rng, 300, low)
        path = segment_path(tmp_path, "rel", "p", epoch)
        path.mkdir(parents=True)
        pq.write_table(seg.sample(fraction=1.0, shuffle=True, seed=epoch).to_arrow(),
                       path / "part-0.parquet")
        stored.append(seg)
    last = _segment(rng, 300, low)
    entry = {"epoch": 3, "rows": 1000, "segments": [{"epoch": 4, "rows": 300},
                                                    {"epoch": 5, "rows": 300}]}
    got = pl.from_arrow(local_base(tmp_path, "rel", "p", entry, last.to_arrow(), schema,
                                   ["c0", "c1"]))
    touched, added = net_of_chain([s.to_arrow() for s in [*stored, last]], ["c0", "c1"])
    want = pl.concat([base.join(touched, on=["c0", "c1"], how="anti"),
                      added.select(base.columns)])
    assert got.sort("c0", "c1").equals(want.sort("c0", "c1"))
    assert got.height != base.height  # the chain changed something
