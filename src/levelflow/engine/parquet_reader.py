"""`IO=parquet` inputs read in the driver (pyarrow's dataset, Polars' reader): no Spark job.

What comes out is what Spark's read gives the driver (spark_io.read_frame_input with
distinct=False, then toArrow): the columns the declaration matches in the file's schema
(spark_io.chosen_fields), each of a type Spark would accept for its attribute, cast to the
engine's types, with no null, negative unsigned or non-finite float, record columns checked and
canonical (spark_io.checked_arrow); every refusal the same InputError line as Spark's path.
A file whose reading by Spark is not matched cheaply here gives None, and the caller reads it
with Spark (read_parquet says which).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from levelflow.engine import io_meter
from levelflow.engine.spark_io import check_field_type, check_parquet, checked_arrow, chosen_fields
from levelflow.tasks.ast import IO, Decl

if TYPE_CHECKING:
    import pyarrow.dataset as ds

# The Spark SQL type Spark reads a Parquet column of each Arrow type as (Spark's
# ParquetToSparkSchemaConverter: UINT_8/16/32 widen to the next signed type). A type missing
# here (UINT_64 is decimal(20,0) in Spark, binary, dates, nested types...) is read by Spark,
# which refuses it with its own type name or reads it as it does.
_SPARK_SQL = {
    pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint",
    pa.uint8(): "smallint", pa.uint16(): "int", pa.uint32(): "bigint",
    pa.float32(): "float", pa.float64(): "double",
    pa.string(): "string", pa.large_string(): "string",
}
# The engine's Arrow type of each primitive (engine/types.py's Spark types as Arrow's).
_ARROW = {"number": pa.int64(), "unsigned": pa.int64(), "float": pa.float64()}


def read_parquet(decl: Decl, io: IO, factdir) -> pa.Table | None:
    """Return an `IO=parquet` input's rows as an Arrow table (c0.., repeats kept), conformed
    and checked as Spark's path does; None where only Spark reads it as Spark does: not a
    readable Parquet file or folder of parts, a folder with no part or with subfolders
    (Spark discovers partition columns), parts of different schemas, column names equal but
    for case (Spark refuses them) or holding a backquote, a chosen column of a type not in
    _SPARK_SQL. Its seconds count as reading in `run`'s summary (engine/io_meter.py)."""
    with io_meter.timed("reading"):
        return _read(decl, io, factdir)


def _read(decl: Decl, io: IO, factdir) -> pa.Table | None:
    """Return read_parquet's answer."""
    path = check_parquet(io, factdir)
    what = f"relation {decl.name} ({path})"
    dataset = _single_schema_dataset(path.resolve())
    if dataset is None:
        return None
    if decl.arity == 0:  # conform reads no column: the relation holds if any row is there
        return pa.table({"c0": pa.array([True] * bool(dataset.count_rows()), pa.bool_())})
    schema = dataset.schema
    names = schema.names
    if len({n.lower() for n in names}) < len(names):
        return None
    chosen = [schema.field(at) for at in chosen_fields(decl, names, what)]
    for i, f in enumerate(chosen):
        sql = _spark_sql(f.type)
        if sql is None or "`" in f.name:
            return None
        check_field_type(decl, i, f.name, sql, what)
    table = _columns(dataset, [f.name for f in chosen])
    if table is None:
        return None  # Spark's own line says what is wrong with the file
    columns = {f"c{i}": _cast(table.column(i), primitive)
               for i, primitive in enumerate(decl.types)}
    return checked_arrow(decl, pa.table(columns), what)


def _columns(dataset: ds.Dataset, names: list[str]) -> pa.Table | None:
    """Return the named columns of the dataset's files as Arrow, read by Polars' Parquet reader
    (on 3M rows of two int64 columns 0.10-0.15 s where pyarrow's read_table took 0.25-0.30 s);
    None if it cannot read them."""
    import polars as pl

    try:
        frame = pl.read_parquet(dataset.files, columns=names, hive_partitioning=False)
    except (OSError, pl.exceptions.PolarsError):
        return None
    return frame.to_arrow(compat_level=pl.CompatLevel.oldest())


def _single_schema_dataset(path: Path) -> ds.Dataset | None:
    """Return the Parquet dataset at `path` (a file, or a folder of part files whose names do
    not start with `.` or `_`, as Spark lists them), or None if it is none or its parts
    differ in schema or lie in subfolders."""
    import pyarrow.dataset as ds  # here: it imports pandas, 0.3-0.6 s a command that reads none

    try:
        dataset = ds.dataset(str(path), format="parquet")
        if not dataset.files or (path.is_dir() and any(Path(f).parent != path
                                                       for f in dataset.files)):
            return None
        first = dataset.schema
        if not all(frag.physical_schema.equals(first) for frag in dataset.get_fragments()):
            return None
    except (OSError, pa.ArrowException):
        return None
    return dataset


def _spark_sql(arrow_type: pa.DataType) -> str | None:
    """Return the Spark SQL type name Spark reads a column of `arrow_type` as, None if not
    known here."""
    if pa.types.is_dictionary(arrow_type):  # Arrow's categorical strings: plain in Parquet
        return _SPARK_SQL.get(arrow_type.value_type) if pa.types.is_string(
            arrow_type.value_type) or pa.types.is_large_string(arrow_type.value_type) else None
    return _SPARK_SQL.get(arrow_type)


def _cast(col: pa.ChunkedArray, primitive: str) -> pa.ChunkedArray:
    """Return a column as the engine holds the primitive, cast as Spark's `cast` does (an
    integer to a float rounds to the nearest double; the others widen)."""
    if primitive == "symbol":
        return col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col
    return pc.cast(col, _ARROW[primitive], safe=False)
