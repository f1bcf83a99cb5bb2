"""Fact files read once, vectorized: a file's bytes to its checked tuples as Arrow.

The reading rules are Soufflé's, as facts.py states them; here they apply to whole columns.
The bytes are gunzipped and checked as UTF-8, a byte order mark dropped, one CR before each
LF dropped, the header line skipped. A relation of numbers whose file holds nothing but
digits, minus signs, the delimiter and LFs is parsed by Polars straight to Int64. Other
fields are split by pyarrow's CSV reader (no quoting, every column a string) where the
delimiter is one byte and every line holds exactly the relation's fields; any other file (a
longer delimiter, a CR inside a line, an empty line, extra fields) is split line by line by
Polars (`splitn`, the rest of the line ignored). Each column
is then cast (a null after the cast is a value that is not a number) and checked at once.
The first line holding a bad value is then checked alone by facts.check_fact_lines, which
names the file, the line, the column and the field in one line as a line-by-line reader would.

Repeats are kept: who needs each tuple once makes them distinct once (`distinct_table` for
Spark, an incremental state or an update; the driver plan's evaluator in fixpoint.base_tuples),
rather than here and again there (0.3-0.5 s for 3M rows each time).

Read once: `run` checks every fact file before Spark starts (`keep=True`), and the task that
reads the relation later takes those rows instead of reading the file again (a file changed in
between is read again).
Changes: that hand-over, keyed by the file's identity, bounded by KEEP_BYTES.
"""

from __future__ import annotations

import gzip
import threading
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import polars as pl
import pyarrow as pa

from levelflow.engine import io_meter
from levelflow.engine.arrow_types import arrow_schema
from levelflow.tasks.functors import MAX_SYMBOL

if TYPE_CHECKING:
    from levelflow.tasks.ast import Decl

_BOM = b"\xef\xbb\xbf"
# _FLOAT of facts.py, whole field: the values Java's Double.parseDouble and Python's float()
# read alike (ASCII digits only).
_FLOAT = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
# Rows held from a check for the read that follows it (a few large inputs fit; the rest
# is read again).
KEEP_BYTES = 2 << 30


class FactRows(NamedTuple):
    """A fact file read: its tuples (columns c0.., one row per tuple line, repeats kept) and how
    many tuple lines it holds."""

    table: pa.Table
    lines: int


_kept: dict[tuple, FactRows] = {}
_kept_lock = threading.Lock()


def read_fact_rows(path: Path, decl: Decl, delimiter: str, headers: bool = False, *,
                   keep: bool = False) -> FactRows:
    """Return a fact file's checked tuples, repeats kept; raise facts.FactError at its first
    bad line. With `keep`, the rows are held for the next call on the same file, which takes them.
    """
    key = _identity(path, decl, delimiter, headers)
    with _kept_lock:
        held = _kept.pop(key, None) if key is not None else None
    if held is None:
        with io_meter.timed("reading"):
            held = _read(path, decl, delimiter, headers)
    if keep and key is not None:
        with _kept_lock:
            if sum(r.table.nbytes for r in _kept.values()) + held.table.nbytes <= KEEP_BYTES:
                _kept[key] = held
    return held


def kept_rows(path: Path, decl: Decl, delimiter: str, headers: bool = False) -> int | None:
    """Return the tuples (repeats counted) of a fact file held from its check (None: not
    held)."""
    key = _identity(path, decl, delimiter, headers)
    with _kept_lock:
        held = _kept.get(key) if key is not None else None
    return held.table.num_rows if held is not None else None


def _identity(path: Path, decl: Decl, delimiter: str, headers: bool) -> tuple | None:
    """Return what names one version of a file read one way (None: it cannot be read)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, decl, delimiter,
            headers)


def _read(path: Path, decl: Decl, delimiter: str, headers: bool) -> FactRows:
    """Return a fact file's checked tuples (the work of read_fact_rows)."""
    from levelflow.engine.fact_checks import FactError

    if not delimiter:
        raise FactError(f"{path}:1:1: error: empty delimiter for relation {decl.name}")
    data = _tuple_bytes(path, headers)
    first = 2 if headers else 1  # the line number of the first tuple line
    if decl.arity == 0 or not data:
        lines = _line_count(data)
        table = pa.table({"c0": [True][:lines]}, arrow_schema(decl)) if decl.arity == 0 else \
            arrow_schema(decl).empty_table()
        return FactRows(table, lines)
    values = _plain_numbers(data, decl, delimiter)
    if values is not None:
        lines = values.height  # a row for every line, an empty one too (refused as null)
    else:
        lines = _line_count(data)
        fields, line_at = _fields(data, decl.arity, delimiter)
        values = _checked(path, fields, decl, delimiter, _odd_symbol_chars(data, delimiter),
                          line_at, first, long=len(data) > MAX_SYMBOL)
    if decl.shapes:  # records and ADTs: each distinct text read once (engine/record_facts.py)
        from levelflow.engine.record_facts import record_frame

        values = record_frame(path, _lines(data), decl, delimiter, first, FactError)
    table = values.to_arrow(compat_level=pl.CompatLevel.oldest())
    return FactRows(table.cast(arrow_schema(decl)), lines)


def distinct_table(table: pa.Table) -> pa.Table:
    """Return a table's rows each once, in the order of their first occurrence (the table
    itself if no row repeats)."""
    from levelflow.engine.plans.columnar import distinct  # plans import this module

    frame = pl.from_arrow(table)
    unique = distinct(frame, maintain_order=True)
    if unique is frame:
        return table
    return unique.to_arrow(compat_level=pl.CompatLevel.oldest()).cast(table.schema)


def _tuple_bytes(path: Path, headers: bool) -> bytes:
    """Return the file's tuple lines as UTF-8 bytes: gunzipped, checked, without a byte order
    mark, the CR before each LF dropped, and the header line with `headers`."""
    from levelflow.engine.fact_checks import FactError

    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except OSError as e:
        why = e.strerror or f"not a valid gzip file: {e}"
        raise FactError(f"{path}:1:1: error: cannot read fact file ({why})") from None
    except EOFError:
        raise FactError(f"{path}:1:1: error: cannot read fact file (a truncated gzip "
                        f"file)") from None
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
            raise FactError(f"{path}:{line}:{col}: error: not UTF-8 text (byte "
                            f"0x{data[e.start]:02x})") from None
    data = data.removeprefix(_BOM)
    if b"\r" in data:
        # One CR dropped from the end of every line: before each LF, and at the very end
        # (whose line then ends as the others do, so that it still counts as one).
        data = data.replace(b"\r\n", b"\n")
        if data.endswith(b"\r"):
            data = data[:-1] + b"\n"
    if headers:
        end = data.find(b"\n")
        data = data[end + 1:] if end >= 0 else b""
    return data


def _odd_symbol_chars(data: bytes, delimiter: str) -> str:
    """Return the characters a symbol may not hold that occur in the file (TAB, CR): a field
    never holds its delimiter, and a file with neither needs no symbol checked."""
    return "".join(c for c in "\t\r" if c not in delimiter and c.encode() in data)


def _fields(data: bytes, arity: int, delimiter: str):
    """Return (the first `arity` fields of every line as String columns field_0.., null where a
    line has fewer; a function giving line i's text)."""
    frame = _csv_fields(data, arity, delimiter)
    if frame is not None:
        # The CSV path took only lines of exactly `arity` fields: each line is its fields.
        return frame, lambda i: delimiter.join(frame.row(i))
    lines = _lines(data)
    frame = lines.str.splitn(delimiter, arity + 1).struct.unnest()
    return frame.select([f"field_{i}" for i in range(arity)]), lambda i: lines[i]


def _csv_fields(data: bytes, arity: int, delimiter: str) -> pl.DataFrame | None:
    """Return the fields by pyarrow's CSV reader, or None where it would not split them as
    Soufflé does: a delimiter longer than a byte, a CR left inside a line (the reader ends
    lines there), an empty line where several fields are expected (it reads one as all
    empty), or a line with other than `arity` fields (it refuses those)."""
    import pyarrow.csv as pacsv

    if len(delimiter.encode()) != 1 or delimiter in "\r\n\"" or b"\r" in data or \
            (arity > 1 and (data.startswith(b"\n") or b"\n\n" in data)):
        return None
    names = [f"field_{i}" for i in range(arity)]
    # a line with more or fewer fields: None, split line by line instead
    table = _read_csv(data, delimiter, pacsv.ConvertOptions(
        column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False,
        check_utf8=False), names)
    return None if table is None else pl.from_arrow(table)


def _read_csv(data: bytes, delimiter: str, convert, names: list[str]) -> pa.Table | None:
    """Return the lines of `data` as pyarrow's CSV reader splits them on a one-byte delimiter,
    no quoting or escapes, converted as `convert` says; None where it refuses a line."""
    import pyarrow.csv as pacsv

    try:
        return pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=names, block_size=4 << 20),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=False,
                                             double_quote=False, escape_char=False,
                                             ignore_empty_lines=False),
            convert_options=convert)
    except pa.ArrowInvalid:
        return None


def _plain_numbers(data: bytes, decl: Decl, delimiter: str) -> pl.DataFrame | None:
    """Return the columns (c0..) of a relation of numbers whose file holds only digits, minus
    signs, its one-byte delimiter and LFs, parsed by Polars' CSV reader straight to Int64;
    None for any other file, or where a field is not a number of its type.

    The CSV readers' integer parsers also take " 5", "+5" or "0x10", so one is only trusted on
    those bytes, where each field it takes is [-]?[0-9]+; it gives a row for every line (an
    empty or short line as nulls) and refuses a long line, a field it cannot parse or past
    64 bits. On 3M edge rows Polars took 0.26 s where pyarrow's took 0.64-0.96 s, and reading
    strings and casting them 4x that."""
    one = delimiter.encode()
    if any(t not in ("number", "unsigned") for t in decl.types) or len(one) != 1 or \
            one in b"\r\n\"0123456789-" or data.translate(None, b"0123456789-\n" + one):
        return None
    names = [f"c{i}" for i in range(decl.arity)]
    try:
        frame = pl.read_csv(data, has_header=False, separator=delimiter, quote_char=None,
                            schema=dict.fromkeys(names, pl.Int64))
    except pl.exceptions.PolarsError:
        return None  # a bad field or field count: the string path says which line
    # a null (an empty field) or a negative unsigned: the string path says where, too
    bad = [pl.col(c).is_null() | (pl.col(c) < 0 if t == "unsigned" else False)
           for c, t in zip(names, decl.types, strict=True)]
    if frame.select(pl.any_horizontal(bad).any()).item():
        return None
    return frame


def _line_count(data: bytes) -> int:
    """Return the lines of UTF-8 bytes (a last one without its LF counts)."""
    return data.count(b"\n") + (not data.endswith(b"\n") and bool(data))


def _lines(data: bytes) -> pl.Series:
    """Return the lines of UTF-8 bytes (split on LF only, no last empty line) as a Series."""
    import pyarrow.compute as pc

    text = pa.LargeStringArray.from_buffers(
        1, pa.array([0, len(data)], pa.int64()).buffers()[1], pa.py_buffer(data))
    lines = pc.split_pattern(text, "\n").flatten()
    if data.endswith(b"\n"):
        lines = lines.slice(0, len(lines) - 1)
    return pl.from_arrow(lines)


def _checked(path: Path, fields: pl.DataFrame, decl: Decl, delimiter: str, odd: str,
             line_at, first: int, *, long: bool) -> pl.DataFrame:
    """Return the fields cast to the relation's types (columns c0..); raise FactError at the
    first line with a missing field or a value that is not of its attribute's type. `long`:
    the file is long enough to hold a symbol longer than MAX_SYMBOL."""
    values, bad = [], []
    for i, primitive in enumerate(decl.types):
        field = pl.col(f"field_{i}")
        if primitive == "symbol":
            value, why = field, field.is_null()
            if odd:
                why = why | field.str.contains(f"[{odd}]")
            if long:
                why = why | (field.str.len_chars() > MAX_SYMBOL)
        elif primitive == "float":
            value = field.cast(pl.Float64, strict=False)
            why = value.is_null() | ~value.is_finite() | ~field.str.contains(_FLOAT)
        elif primitive == "number":  # Polars reads [+-]?[0-9]+ within 64 bits, else null
            value = field.cast(pl.Int64, strict=False)
            why = value.is_null()
        else:  # unsigned: up to 2^64 - 1, held as the Int64 of its bits; "-0" is 0
            signed = field.cast(pl.Int64, strict=False)
            value = pl.coalesce(signed, field.cast(pl.UInt64, strict=False).reinterpret(
                signed=True))
            why = value.is_null() | (signed < 0).fill_null(False)
        values.append(value.alias(f"c{i}"))
        bad.append(why)
    out = fields.lazy().select(*values, pl.any_horizontal(bad).alias("_bad")).collect()
    flags = out["_bad"]
    if flags.any():
        _raise_at(path, decl, delimiter, line_at(int(flags.arg_max())),
                  first + int(flags.arg_max()))
    return out.drop("_bad")


def _raise_at(path: Path, decl: Decl, delimiter: str, line: str, lineno: int) -> None:
    """Raise the one-line FactError for a tuple line a vectorized check found bad."""
    from levelflow.engine.fact_checks import FactError, check_fact_lines

    # The line had its last CR dropped already; the check drops one CR, so it gets one back.
    check_fact_lines(path, [line + "\r"], decl, delimiter, False, first=lineno)
    # The exact check must agree: a line it passes was read wrongly here, not by the user.
    raise FactError(f"{path}:{lineno}:1: error: levelflow could not read this line of "
                    f"{decl.name} (an internal error; please report it)")
