"""row_hash: the numpy twin of Spark's xxhash64 row hash, checked against Spark itself."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyspark.sql.functions as F
import pytest
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from levelflow.engine.incremental.state import row_hash
from levelflow.engine.incremental.state.integrity import _aggregates, _hex
from levelflow.engine.incremental.state.row_hash import checksum, checksums, row_hashes


def sparks(spark, table: pa.Table, schema: StructType) -> tuple[list[int], tuple[int, str]]:
    """Return Spark's xxhash64 of each row of `table` and integrity's checksum of it."""
    df = spark.createDataFrame(table, schema)
    hashes = [r[0] for r in df.select(F.xxhash64(*schema.fieldNames())).collect()]
    got = df.agg(*_aggregates(df)).collect()[0]
    return hashes, (table.num_rows, _hex(got["lo"], got["hi"]))


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
    theirs, total = sparks(spark, table, schema)
    assert row_hashes(table).view(np.int64).tolist() == theirs
    assert checksum(table) == total


def test_symbols_floats_and_booleans_hash_as_spark_hashes_them(spark):
    """Every type a state stores: strings of every length class of XXH64 (under 4, 8 and 32
    bytes, whole 32-byte stripes and a rest, multi-byte UTF-8), doubles with -0.0, NaN and
    infinities, a nullary relation's boolean; NULLs in each."""
    rng = np.random.default_rng(3)
    n = 400
    alphabet = list("abcxyz019é€ 😀")
    words = ["", "a", "ab€", "12345678", "x" * 31, "y" * 32, "z" * 33, "é" * 40, "w" * 200] + [
        "".join(rng.choice(alphabet, rng.integers(0, 80))) for _ in range(n - 9)]
    doubles = rng.normal(0, 1e6, n)
    doubles[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.5]
    table = pa.table({
        "c0": pa.array(words, pa.string(), mask=rng.random(n) < 0.1),
        "c1": pa.array(doubles, pa.float64(), mask=np.arange(n) % 17 == 16),
        "c2": pa.array(rng.random(n) < 0.5, pa.bool_(), mask=rng.random(n) < 0.1),
        "_it": pa.array(rng.integers(0, 9, n), pa.int64()),
    })
    schema = StructType([StructField("c0", StringType()), StructField("c1", DoubleType()),
                         StructField("c2", BooleanType()), StructField("_it", LongType())])
    theirs, total = sparks(spark, table, schema)
    assert row_hashes(table).view(np.int64).tolist() == theirs
    assert checksum(table) == total
    # A sliced table (an offset into its buffers) hashes the same rows alike.
    assert row_hashes(table.slice(7, 50)).view(np.int64).tolist() == theirs[7:57]


def test_checksums_of_leading_columns_in_one_pass_equal_sparks_of_each(spark, monkeypatch):
    """A relation's stored rows and its tuple columns alone (an input's base facts), hashed
    in one pass over chunks, equal Spark's checksums of each."""
    monkeypatch.setattr(row_hash, "_CHUNK", 41)
    rng = np.random.default_rng(5)
    n = 300
    table = pa.table({"c0": rng.integers(-10**12, 10**12, n),
                      "c1": pa.array([f"s{i % 37}" for i in range(n)], pa.string()),
                      "_cnt": pa.array(rng.integers(1, 4, n), pa.int64())})
    fields = [StructField("c0", LongType()), StructField("c1", StringType()),
              StructField("_cnt", LongType())]
    whole = sparks(spark, table, StructType(fields))[1]
    tuples = sparks(spark, table.select(["c0", "c1"]), StructType(fields[:2]))[1]
    assert checksums(table, [3, 2]) == [whole, tuples]
    assert checksums(table, [2, 3]) == [tuples, whole]
    assert whole != tuples


def test_a_table_with_a_column_of_another_type_is_sparks_to_hash():
    assert checksum(pa.table({"c0": [1, 2], "c1": pa.array([1, 2], pa.int16())})) is None
    assert checksum(pa.table({"c0": pa.array([], pa.int64())})) == (0, "0")
