"""Integrity of a state's Parquet: what a commit records about each relation, checked on open.

Per stored relation the manifest records its part files, `{file: [bytes, rows, checksum]}`, and
the relation's `checksum`. A checksum is the sum over rows of xxhash64 of the whole row, as an
unsigned 64-bit number (so it does not depend on row order or on how rows fall into files).
Spark computes it while writing (an Observation, no extra job); the driver computes the same
sum with pyarrow and numpy (row_hash.py) when it writes rows itself, reads back what it wrote,
and verifies a state: `state check` and `state repair` read every file that way and start no
Spark at all. Only a session opening (or a commit reading back) more than HERE_ROWS rows of a
relation has Spark hash them, one aggregate job over all of them at once. Missing, extra or
resized part files are found from the directory listing alone.
Constant: the rule above. Nothing here writes to a state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from levelflow.engine.sql_text import exprs, quoted_list

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

_LOW = 0xFFFFFFFF
# Part files up to this size in all are scanned by one task (an epoch's segments): the
# aggregate then runs as one job, where a shuffle made it two (about 0.1 s each).
ONE_TASK_BYTES = 64 << 20
# Part files of up to this many rows in all are read back by the driver after a commit writes
# them (pyarrow, no Spark job): 1M tuples take it 0.1-0.15 s, where a Spark scan took 0.4-0.7 s.
HERE_ROWS = 4_000_000


@dataclass(frozen=True, slots=True)
class Stored:
    """One stored relation directory to check: what it is, where, and what the manifest says."""

    label: str  # "relation path" or "base facts of edge": how messages name it
    path: Path
    schema: pa.Schema  # what it is read with (integrity.spark_schema: Spark's)
    rows: int
    checksum: str | None  # hex; None in a manifest that predates checksums
    files: dict | None  # file name -> [bytes, rows, checksum hex]


def _halves(columns) -> tuple[str, str]:
    """Return SQL for the low and high 32 bits of each row's xxhash64 (each sum fits a long)."""
    h = f"xxhash64({quoted_list(columns)})"
    return f"{h} & {_LOW}", f"shiftrightunsigned({h}, 32)"


def _aggregates(df: DataFrame, columns=None) -> list[Column]:
    """Return the count and the two hash-half sums of a relation, as aggregate columns
    (`columns`: df's column names, when the caller knows them without asking the JVM)."""
    lo, hi = _halves(df.columns if columns is None else columns)
    return exprs("count(1) AS n", f"sum({lo}) AS lo", f"sum({hi}) AS hi")


def _hex(lo, hi) -> str:
    """Return the checksum of the two half sums (None for no rows) as a hex string."""
    return f"{((hi or 0) << 32) + (lo or 0):x}"


def observed(df: DataFrame, columns=None):
    """Return (df, observation): writing df also computes its count and checksum, no extra job
    (`columns`: df's column names, when the caller knows them without asking the JVM)."""
    from pyspark.sql import Observation

    obs = Observation("levelflow-checksum")
    return df.observe(obs, *_aggregates(df, columns)), obs


def observed_result(obs) -> tuple[int, str]:
    """Return (rows, checksum) an observation computed during the write it watched."""
    got = obs.get
    return int(got["n"] or 0), _hex(got["lo"], got["hi"])


def part_files(path: Path) -> dict[str, int]:
    """Return the Parquet part files of a relation directory with their sizes in bytes."""
    return {p.name: p.stat().st_size for p in sorted(path.glob("*.parquet")) if p.is_file()}


def file_problems(item: Stored) -> list[str]:
    """Return what is wrong with a relation directory's listing (no Spark): one line each."""
    if not item.path.is_dir():
        return [f"{item.path}: error: {item.label}: directory missing"]
    if item.files is None:
        return []
    found = part_files(item.path)
    out = []
    for name, (size, _rows, _sum) in sorted(item.files.items()):
        if name not in found:
            out.append(f"{item.path / name}: error: {item.label}: part file missing")
        elif found[name] != size:
            out.append(f"{item.path / name}: error: {item.label}: part file has "
                       f"{found[name]} bytes, {size} when written")
    out += [f"{item.path / name}: error: {item.label}: unexpected part file"
            for name in sorted(set(found) - set(item.files))]
    return out


def scan(spark: SparkSession, items: list[Stored]) -> dict[int, dict[str, tuple[int, str]]]:
    """Return per item index, per part file, (rows, checksum) as read now: one Spark job."""
    import functools

    if not items:
        return {}
    parts = []
    for i, item in enumerate(items):  # one row shape for every item, then one aggregate: an
        # aggregate per item before the union ran a job per item (adaptive execution)
        lo, hi = _halves(item.schema.names)
        parts.append(spark.read.schema(spark_schema(item)).parquet(str(item.path)).selectExpr(
            f"{i} AS `item`", "_metadata.file_name AS `file`", f"{lo} AS lo", f"{hi} AS hi"))
    rows = functools.reduce(lambda a, b: a.unionByName(b), parts)
    if sum(sum(part_files(item.path).values()) for item in items) <= ONE_TASK_BYTES:
        rows = rows.coalesce(1)  # one partition: the aggregate needs no shuffle, so one job
    rows = rows.groupBy("item", "file").agg(*exprs("count(1) AS n", "sum(lo) AS lo",
                                                   "sum(hi) AS hi"))
    out: dict[int, dict[str, tuple[int, str]]] = {i: {} for i in range(len(items))}
    for r in rows.collect():
        out[r["item"]][r["file"]] = (int(r["n"]), _hex(r["lo"], r["hi"]))
    return out


def spark_schema(item: Stored) -> StructType:
    """Return the Spark schema a stored relation is read with."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(item.schema)


def file_sums(path: Path, schema: pa.Schema) -> tuple[int, str]:
    """Return (rows, checksum) of one part file as the driver reads it now (pyarrow, hashed as
    Spark hashes: row_hash.py), a batch at a time: memory stays bounded."""
    import pyarrow.parquet as pq

    from levelflow.engine.incremental.state.row_hash import checksum

    rows = total = 0
    # Pages written with a CRC (write._write_table) are verified: a flipped byte is found even
    # where it changes no value (a delta-packed block's padding).
    parquet = pq.ParquetFile(path, page_checksum_verification=True)
    for batch in parquet.iter_batches(batch_size=1 << 20, columns=schema.names):
        n, hexsum = checksum(pa.Table.from_batches([batch]).cast(schema))
        rows, total = rows + n, total + int(hexsum, 16)
    return rows, f"{total:x}"


def scan_here(item: Stored) -> dict[str, tuple[int, str]] | None:
    """Return per part file (rows, checksum) as the driver reads them now, or None where Spark
    must read them: a column row_hash does not hash, or more than HERE_ROWS rows (as the
    files' footers say)."""
    import pyarrow.parquet as pq

    from levelflow.engine.incremental.state.row_hash import row_hashes

    sizes = part_files(item.path)
    if row_hashes(item.schema.empty_table()) is None or \
            sum(pq.read_metadata(item.path / name).num_rows for name in sizes) > HERE_ROWS:
        return None
    found = {name: file_sums(item.path / name, item.schema) for name in sizes}
    return {name: sums for name, sums in found.items() if sums[0]}  # as Spark's scan: an
    # empty file has no row there


def content_problems(item: Stored, found: dict[str, tuple[int, str]]) -> list[str]:
    """Return how the rows read from a relation differ from what its manifest recorded."""
    out = []
    if item.files is not None:
        for name, (_size, rows, checksum) in sorted(item.files.items()):
            got = found.get(name, (0, "0"))
            if got != (rows, checksum):
                out.append(f"{item.path / name}: error: {item.label}: content differs from "
                           f"what was written ({got[0]} rows read, {rows} written)")
        if out:
            return out
    rows = sum(n for n, _ in found.values())
    total = f"{sum(int(c, 16) for _, c in found.values()):x}"
    if rows != item.rows or (item.checksum is not None and total != item.checksum):
        out.append(f"{item.path}: error: {item.label}: {rows} rows read, the manifest says "
                   f"{item.rows}" + ("" if rows != item.rows else " (checksum differs)"))
    return out


def unreadable(spark: SparkSession, items: list[Stored]) -> list[str]:
    """Return one line per part file Spark cannot read (called once a whole scan failed)."""
    out = []
    for item in items:
        for path in sorted(item.path.glob("*.parquet")):
            try:
                df = spark.read.schema(spark_schema(item)).parquet(str(path))
                df.agg(*_aggregates(df, item.schema.names)).collect()
            except Exception as e:  # noqa: BLE001 - any reader failure is this file's damage
                out.append(f"{path}: error: {item.label}: part file cannot be read "
                           f"({cause(e)})")
    return out


def cause(exc: BaseException) -> str:
    """Return a JVM or Python error's root cause on one line, without Spark's decorations."""
    from levelflow.engine.workers import one_line

    return one_line(exc)[:300]


def verify(items: list[Stored], spark: SparkSession | None = None,
           listing: bool = False) -> list[str]:
    """Return every problem found in the stored relations: their listings, then (unless
    `listing`) their contents, read by the driver; given a session, only the smallest up to
    HERE_ROWS rows in all, the rest by one Spark job."""
    out = [p for item in items for p in file_problems(item)]
    if out or listing:
        return out
    by_spark = [] if spark is None else _for_spark(items)
    out += _verify_here([item for item in items if item not in by_spark])
    if not by_spark:
        return out
    try:
        found = scan(spark, by_spark)
    except Exception as e:  # noqa: BLE001 - name the file that fails, else the cause
        return out + (unreadable(spark, by_spark) or [
            f"{by_spark[0].path.parent.parent}: error: cannot read the state ({cause(e)})"])
    return out + [p for i, item in enumerate(by_spark) for p in content_problems(item, found[i])]


def _for_spark(items: list[Stored]) -> list[Stored]:
    """Return the relations a session has Spark verify: past the smallest HERE_ROWS rows in
    all (as their manifest says), which the driver reads faster than a job starts."""
    from levelflow.engine.incremental.state.row_hash import row_hashes

    left, out = HERE_ROWS, []
    for item in sorted(items, key=lambda item: item.rows):
        if item.rows <= left and row_hashes(item.schema.empty_table()) is not None:
            left -= max(item.rows, 0)
        else:
            out.append(item)
    return out


def _verify_here(items: list[Stored]) -> list[str]:
    """Return the problems of stored relations as the driver reads them, a part file per
    thread (pyarrow and numpy's loops release the GIL: both cores of a laptop work)."""
    from concurrent.futures import ThreadPoolExecutor

    def sums(item: Stored, name: str):
        try:
            return file_sums(item.path / name, item.schema)
        except (OSError, ValueError, pa.ArrowException) as e:
            return f"{item.path / name}: error: {item.label}: part file cannot be read " \
                   f"({cause(e)})"

    files = [(i, name) for i, item in enumerate(items) for name in part_files(item.path)]
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1),
                            thread_name_prefix="levelflow-verify") as pool:
        found = list(pool.map(lambda f: sums(items[f[0]], f[1]), files))
    out = []
    for i, item in enumerate(items):
        mine = {name: got for (owner, name), got in zip(files, found, strict=True)
                if owner == i}
        bad = [got for got in mine.values() if isinstance(got, str)]
        out += bad or content_problems(item, {n: s for n, s in mine.items() if s[0]})
    return out
