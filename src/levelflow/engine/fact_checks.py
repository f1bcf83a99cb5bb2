"""One fact file's lines checked as Soufflé reads them: each field against its type, one error
line `file:line:col: error: ...` at the first bad one (engine/fact_reader.py checks whole
columns and asks here for the first bad line's message)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

from levelflow.errors import LevelflowError
from levelflow.tasks.functors import MAX_SYMBOL

if TYPE_CHECKING:
    from levelflow.tasks.ast import Decl

_LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)
# A subset of what Java's Double.parseDouble accepts, so a validated field always casts in Spark.
# ASCII digits only: Python's \d (and float()) would take Arabic-Indic digits, Spark does not.
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# A fact file's field cannot hold these: a newline ends the line, and a TAB or CR in a field
# is refused as a likely mistake (a TAB-separated file split wrong, a stray CR).
_UNWRITABLE = re.compile(r"[\t\n\r]")
UNWRITABLE_WHY = "a symbol with a TAB, CR or newline, which a fact file cannot carry"
TOO_LONG_WHY = f"longer than {MAX_SYMBOL:,} characters, the longest symbol levelflow holds"


class FactError(LevelflowError):
    """A fact file is missing or malformed; str() is `path:line:col: error: ...`."""


def field_error(field: str, primitive: str) -> str | None:
    """Return why `field` is not a valid value of the primitive type, or None if it is."""
    if primitive == "symbol":
        if len(field) > MAX_SYMBOL:
            return TOO_LONG_WHY
        return UNWRITABLE_WHY if _UNWRITABLE.search(field) else None
    if primitive == "float":
        if not _FLOAT.fullmatch(field):
            return "not a float"
        return None if math.isfinite(float(field)) else "beyond the range of a float"
    digits = field[1:] if field[:1] in "+-" else field
    if not (digits.isascii() and digits.isdigit()):
        return "not a number" if primitive == "number" else "not an unsigned number"
    value = int(field)
    if primitive == "unsigned" and value < 0:
        return "not an unsigned number"
    if primitive == "unsigned":
        return "above 2^64-1, the largest unsigned" if value >= 2**64 else None
    if not _LONG_MIN <= value <= _LONG_MAX:
        return "out of the 64-bit range"
    return None


def shown(value: str) -> str:
    """Return a value as an error line quotes it: repr(), cut short if long."""
    return repr(value) if len(value) <= 60 else repr(value[:40]) + f"... ({len(value):,} chars)"


def check_fact_lines(path: Path, lines: list[str], decl: Decl, delimiter: str,
                     headers: bool, first: int = 1) -> int:
    """Return the number of tuple lines among a fact file's lines (the first is line `first`)
    after checking every field, one line at a time."""
    if not delimiter:
        raise FactError(f"{path}:1:1: error: empty delimiter for relation {decl.name}")
    if headers:
        lines, first = lines[1:], first + 1
    arity = decl.arity
    if arity == 0:
        return len(lines)
    width = len(delimiter)
    checked = [(i, t) for i, t in enumerate(decl.types) if t != "symbol"]
    symbols = [(i, t) for i, t in enumerate(decl.types) if t == "symbol"]
    # A field cannot hold the delimiter, so only the other unwritable characters need a look.
    others = "".join(c for c in "\t\r" if c not in delimiter)
    probe = re.compile(f"[{re.escape(others)}]") if symbols and others else None
    for lineno, line in enumerate(lines, first):
        if line.endswith("\r"):
            line = line[:-1]
        fields = line.split(delimiter, arity)
        if len(fields) < arity:
            hint = " (fields are TAB-separated)" if delimiter == "\t" and " " in line else ""
            raise FactError(f"{path}:{lineno}:{len(line) + 1}: error: {decl.name} expects "
                            f"{arity} fields, found {len(fields)}{hint}")
        # Symbols are only looked at when the line holds a character no symbol may hold, or
        # is longer than a symbol may be.
        for i, primitive in (checked if len(line) <= MAX_SYMBOL and
                             (probe is None or not probe.search(line)) else checked + symbols):
            why = field_error(fields[i], primitive)
            if why is not None:
                col = 1 + sum(len(f) for f in fields[:i]) + i * width
                raise FactError(f"{path}:{lineno}:{col}: error: field {i + 1} "
                                f"{shown(fields[i])} is {why} ({decl.name}.{decl.attrs[i]})")
    return len(lines)
