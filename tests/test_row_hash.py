"""row_hash: the numpy twin of Spark's xxhash64 row hash, checked against Spark itself."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyspark.sql.functions as F
import pytest
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

from levelflow.engine.incremental.state import row_hash
from levelflow.engine.incremental.state.integrity import _aggregates, _hex
from levelflow.engine.incremental.state.row_hash import checksum, row_hashes


@pytest.mark.parametrize("seed,chunk", [(1, 1 << 20), (2, 37)])
def test_row_hashes_and_checksum_equal_sparks(spark, seed, chunk, monkeypatch):
    monkeypatch.setattr(row_hash, "_CHUNK", chunk)  # 37: hashed in 14 chunks
    rng = np.random.default_rng(seed)
    n = 500
    longs = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    longs[:3] = [0, -1, np.iinfo(np.int64).min]
    table = pa.table({
        "c0": longs,
        "c1": pa.array(rng.integers(0, 50, n), pa.int64(), mask=rng.random(n) < 0.3),
        "_op": pa.array(rng.choice([-1, 1], n).astype(np.int32), pa.int32()),
    })
    schema = StructType([StructField("c0", LongType()), StructField("c1", LongType()),
                         StructField("_op", IntegerType())])
    df = spark.createDataFrame(table, schema)
    theirs = [r[0] for r in df.select(F.xxhash64("c0", "c1", "_op")).collect()]
    assert row_hashes(table).view(np.int64).tolist() == theirs
    got = df.agg(*_aggregates(df)).collect()[0]
    assert checksum(table) == (n, _hex(got["lo"], got["hi"]))


def test_a_table_with_a_column_not_an_integer_is_sparks_to_hash():
    assert checksum(pa.table({"c0": [1, 2], "c1": ["a", "b"]})) is None
    assert checksum(pa.table({"c0": pa.array([], pa.int64())})) == (0, "0")
