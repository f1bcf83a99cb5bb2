"""Soufflé fact files in and out: `.facts` reading (engine/fact_reader.py: read once, checked
vectorized, shipped to Spark as Arrow) and writing.

Input format (Soufflé's): one tuple per line, fields split by a literal delimiter (TAB unless
given; several characters allowed), no quoting or escaping, a trailing CR dropped, extra fields
ignored, a UTF-8 byte order mark skipped; with `headers=true` the first line is a header and
skipped. A nullary relation holds when its file has at least one line.
Output format: one line per tuple (after a header of the attribute names with `headers=true`),
numbers in decimal, floats as Soufflé's stream writes them (`%.17g`: numbers.float_text),
symbols as they are (a TAB or newline too), `()` for a nullary relation that holds, an empty
file for an empty relation. A fact file that does not exist is read as empty, with a warning
(checks.check_fact_files), as Soufflé reads it.
Compression as Soufflé's: an input file that starts with gzip's magic bytes is read through
gzip whatever its name (`edge.facts.gz`); `compress=true` writes an output file gzipped, under
the name it would have anyway.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from levelflow.engine.fact_checks import (
    FactError,
    check_fact_lines,
)
from levelflow.engine.types import column_names, empty_relation, relation_schema
from levelflow.tasks.numbers import float_text, order_key, unsigned_value

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from levelflow.tasks.ast import IO, Decl

# empty_relation and relation_schema live in engine.types; they are re-exported here because
# callers that do I/O (the runner) reach for them next to read_facts/write_relation.
__all__ = ["COLLECT_ROWS", "FactError", "check_fact_lines", "empty_relation", "fact_frame",
           "fact_table", "format_rows", "format_value", "input_path", "io_compress", "io_delimiter",
           "io_headers",
           "output_path", "read_facts", "relation_schema", "validate_facts", "write_relation"]

# Relations up to this many rows are written from one collect(); bigger ones are streamed.
COLLECT_ROWS = 50_000
def missing_input_warning(path: Path, relation: str) -> str:
    """Return the warning of an `.input` whose fact file does not exist: the relation is read
    as empty, as Soufflé reads it (it says `Error loading R data: Cannot open fact file`)."""
    return (f"{path}: warning: cannot open fact file for relation {relation} (no such file); "
            f"{relation} is read as empty, as Soufflé reads it")


def input_missing(path: Path) -> bool:
    """Return whether an `.input`'s fact file does not exist at all (read as empty)."""
    return not path.exists() and not path.is_symlink()


def input_path(io: IO, factdir: str | Path) -> Path:
    """Return the fact file of an `.input`: `filename=` (relative to factdir) or R.facts."""
    return Path(factdir) / io.file_name


def output_path(io: IO, outdir: str | Path) -> Path:
    """Return the file of an `.output`: `filename=` (relative to outdir) or R.csv."""
    return Path(outdir) / io.file_name


def io_delimiter(io: IO | None) -> str:
    """Return the field delimiter of a directive (`delimiter=` option, TAB by default)."""
    return (io.option("delimiter") if io is not None else None) or "\t"


def io_compress(io: IO | None) -> bool:
    """Return whether a directive's file is written gzipped (`compress=true`)."""
    return io is not None and io.option("compress", "false") == "true"


def io_headers(io: IO | None) -> bool:
    """Return whether a directive's file starts with a header line (`headers=true`)."""
    return io is not None and io.option("headers", "false") == "true"


def validate_facts(path: Path, decl: Decl, delimiter: str, headers: bool = False) -> int:
    """Return the number of tuple lines of a fact file after checking every field.

    Raises FactError naming the file, line and column. With `headers`, line 1 is not a tuple.
    The rows read are kept for the read that follows (engine/fact_reader.py).
    """
    from levelflow.engine.fact_reader import read_fact_rows

    return read_fact_rows(path, decl, delimiter, headers, keep=True).lines


def read_facts(spark: SparkSession, decl: Decl, path: str | Path,
               delimiter: str = "\t", headers: bool = False) -> DataFrame:
    """Return the distinct tuples of a validated fact file as a DataFrame (c0..c{n-1}), read
    and checked once in the driver and shipped to Spark as Arrow (engine/fact_reader.py)."""
    from levelflow.engine.spark_ship import distinct_frame

    return distinct_frame(spark, decl, fact_table(Path(path), decl, delimiter, headers))


def fact_table(path: Path, decl: Decl, delimiter: str = "\t", headers: bool = False):
    """Return a validated fact file's distinct tuples as an Arrow table (c0..), in the order of
    their first lines: the rows read_facts gives, with no Spark job."""
    from levelflow.engine.fact_reader import distinct_table, read_fact_rows

    return distinct_table(read_fact_rows(Path(path), decl, delimiter, headers).table)


def fact_frame(path: Path, decl: Decl, delimiter: str = "\t", headers: bool = False):
    """Return a validated fact file's tuples, repeats kept, as a Polars frame (c0.., the
    relation's frame schema) read in the driver, with no Spark, for the driver plan's evaluator,
    which makes them distinct (fixpoint.base_tuples); a missing file reads as empty, as Soufflé
    reads it (checks.check_fact_files warns)."""
    import polars as pl

    from levelflow.engine.fact_reader import read_fact_rows
    from levelflow.engine.plans.columnar import frame_schema

    schema = frame_schema(decl)
    if input_missing(Path(path)):
        return pl.DataFrame(schema=schema)
    frame = pl.from_arrow(read_fact_rows(Path(path), decl, delimiter, headers).table)
    return frame.select([pl.col(c).cast(t) for c, t in schema.items()])


def format_value(value: object, primitive: str) -> str:
    """Return one field as Soufflé prints it (floats to 17 significant digits, an unsigned's
    bits read as unsigned)."""
    if primitive == "float":
        return float_text(value)
    if primitive == "unsigned":
        return str(unsigned_value(value))
    return str(value)


def format_rows(rows: Iterable, decl: Decl, delimiter: str = "\t") -> Iterator[str]:
    """Return an iterator of output lines (with newline) for rows of a relation."""
    types = decl.types
    if decl.arity == 0:
        for _ in rows:
            yield "()\n"
            return
        return
    if decl.shapes:
        from levelflow.engine.record_facts import format_record_rows
        yield from format_record_rows(rows, decl, delimiter, format_value)
        return
    plain = all(t not in ("float", "unsigned") for t in types)
    for row in rows:
        if plain:
            yield delimiter.join(map(str, row)) + "\n"
        else:
            yield delimiter.join(format_value(v, t) for v, t in zip(row, types, strict=True)) + "\n"


def write_relation(df: DataFrame, decl: Decl, path: str | Path, delimiter: str = "\t", *,
                   sort: bool = True, headers: bool = False, shown: str | Path | None = None,
                   compress: bool = False) -> int:
    """Return the number of tuples written to `path` (Soufflé .csv format, streamed, sorted).

    With `headers`, the attribute names come first, on one line, as Soufflé writes them.
    `shown` is the file an error names (the final path of a temporary one, unused now that
    every symbol is written as it is); `compress` gzips it.
    """
    from levelflow.engine.incremental.backends.driver_rows import held_table

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = held_table(df)
    if table is None and decl.arity and not decl.shapes and "float" not in decl.types:
        table = _arrow_if_it_fits(df)
    if table is not None:  # rows the driver holds (or now fetched whole): formatted by Polars
        return _write_held(table, decl, path, delimiter, sort=sort, headers=headers,
                           shown=shown, compress=compress)
    # Imported only now: while Spark starts on its own thread, a second thread importing
    # PySpark can meet its modules half made (ImportError, a circular import).
    import pyspark.sql.functions as F

    if decl.arity == 0:
        rows = df.limit(1).collect()
    else:
        # One job fetches a small relation whole; a big one is sorted by Spark and streamed
        # a partition at a time, so the driver never holds it all.
        rows = df.limit(COLLECT_ROWS + 1).collect()
        # Sorted as the values are ordered: an unsigned by its unsigned value.
        unsigned = [i for i, t in enumerate(decl.types) if t == "unsigned"]
        if len(rows) <= COLLECT_ROWS:
            if sort:
                rows.sort(key=lambda r: tuple(order_key(v) if i in unsigned else v
                                              for i, v in enumerate(r)) if unsigned else r)
        else:
            keys = [F.col(c).bitwiseXOR(F.lit(-(2**63))) if i in unsigned else F.col(c)
                    for i, c in enumerate(df.columns)]
            rows = (df.orderBy(*keys) if sort else df).toLocalIterator()
    count = 0
    opener = gzip.open if compress else open
    with opener(path, "wt", encoding="utf-8", newline="\n") as out:
        if headers:
            out.write(delimiter.join(decl.attrs) + "\n")
        # Symbols are written as they are, a TAB or newline too, as Soufflé's writer does.
        for line in format_rows(rows, decl, delimiter):
            out.write(line)
            count += 1
    return count


def _arrow_if_it_fits(df):
    """Return a Spark frame's rows as one Arrow table (one job) if the driver's memory holds
    them (memory.memory_rows), else None: a Row a tuple formatted in Python took 7.4 s for
    940k tuples, where Polars formats the table's columns at once."""
    from levelflow.engine.memory import memory_rows

    most = memory_rows()
    table = df.limit(most + 1).toArrow()
    return table if table.num_rows <= most else None


def _write_held(table, decl: Decl, path: Path, delimiter: str, *, sort: bool, headers: bool,
                shown, compress: bool) -> int:
    """Return the number of tuples written from an Arrow table the driver holds, as
    write_relation writes a DataFrame's."""
    opener = gzip.open if compress else open
    with opener(path, "wt", encoding="utf-8", newline="\n") as out:
        if headers:
            out.write(delimiter.join(decl.attrs) + "\n")
        return held_lines(table, decl, out, delimiter, sort=sort)


def held_lines(table, decl: Decl, out, delimiter: str = "\t", *, sort: bool = True) -> int:
    """Return the number of tuples written to the text stream `out` from an Arrow table the
    driver holds (Soufflé's format); plain columns formatted by Polars, not tuple by tuple."""
    import polars as pl

    frame = pl.from_arrow(table).select(column_names(decl.arity))
    if decl.arity == 0 or decl.shapes or "float" in decl.types:
        if sort and decl.arity:  # as write_relation sorts: unsigned by unsigned value
            frame = frame.sort([pl.col(c).reinterpret(signed=False) if t == "unsigned"
                                else pl.col(c) for c, t in zip(frame.columns, decl.types,
                                                               strict=True)])
        rows = frame.head(1).rows() if decl.arity == 0 else frame.rows()
        out.writelines(format_rows(rows, decl, delimiter))
        return min(frame.height, 1) if decl.arity == 0 else frame.height
    # An unsigned is held as the Int64 of its bits: sorted and printed as its value.
    # Symbols are written as they are, a TAB or newline too, as Soufflé's writer does.
    frame = frame.with_columns([pl.col(c).reinterpret(signed=False)
                                for c, t in zip(frame.columns, decl.types, strict=True)
                                if t == "unsigned"])
    if sort:
        frame = frame.sort(frame.columns)
    if frame.height:
        lines = frame.select(pl.concat_str([pl.col(c).cast(pl.String) for c in frame.columns],
                                           separator=delimiter))
        out.write(lines.to_series().str.join("\n").item() + "\n")
    return frame.height
