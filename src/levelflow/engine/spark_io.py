"""Relations from and to Spark: DataFrames, Parquet files and catalog tables.

A DataFrame given for a relation is matched to its declaration once, here: its columns by the
declaration's attribute names when it has them all, else by position; each column's Spark type
must hold the attribute's (integral for number and unsigned, floating or integral for float,
string for symbol); then one aggregate job refuses nulls, negative unsigned values and
non-finite floats, and one more fetches the distinct values of record and ADT columns to check
them against their types (engine/record_columns.py). Every refusal is one InputError line
naming the relation and the column.
What comes out is the engine's form: distinct rows, columns c0..c{n-1} (engine/types.py).
Constant: the type rules above. Nothing here keeps state between calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from levelflow.engine.sql_text import quoted
from levelflow.engine.types import SQL_TYPES, relation_schema
from levelflow.errors import InputError
from levelflow.tasks.ast import IO
from levelflow.tasks.ordinals import ORD, OrdinalsInput, ordinals_input

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from levelflow.tasks.ast import Decl

# `.input`/`.output` IO= values whose relation is a Spark DataFrame rather than a text file.
FRAME_IO = ("parquet", "spark", "sqlite")
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_FLOATING = ("float", "double")
_ACCEPTS = {"number": _INTEGRAL, "unsigned": _INTEGRAL, "float": _FLOATING + _INTEGRAL,
            "symbol": ("string",)}
_KIND = {"number": "an integral", "unsigned": "an integral", "float": "a numeric",
         "symbol": "a string"}


@dataclass(frozen=True, slots=True)
class FrameInput(IO):
    """An `.input` whose facts are a DataFrame handed in from Python (`inputs=` of run)."""

    frame: object = field(default=None, compare=False, repr=False)


def frame_kind(io: IO | None) -> str | None:
    """Return how a directive's relation is held outside text files: parquet, spark, sqlite,
    frame, ordinals."""
    if isinstance(io, FrameInput):
        return "frame"
    if isinstance(io, OrdinalsInput):
        return "ordinals"  # `ord`'s symbol table, built here (engine/ordinals.py)
    kind = io.option("IO") if io is not None else None
    return kind if kind in FRAME_IO else None


def parquet_path(io: IO, folder: str | Path) -> Path:
    """Return the Parquet file or folder of a directive: `filename=` (relative to folder) or
    R.parquet."""
    return Path(folder) / io.file_name


def check_parquet(io: IO, factdir) -> Path | None:
    """Return an `IO=parquet` input's path if it exists (None for other inputs); else raise
    InputError naming the relation."""
    if frame_kind(io) != "parquet":
        return None
    path = parquet_path(io, factdir if factdir is not None else Path.cwd())
    if not path.exists():
        raise InputError(f"relation {io.relation} ({path}): error: no such Parquet file or "
                         f"folder")
    return path


def with_frames(program, frames: dict):
    """Return the program with each relation of `frames` read from its DataFrame.

    Raises InputError for a name that is not an input relation of the program.
    """
    import dataclasses

    from pyspark.sql import DataFrame

    inputs = dict(program.inputs)
    for name, df in frames.items():
        df = built(df)
        if name not in program.inputs:
            what = "an input relation" if name in program.decls else "a relation"
            raise InputError(f"inputs: {name!r} is not {what} of {program.file}")
        if not isinstance(df, DataFrame):
            raise InputError(f"inputs: relation {name} expects a DataFrame, got "
                             f"{type(df).__name__}")
        inputs[name] = FrameInput("input", name, (("IO", "frame"),), program.inputs[name].loc,
                                  frame=df)
    ordinals = inputs.get(ORD)
    if isinstance(ordinals, OrdinalsInput):  # `ord`'s table reads the frames now
        inputs[ORD] = ordinals_input(ordinals.constants, program.decls, inputs)
    return dataclasses.replace(program, inputs=inputs)


def ordinal_rows(spark, io: IO, factdir) -> list[tuple[str, int]]:
    """Return `@ord`'s tuples (symbol, its number): its sources' fact files read in the driver,
    only a DataFrame, Parquet or table source by Spark (`spark` is asked for then only)."""
    from levelflow.engine.ordinals import table_rows
    from levelflow.engine.session import session_of

    def read_frame(src_decl, src):  # a frame source's relation; None for a fact file
        if frame_kind(src) is None:
            return None
        return read_frame_input(session_of(spark), src_decl, src, factdir)
    return table_rows(io, factdir, read_frame)


def read_frame_input(spark: SparkSession, decl: Decl, io: IO, factdir, distinct: bool = True
                     ) -> DataFrame:
    """Return the relation's distinct tuples (c0..) from its DataFrame, Parquet or table,
    checked against its declaration (one job unless the schema rules every bad value out);
    `distinct=False`: its tuples as they come, for a caller that makes them distinct."""
    kind = frame_kind(io)
    if kind == "ordinals":
        return spark.createDataFrame(ordinal_rows(spark, io, factdir), relation_schema(decl))
    if kind == "frame":
        df, what = io.frame, f"relation {decl.name} (DataFrame)"
    elif kind == "parquet":
        path = check_parquet(io, factdir)
        what = f"relation {decl.name} ({path})"
        df = _spark_call(lambda: spark.read.parquet(str(path.resolve())), what)
    elif kind == "sqlite":  # read in the driver, checked there (engine/sqlite_io.py)
        from levelflow.engine.incremental.backends.driver_rows import frame_of_table
        from levelflow.engine.sqlite_io import read_sqlite

        df = frame_of_table(spark, read_sqlite(decl, io, factdir), relation_schema(decl))
        return df.distinct() if distinct else df
    else:
        table = io.option("table")
        what = f"relation {decl.name} (table {table})"
        df = _spark_call(lambda: spark.table(table), what)
    df = conform(decl, df, what)
    check_values(decl, df, what)
    if decl.shapes:  # records and ADTs: each distinct value checked against its type
        from levelflow.engine.record_columns import frame_records
        df = frame_records(decl, df, what, InputError)
    return df.distinct() if distinct else df


def _spark_call(make, what: str):
    """Return make() with a Spark analysis error (missing table, unreadable file) as one line."""
    from pyspark.errors import PySparkException

    try:
        return make()
    except PySparkException as e:
        from levelflow.engine.workers import one_line

        raise InputError(f"{what}: error: {one_line(e)}") from None


def conform(decl: Decl, df: DataFrame, what: str) -> DataFrame:
    """Return df's columns matched to the declaration and cast to its types, named c0..

    By name when df has every attribute name (in any order, others ignored), else by position
    with exactly the declaration's number of columns.
    """
    import pyspark.sql.functions as F
    from pyspark.sql import DataFrame

    df = built(df)
    if not isinstance(df, DataFrame):
        raise InputError(f"{what}: error: expects a DataFrame, got {type(df).__name__}")
    if decl.arity == 0:
        return df.limit(1).select(F.lit(True).alias("c0"))
    return df.select(*conformed_columns(decl, df.schema.fields, what))


def conformed_columns(decl: Decl, fields: list, what: str) -> list:
    """Return the Columns c0.. that conform picks and casts from a schema's `fields`."""
    import pyspark.sql.functions as F

    cols = []
    for i, at in enumerate(chosen_fields(decl, [f.name for f in fields], what)):
        f = fields[at]
        check_field_type(decl, i, f.name, f.dataType.simpleString(), what)
        cols.append(F.col(f"`{f.name}`").cast(SQL_TYPES[decl.types[i]]).alias(f"c{i}"))
    return cols


def chosen_fields(decl: Decl, names: list[str], what: str) -> list[int]:
    """Return the positions of the schema fields (`names`) matched to the declaration's
    attributes: by name when it has them all, else by position with exactly the declaration's
    number of columns; else raise InputError."""
    by_name = {name: i for i, name in enumerate(names)}
    if all(a in by_name for a in decl.attrs):
        return [by_name[a] for a in decl.attrs]
    if len(names) == decl.arity:
        return list(range(decl.arity))
    raise InputError(f"{what}: error: expects {decl.arity} columns ({', '.join(decl.attrs)}), "
                     f"found {len(names)} ({', '.join(names)})")


def check_field_type(decl: Decl, i: int, name: str, sql: str, what: str) -> None:
    """Return None if a column `name` of Spark SQL type `sql` can hold attribute i; else raise
    InputError naming both."""
    primitive = decl.types[i]
    if sql not in _ACCEPTS[primitive]:
        raise InputError(f"{what}: error: column {name!r} is {sql}, {decl.name}."
                         f"{decl.attrs[i]} is {primitive} (needs {_KIND[primitive]} column)")


def check_values(decl: Decl, df: DataFrame, what: str) -> None:
    """Return None if no conformed row holds a null, a negative unsigned or a non-finite float;
    else raise InputError naming the first such column. One job, none when nothing can be bad."""
    import pyspark.sql.functions as F

    checks = []
    nullable = {f.name: f.nullable for f in df.schema.fields}
    for i, primitive in enumerate(decl.types):
        c = F.col(f"c{i}")
        if nullable.get(f"c{i}", True):
            checks.append((i, "null", c.isNull()))
        if primitive == "unsigned":
            checks.append((i, "a negative number (unsigned)", c < 0))
        if primitive == "float":
            checks.append((i, "NaN or infinite", F.isnan(c) | c.isin(float("inf"), float("-inf"))))
    if not checks:
        return
    aggs = [F.max(cond.cast("int")).alias(f"b{j}") for j, (_, _, cond) in enumerate(checks)]
    row = df.agg(*aggs).collect()[0]
    for j, (i, why, _) in enumerate(checks):
        if row[f"b{j}"]:
            raise InputError(f"{what}: error: a row holds {why} in {decl.name}."
                             f"{decl.attrs[i]} (column {i + 1})")


def rows_of_frame(decl: Decl, df: DataFrame, what: str) -> list[tuple]:
    """Return the conformed, checked rows of a DataFrame as Python tuples (one job)."""
    return rows_of_arrow(decl, conform(decl, df, what).toArrow(), what)


def rows_of_arrow(decl: Decl, table, what: str) -> list[tuple]:
    """Return the rows of an Arrow table with columns c0.. as tuples, its values checked on
    the columns first, then turned into tuples once."""
    if decl.arity == 0:
        return [()] if table.num_rows else []
    table = checked_arrow(decl, table, what)
    return list(zip(*(table.column(f"c{i}").to_pylist() for i in range(decl.arity)),
                    strict=True))


def checked_arrow(decl: Decl, table, what: str):
    """Return an Arrow table with columns c0.. (of the engine's types) once no value is null,
    a negative unsigned or a non-finite float, its record columns checked and canonical; else
    raise InputError as check_values and frame_records do."""
    for i, primitive in enumerate(decl.types):
        why = _bad_arrow(table.column(f"c{i}"), primitive)
        if why is not None:
            raise InputError(f"{what}: error: a row holds {why} in {decl.name}."
                             f"{decl.attrs[i]} (column {i + 1})")
    if decl.shapes:  # records and ADTs: each distinct value checked against its type
        from levelflow.engine.record_columns import arrow_records
        table = arrow_records(decl, table, what, InputError)
    return table


def _bad_arrow(col, primitive: str) -> str | None:
    """Return what makes an Arrow column's values unfit for the primitive type, or None."""
    import pyarrow.compute as pc

    if col.null_count:
        return "null"
    if primitive == "unsigned" and len(col) and pc.min(col).as_py() < 0:
        return "a negative number (unsigned)"
    if primitive == "float" and len(col) and not pc.all(pc.is_finite(col)).as_py():
        return "NaN or infinite"
    return None


def built(df):
    """Return a relation levelflow gave back (a frame built on first use) as the DataFrame it
    stands for; anything else as it is."""
    from levelflow.engine.incremental.backends.driver_rows import LazyFrame

    return df.force() if isinstance(df, LazyFrame) else df


def named(decl: Decl, df: DataFrame) -> DataFrame:
    """Return a relation's DataFrame with the declaration's attribute names as column names.

    A name kept as c<i> where it is not a valid column (a nullary relation's flag, a repeated
    attribute name).
    """
    if decl.arity == 0:
        return df
    seen: set[str] = set()
    names = []
    for i, a in enumerate(decl.attrs):
        ok = a and a not in seen and a.lower() not in {s.lower() for s in seen}
        names.append(a if ok else f"c{i}")
        seen.add(names[-1])
    from levelflow.engine.incremental.backends.driver_rows import held_renamed

    def build():
        return df.selectExpr(*[f"c{i} AS {quoted(n)}" for i, n in enumerate(names)])

    # Rows the driver holds stay held: reading them back (collect, count) starts no job.
    held = held_renamed(df, names, build)
    return build() if held is None else held


def read_input(spark: SparkSession, decl: Decl, io: IO, factdir) -> DataFrame:
    """Return an `.input` relation's distinct tuples (c0..): its fact file, DataFrame, Parquet
    or table."""
    if frame_kind(io) is not None:
        return read_frame_input(spark, decl, io, factdir)
    from levelflow.engine.facts import (
        empty_relation,
        input_missing,
        input_path,
        io_delimiter,
        io_headers,
        read_facts,
    )

    path = input_path(io, factdir)
    if input_missing(path):  # read as empty, as Soufflé does (checks.check_fact_files warns)
        return empty_relation(spark, decl)
    return read_facts(spark, decl, path, io_delimiter(io), io_headers(io))


def estimate_rows(io: IO, factdir) -> int | None:
    """Return the rows of a DataFrame, Parquet or table input (before distinct), None for a
    fact file. Parquet's come from its footers, with no Spark job; the others are counted."""
    kind = frame_kind(io)
    if kind is None:
        return None
    if kind == "parquet":
        import pyarrow.dataset as ds

        path = parquet_path(io, factdir if factdir is not None else Path.cwd())
        try:
            return ds.dataset(str(path), format="parquet").count_rows()
        except (OSError, ValueError):
            return 0  # refused with its own line when the task reads it
    if kind == "frame":
        return io.frame.count()
    if kind == "sqlite":
        from levelflow.engine.sqlite_io import count_rows
        return count_rows(io, factdir)
    if kind == "ordinals":  # the constants at least; the input facts' symbols follow
        return len(io.constants)
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    try:
        return spark.table(io.option("table")).count()
    except Exception:  # noqa: BLE001 - a missing table is refused, in one line, when read
        return 0
