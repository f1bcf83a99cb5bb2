"""Fact-file fields of record and ADT attributes: Soufflé's text form read into the values the
engine holds, and written back (tasks/record_values.py)."""

from __future__ import annotations

from pathlib import Path

from levelflow.tasks.ast import Decl
from levelflow.tasks.record_values import Types

_PLAIN = {"number": int, "unsigned": int, "float": float, "symbol": str}


def record_rows(path: Path, lines: list[str], decl: Decl, delimiter: str, first: int,
                error: type[Exception]) -> list[tuple]:
    """Return the distinct rows of a checked fact file's tuple lines (line `first` first),
    record fields read; `error` (facts.FactError) naming file, line and column at a malformed
    one."""
    types = Types(decl.record_types)
    rows = set()
    for lineno, line in enumerate(lines, first):
        fields = line.removesuffix("\r").split(delimiter, decl.arity)[:decl.arity]
        row = []
        for i, (text, shape, primitive) in enumerate(zip(fields, decl.shapes, decl.types,
                                                         strict=True)):
            if not shape:
                row.append(_PLAIN[primitive](text))
                continue
            try:
                row.append(types.read(text, shape))
            except ValueError as e:
                at = e.args[1] if len(e.args) > 1 else 0
                col = 1 + sum(len(f) for f in fields[:i]) + i * len(delimiter) + at
                raise error(f"{path}:{lineno}:{col}: error: field {i + 1} is not a {shape}"
                                f": {e.args[0]} ({decl.name}.{decl.attrs[i]})") from None
        rows.add(tuple(row))
    return sorted(rows)


def format_record_rows(rows, decl: Decl, delimiter: str, format_value):
    """Return output lines (with newline) of rows with record or ADT attributes, the other
    attributes written by `format_value` (facts.format_value)."""
    types = Types(decl.record_types)
    for row in rows:
        yield delimiter.join(types.write(v, s) if s else format_value(v, t)
                             for v, s, t in zip(row, decl.shapes, decl.types, strict=True)) + "\n"
