"""Writing an epoch's changed relations: each a new base or a delta segment on its chain, written
as Parquet (from the driver or by Spark) and read back against what was written."""

from __future__ import annotations

import shutil
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from levelflow.engine.evaluate import RANK
from levelflow.engine.incremental.state.durable import fsync_all
from levelflow.engine.incremental.state.errors import StateError
from levelflow.engine.incremental.state.files import arrow_segment_schema, arrow_stored_schema
from levelflow.engine.incremental.state.integrity import (
    Stored,
    observed,
    observed_result,
    part_files,
    scan,
    scan_here,
)
from levelflow.engine.incremental.state.local_base import local_base
from levelflow.engine.incremental.state.row_hash import checksums
from levelflow.engine.incremental.state.segments import (
    chain_due,
    local_segment,
    segment_frame,
    segment_schema,
)
from levelflow.engine.incremental.state.snapshot import COUNT, Snapshot
from levelflow.engine.types import relation_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from levelflow.tasks.ast import Program


def stored_schema(program: Program, name: str, kind: str, counted: set[str]):
    """Return the Parquet schema of a stored relation (`rel`: + _cnt or _it) or base facts."""
    from pyspark.sql.types import LongType, StructField

    schema = relation_schema(program.decls[name])
    if kind == "rel":
        schema = schema.add(StructField(COUNT if name in counted else RANK, LongType(), True))
    return schema


def plan_writes(program: Program, snap: Snapshot, tmp: Path, epoch: int, changed: set[str],
                changed_base: set[str], prev: dict | None) -> tuple[dict, list, list]:
    """Return the manifest's `relations` and `base` tables of the next epoch, the entries to
    complete once read back (entry, Stored, observation) and the (frame, directory) pairs to
    write: what changed goes into `tmp`, the rest keeps the previous manifest's entries."""
    tables: dict[str, dict] = {"relations": {}, "base": {}}
    written: list[tuple[dict, Stored, object]] = []  # (entry to complete, item, observation)
    frames: list[tuple] = []  # (DataFrame, directory) to write
    for kind, key, names, rows, where in (
            ("rel", "relations", program.decls, snap.rows, snap.where),
            ("base", "base", program.inputs, snap.base_rows, snap.base_where)):
        todo = changed if kind == "rel" else changed_base
        for name in sorted(names):
            if name in todo and rows[name]:
                entry, target, item, obs, df = _plan_one(
                    program, snap, tmp, epoch, kind, name,
                    prev[key].get(name) if prev else None)
                tables[key][name] = entry
                written.append((target, item, obs))
                frames.append((df, item.path))
            elif name in todo or where[name] is None:
                tables[key][name] = {"epoch": None, "rows": 0}
            else:  # unchanged: the previous manifest already describes its files
                tables[key][name] = dict(prev[key][name])
    return tables, written, frames


def _plan_one(program: Program, snap: Snapshot, tmp: Path, epoch: int, kind: str,
              name: str, old: dict | None) -> tuple[dict, dict, Stored, object, DataFrame]:
    """Return (manifest entry, the part of it describing the files, what is to be written,
    its observation, the frame to write) of one changed relation: a segment on its chain
    if the epoch gave one, else a new base."""
    schema = stored_schema(program, name, kind, snap.counted)
    arrow = arrow_stored_schema(program, name, kind, snap.counted)
    label = f"relation {name}" if kind == "rel" else f"base facts of {name}"
    rows = snap.rows[name] if kind == "rel" else snap.base_rows[name]
    seg = (snap.stored if kind == "rel" else snap.base_stored).get(name)
    # A relation the snapshot holds from no stored base (a redeclared one, rebuilt from
    # empty) must not be a segment on the old chain: its old rows would stay.
    held = (snap.where if kind == "rel" else snap.base_where).get(name) is not None
    if seg is not None and any(df is not None for df in seg) and old is not None \
            and old["epoch"] is not None and held:
        # Rows the driver holds are written from it: a Spark write is a job per segment.
        table = local_segment(*seg, schema)
        if table is None or not chain_due(old, table.num_rows):
            return _segment(old, epoch, rows, tmp, kind, name, label, schema, table, seg, arrow)
        # Past the policy: the compaction that followed in the commit read the chain back
        # to write this same base; the driver builds it from the files (local_base.py).
        table = local_base(tmp.parent, kind, name, old, table, schema,
                           [f.name for f in schema.fields if f.name not in (COUNT, RANK)])
        if table is not None:
            entry = {"epoch": epoch, "rows": rows, "base_rows": rows, "segments": []}
            return entry, entry, Stored(label, tmp / kind / name, arrow, rows, None, None), \
                table, table
    frame = (snap.rel if kind == "rel" else snap.base)[name]
    # Rows the driver holds (a bootstrap's small facts) are written from it: no Spark job.
    table = local_table(frame, schema)
    df, obs = (table, table) if table is not None else observed(frame)
    entry = {"epoch": epoch, "rows": rows, "base_rows": rows, "segments": []}
    return entry, entry, Stored(label, tmp / kind / name, arrow, rows, None, None), obs, df


def local_table(frame, schema) -> pa.Table | None:
    """Return a relation's rows as one Arrow table in its stored `schema`, or None unless the
    driver holds them all (driver_rows.rows_of) with every stored column."""
    from levelflow.engine.incremental.backends.driver_rows import rows_of
    from levelflow.engine.types import arrow_schema_of_spark

    table = rows_of(frame)
    arrow = arrow_schema_of_spark(schema)
    if table is None or any(n not in table.column_names for n in arrow.names):
        return None
    return pa.Table.from_arrays([table.column(f.name).cast(f.type) for f in arrow],
                                schema=arrow)


def _segment(old: dict, epoch: int, rows: int, tmp: Path, kind: str, name: str, label: str,
             schema, table, seg, arrow) -> tuple:
    """Return _plan_one's answer for a segment on the chain (`table`: its rows, if the driver
    holds them all)."""
    df, obs = (table, table) if table is not None else \
        observed(segment_frame(*seg, schema), segment_schema(schema).fieldNames())
    path = tmp / "seg" / kind / name  # tmp becomes epochs/<epoch>: segment_path
    entry = {**old, "rows": rows, "base_rows": int(old.get("base_rows", old["rows"])),
             "segments": [*old.get("segments", []), {"epoch": epoch}]}
    return entry, entry["segments"][-1], Stored(f"{label} (segment of epoch {epoch})", path,
                         arrow_segment_schema(arrow), -1, None, None), obs, df


def read_back(spark, current: int, written: list, early: EarlyWrites | None = None) -> None:
    """Record the part files of every base and segment written, verified as read back
    (`current`: the epoch a mismatch leaves current; `early`: tables written and read back
    while the epoch ran).

    A base must hold the relation's rows; a segment, the rows Spark counted writing it,
    or, written by the driver, exactly its table's rows.
    """
    # A segment the driver wrote is read back whole by pyarrow (_holds) and hashed in
    # numpy as Spark would (row_hash): no Spark job, unless a column is not an integer.
    tables = {i: obs for i, (_, _, obs) in enumerate(written) if isinstance(obs, pa.Table)}
    within = _facts_within(tables)
    jobs = {i: (written[i][1].path, table, i in within.values(), i not in within,
                early.taken.get(written[i][1].path) if early is not None else None)
            for i, table in tables.items()}
    checked = dict(zip(jobs, _each(_checked, jobs.values()), strict=True))
    hashed = {i: sums and sums[0] for i, (sums, _) in checked.items()}
    for facts, rel in within.items():  # hashed with their relation's tuple columns
        hashed[facts] = checked[rel][0] and checked[rel][0][1]
    rest = [i for i in range(len(written)) if hashed.get(i) is None]
    # What Spark wrote is read back by the driver too where it is small (scan_here), else by
    # one Spark job over all of it.
    found = {i: scan_here(written[i][1]) for i in rest}
    rest = [i for i in rest if found[i] is None]
    found.update(zip(rest, scan(spark, [written[i][1] for i in rest]).values(), strict=True))
    for i, (target, item, obs) in enumerate(written):
        sizes = part_files(item.path)
        if i not in found:  # the one file the driver wrote
            found[i] = {f: hashed[i] for f in sizes} if len(sizes) == 1 else {}
        files = {f: [sizes[f], *found[i].get(f, (0, "0"))] for f in sizes}
        got = (sum(v[1] for v in files.values()),
               f"{sum(int(v[2], 16) for v in files.values()):x}")
        if isinstance(obs, pa.Table):  # written from the driver: its file read back whole
            expected = (obs.num_rows, got[1] if checked[i][1] else "")
        else:
            expected = observed_result(obs)  # what Spark wrote, counted as it wrote it
        want = item.rows if item.rows >= 0 else expected[0]
        if got != expected or got[0] != want:
            raise StateError(f"{item.path}: error: {item.label} read back as "
                             f"{got[0]} rows, {want} were written; the state is "
                             f"unchanged at epoch {current}")
        target.update(checksum=got[1], files=files)
        if item.rows < 0:
            target["rows"] = got[0]


def _facts_within(tables: dict[int, pa.Table]) -> dict[int, int]:
    """Return, per table of base facts whose rows are another's tuple columns (a relation's
    without its count or rank: at a bootstrap, an input's, the same arrays), that table."""
    by_rows: dict[tuple, list[int]] = {}
    for i, t in tables.items():
        by_rows.setdefault((t.num_rows, tuple(t.column_names)), []).append(i)
    out: dict[int, int] = {}
    for i, table in tables.items():
        if table.num_columns < 2:
            continue
        for facts in by_rows.get((table.num_rows, tuple(table.column_names[:-1])), []):
            if facts not in out and table.select(tables[facts].column_names).equals(
                    tables[facts]):
                out[facts] = i
                break
    return out


def _checked(job: tuple) -> tuple[list | None, bool]:
    """Return a table's [(rows, checksum)], then those of its tuple columns if it holds
    facts (None where Spark must hash it, or not `hashed`), and whether the directory it was
    written to holds exactly its rows (read back already, if written early)."""
    path, table, holds_facts, hashed, early = job
    widths = [table.num_columns, table.num_columns - 1][:1 + holds_facts]
    sums, holds = early.result() if early is not None else (None, None)
    if hashed and sums is None:
        sums = checksums(table, widths)
    return (sums and sums[:len(widths)] if hashed else None), \
        (_holds(path, table) if holds is None else holds)


def _holds(path: Path, table: pa.Table) -> bool:
    """Return whether a directory's Parquet files hold exactly the table's rows, in order."""
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path, schema=table.schema,
                             page_checksum_verification=True).equals(table)
    except (OSError, pa.ArrowException):
        return False


def _each(fn, items) -> list:
    """Return fn over each item, two at a time where there are several (pyarrow's writes and
    numpy's hashing release the GIL: the driver's two cores)."""
    from concurrent.futures import ThreadPoolExecutor

    items = list(items)
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="levelflow-state") as pool:
        return list(pool.map(fn, items))


def write_all(frames: list[tuple], early: EarlyWrites | None = None) -> None:
    """Write each (DataFrame or Arrow table, directory) as Parquet: tables from the driver
    (but those `early` wrote already), frames by Spark concurrently (a small segment's write
    costs Spark's fixed overhead of a job more than its rows, so they overlap)."""
    from concurrent.futures import ThreadPoolExecutor

    if early is not None:
        frames = [f for f in frames if not (isinstance(f[0], pa.Table) and early.take(*f))]
        early.drop_rest()
    _each(lambda f: _write_table(*f), [f for f in frames if isinstance(f[0], pa.Table)])
    frames = [f for f in frames if not isinstance(f[0], pa.Table)]
    if len(frames) <= 1:
        for df, path in frames:
            df.write.parquet(str(path))
        return
    with ThreadPoolExecutor(max_workers=min(len(frames), 8),
                            thread_name_prefix="levelflow-write") as pool:
        for f in [pool.submit(df.write.parquet, str(path)) for df, path in frames]:
            f.result()


def _write_table(table: pa.Table, path: Path) -> None:
    """Write a table from the driver as the one Parquet part file of a new directory."""
    import pyarrow.parquet as pq

    path.mkdir(parents=True)
    # Dictionaries for text only: over numbers of many values they cost the write 2.3x
    # (3M rows of three int64 columns: 0.63 s against 0.28 s) for no smaller file.
    text = [f.name for f in table.schema if pa.types.is_string(f.type)
            or pa.types.is_large_string(f.type) or pa.types.is_binary(f.type)]
    # Integers delta-packed (DELTA_BINARY_PACKED, which Spark's vectorized reader reads):
    # node ids take their bits, not 8 bytes, and a count or rank column next to none
    # (3M edges with a count: written in 0.14 s against 0.22-0.36 s, 16 MB against 25-28 MB).
    ints = {f.name: "DELTA_BINARY_PACKED" for f in table.schema
            if pa.types.is_int32(f.type) or pa.types.is_int64(f.type)}
    # LZ4 (Parquet's LZ4_RAW, which Spark reads): files as small as Snappy's, written in
    # the same CPU time and read back 2-5x as fast (3M rows of three int64 columns: read
    # and compared in 0.09 s of CPU against 0.18 s, 28.5 MB against 30.8 MB).
    # Each page with its CRC (no measurable cost): `state check` finds any flipped byte of
    # it, also in a delta-packed block's padding, where no value changes.
    pq.write_table(table, path / f"part-00000-{uuid.uuid4()}.parquet", use_dictionary=text,
                   column_encoding=ints, compression="lz4", write_page_checksum=True)


def _written_early(table: pa.Table, path: Path, hashed: bool) -> tuple[list | None, bool]:
    """Return _checked's answer for `table` written to `path` (its checksums, of all its
    columns then of its tuple columns, if `hashed`) after writing and flushing its file
    (publish flushes it again, then clean: nothing changes in what is durable when)."""
    _write_table(table, path)
    fsync_all(list(path.iterdir()))
    sums = checksums(table, [table.num_columns, table.num_columns - 1]) if hashed else None
    return sums, _holds(path, table)


class EarlyWrites:
    """Tables a first epoch writes, flushes and reads back while its tasks still run (pyarrow
    releases the GIL: the driver's other core), each where its commit would write it under
    `tmp`, the commit's directory; the commit takes each it is about to write unchanged."""

    def __init__(self, tmp: Path, tables: dict[Path, pa.Table], hashed: set[Path]):
        from concurrent.futures import ThreadPoolExecutor

        self.tmp = tmp
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="levelflow-early")
        self.jobs = {path: (table, pool.submit(_written_early, table, path, path in hashed))
                     for path, table in tables.items()}
        pool.shutdown(wait=False)
        self.taken: dict[Path, Future] = {}  # path -> (checksums or None, read back whole)

    def take(self, table: pa.Table, path: Path) -> bool:
        """Return whether `table` is being written to `path` already (the same schema and
        rows, in order); a different one written there is removed, to be written anew."""
        early, future = self.jobs.pop(path, (None, None))
        if future is None:
            return False
        if early.equals(table):
            self.taken[path] = future
            return True
        future.exception()  # its files are made before they go
        shutil.rmtree(path, ignore_errors=True)
        return False

    def drop_rest(self) -> None:
        """Remove the tables written early that the commit does not write (none it took)."""
        for path, (_, future) in self.jobs.items():
            future.exception()
            shutil.rmtree(path, ignore_errors=True)
        self.jobs.clear()

    def wait(self) -> None:
        """Return once no early write runs (before their directory may go)."""
        for future in [f for _, f in self.jobs.values()] + list(self.taken.values()):
            future.exception()
