"""Fact-file fields of record and ADT attributes: Soufflé's text form read into the values the
engine holds, and written back (tasks/record_values.py)."""

from __future__ import annotations

from pathlib import Path

from levelflow.tasks.ast import Decl
from levelflow.tasks.record_values import Types, short

_POLARS = {"number": "Int64", "unsigned": "Int64", "float": "Float64", "symbol": "String"}


def record_rows(path: Path, lines: list[str], decl: Decl, delimiter: str, first: int,
                error: type[Exception]) -> list[tuple]:
    """Return the distinct rows, sorted, of a checked fact file's tuple lines (line `first`
    first), record fields read and checked against their types; `error` (facts.FactError,
    UpdateError) naming file, line, column and field at the earliest bad one."""
    table = record_frame(path, lines, decl, delimiter, first, error).unique()
    return table.sort(table.columns).rows()


def record_frame(path: Path, lines, decl: Decl, delimiter: str, first: int,
                 error: type[Exception]):
    """Return record_rows' rows as a Polars frame (c0..), one per line, from the lines (a list
    or a Polars Series).

    Each distinct text of a record column is read once (a file of many rows holds few
    distinct values per column), and the rows are put together on Polars columns."""
    import polars as pl

    types = Types(decl.record_types)
    fields = pl.Series(lines, dtype=pl.String).str.strip_suffix("\r") \
        .str.splitn(delimiter, decl.arity + 1).struct.unnest()
    columns, bad = [], []
    for i, (shape, primitive) in enumerate(zip(decl.shapes, decl.types, strict=True)):
        column = fields[f"field_{i}"]
        if not shape:  # its values passed facts.check_fact_lines
            columns.append(column.cast(getattr(pl, _POLARS[primitive])).alias(f"c{i}"))
            continue
        distinct = column.unique(maintain_order=True)  # in the order of their first lines
        values = []
        for text in distinct:
            try:
                values.append(types.read(text, shape))
            except ValueError as e:  # the column's earliest bad line: no need to read on
                bad.append((int((column == text).arg_max()), i, text, e))
                break
        else:
            columns.append(column.replace_strict(distinct, pl.Series(values, dtype=pl.String))
                           .alias(f"c{i}"))
    if bad:
        index, i, text, e = min(bad, key=lambda b: b[:2])
        raise error(_located(path, first + index, lines[index], decl, delimiter, i, text, e))
    return pl.DataFrame(columns)


def _located(path: Path, lineno: int, line: str, decl: Decl, delimiter: str, i: int,
             text: str, e: ValueError) -> str:
    """Return the one line naming where field i of a fact line is not a value of its type."""
    at = e.args[1] if len(e.args) > 1 else 0
    before = line.split(delimiter, i)[:i]
    col = 1 + sum(map(len, before)) + i * len(delimiter) + at
    return f"{path}:{lineno}:{col}: error: {field_error(decl, i, text, e.args[0])}"


def field_error(decl: Decl, i: int, text: str, why: str) -> str:
    """Return the message for attribute i of a relation holding `text`, not a value of its
    record or ADT type because of `why`."""
    return f"field {i + 1} of {decl.name}: {short(text)}: {why}"


def format_record_rows(rows, decl: Decl, delimiter: str, format_value):
    """Return output lines (with newline) of rows with record or ADT attributes, the other
    attributes written by `format_value` (facts.format_value)."""
    types = Types(decl.record_types)
    for row in rows:
        yield delimiter.join(types.write(v, s) if s else format_value(v, t)
                             for v, s, t in zip(row, decl.shapes, decl.types, strict=True)) + "\n"
