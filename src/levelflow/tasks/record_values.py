"""Record and ADT values as the engine holds them, and their text in fact files and outputs.

A record or ADT value is one symbol: its canonical JSON text (`[1,"a",[2,"b"]]`; nil is
`null`; an ADT branch is its name then its fields, `["Num",1]`, an enumeration's `["Mon"]`).
Equal values have equal text, so equality, joins, sets and the incremental engine work on
them as on any symbol, every backend makes and takes them apart with the same two functors
(`#pack:CODES` and `#get:CODE`, plain Python over rows), and the value needs no table: it is
the same in every process, epoch and restart. CODES name each field's kind: i number,
u unsigned, f float, s symbol, r a record or ADT, b an ADT branch's name (its first element).

Fact files and outputs carry Soufflé's text form instead (its ReadStream / WriteStream):
`[1, a]`, `nil`, `$Num(1)`, `$Mon`; symbols inside are written bare and read bare (up to `,`
and the closing bracket) or double-quoted with backslash escapes.

Every value that enters from outside (fact files, diffs, rows, DataFrames) is checked against
its declared type, field by field and nested, and a value nested deeper than MAX_DEPTH is
refused before anything recursive reads it (`check_depth`).
"""

from __future__ import annotations

import json
import math
import re

from levelflow.tasks.numbers import float_text, held_unsigned, unsigned_value

NIL = "null"
CODES = {"number": "i", "unsigned": "u", "float": "f", "symbol": "s"}
MAX_DEPTH = 200  # records and ADTs nested deeper are refused (Python's recursion stays far off)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1

_dump = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_load = json.loads


def code_of(ftype: str) -> str:
    """Return the one-letter kind of a field type (a primitive, else a record or ADT: r)."""
    return CODES.get(ftype, "r")


def kind_of(code: str) -> str:
    """Return the engine's primitive of a field kind (records travel as symbols)."""
    return {"i": "number", "u": "unsigned", "f": "float"}.get(code, "symbol")


def _plain(value, code: str):
    if code in "iu":
        return int(value)
    if code == "f":
        return float(value)
    if code in "sb":
        return str(value)
    return _load(value)


def pack(codes: str, *values) -> str:
    """Return the canonical text of a record (or ADT branch) with these field values."""
    return _dump([_plain(v, c) for v, c in zip(values, codes, strict=True)])


def get(code: str, value: str, index: int):
    """Return field `index` of a record's canonical text as a value of kind `code`, or None
    (nil, or a branch without that field)."""
    fields = _load(value)
    if not isinstance(fields, list) or not 0 <= index < len(fields):
        return None
    field = fields[index]
    # A pattern's fields may be taken before its branch is tested: a field of another kind
    # is no value, as the branch test would drop the row anyway.
    if code == "r":
        return _dump(field) if field is None or isinstance(field, list) else None
    if code == "s":
        return field if isinstance(field, str) else None
    if isinstance(field, list | str) or field is None:
        return None
    return float(field) if code == "f" else field


def pack_mismatch(name: str, types: list) -> str | None:
    """Return why arguments of these types (primitives, "int" for an integer constant, None
    when unknown) cannot build record functor `name`, or None when they can."""
    head, _, codes = name.partition(":")
    if head != "#pack":
        return None
    fields = codes[1:] if codes.startswith("b") else codes
    for i, (code, got) in enumerate(zip(fields, types[len(codes) - len(fields):],
                                        strict=True), 1):
        want = kind_of(code)
        if got is None or got == want or got == "int" and code in "iuf":
            continue
        what = "a record or ADT" if code == "r" else _WHAT[want]
        return f"element {i} is {'an integer' if got == 'int' else _WHAT[got]}, not {what}"
    return None


def function(name: str):
    """Return the plain Python function of a record functor `#pack:CODES` or `#get:CODE`."""
    head, _, codes = name.partition(":")
    if head == "#pack":
        return lambda *values: pack(codes, *values)
    return lambda value, index: get(codes, value, index)


def result_kind(name: str) -> str:
    """Return the engine primitive a record functor gives."""
    head, _, codes = name.partition(":")
    return "symbol" if head == "#pack" else kind_of(codes)


# -- checks -------------------------------------------------------------------------------

_WHAT = {"number": "a number", "unsigned": "an unsigned number", "float": "a float",
         "symbol": "a symbol"}
_DIGITS = 20  # an integer of more digits is out of range whatever its value: never converted


def check_depth(text: str) -> None:
    """Raise ValueError (offset 0) when a value's text, Soufflé's form or JSON, nests records
    or ADTs deeper than MAX_DEPTH; brackets inside double quotes do not count."""
    if text.count("[") + text.count("(") <= MAX_DEPTH:
        return  # it cannot nest deeper: two C-level counts for nearly every value
    depth, quoted, escaped = 0, False, False
    for c in text:
        if quoted:
            escaped, quoted = (False, True) if escaped else (c == "\\", c != '"')
        elif c == '"':
            quoted = True
        elif c in "[(":
            depth += 1
            if depth > MAX_DEPTH:
                raise ValueError(f"records or ADTs nested deeper than {MAX_DEPTH}", 0)
        elif c in "])":
            depth -= 1


def problem(value, ty: str) -> str | None:
    """Return what a plain value (int, float or str) fails to be as primitive `ty` ("a
    number", "a 64-bit number", ...), or None when it is one."""
    if ty == "symbol":
        return None if isinstance(value, str) else _WHAT[ty]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _WHAT[ty]
    if ty == "float":
        return None if math.isfinite(value) else "a finite float"
    if not isinstance(value, int):
        return _WHAT[ty]
    if ty == "unsigned":  # Soufflé's unsigned is 64 bits: 0 to 2^64 - 1
        return _WHAT[ty] if value < 0 else "an unsigned number below 2^64" \
            if value > UINT64_MAX else None
    return None if INT64_MIN <= value <= INT64_MAX else "a 64-bit number"


def constant_problem(value, kind: str, ty: str) -> str | None:
    """Return what a program constant (its value and Const kind) fails to be as a field of
    primitive `ty`, or None (an integer constant fits a float field, as in Soufflé)."""
    if (kind == "symbol") != (ty == "symbol") or kind == "float" != ty or \
            kind == "unsigned" != ty:
        return _WHAT[ty]
    return problem(value, ty)


def why(path: tuple[int, ...], shown: str, what: str) -> str:
    """Return the message for element `path` (1-based, nested) of a value being `shown`, not
    `what`."""
    if not path:
        return f"{shown} is not {what}"
    return f"element {'.'.join(map(str, path))} is {shown}, not {what}"


def short(text: str, limit: int = 60) -> str:
    """Return a value's text cut to `limit` characters for a message."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _at(path: tuple[int, ...]) -> str:
    return f"element {'.'.join(map(str, path))}: " if path else ""


def _count(name: str, want: int, got: int | str) -> str:
    return f"{name} has {want} field{'s' * (want != 1)}, found {got}"


def _show(value) -> str:
    return "nil" if value is None else short(_dump(value), 40)


# -- Soufflé's text form, and the engine's form checked -------------------------------------

class Types:
    """The record and ADT types of a program: name -> (kind, ((branch, ((field, type)...))...))."""

    __slots__ = ("table", "branches")

    def __init__(self, record_types: tuple) -> None:
        self.table = {name: (kind, branches) for name, kind, branches in record_types}
        self.branches = {name: dict(branches) for name, _, branches in record_types}

    def write(self, value: str, ty: str) -> str:
        """Return a canonical value of type `ty` in Soufflé's text form."""
        return self._write(_load(value), ty)

    def _write(self, value, ty: str) -> str:
        if ty not in self.table:
            if ty == "float":
                return float_text(value)
            return str(unsigned_value(value) if ty == "unsigned" else value)
        kind, branches = self.table[ty]
        if kind == "record":
            if value is None:
                return "nil"
            fields = branches[0][1]
            return "[" + ", ".join(self._write(v, f[1]) for v, f in zip(value, fields,
                                                                          strict=True)) + "]"
        fields = self.branches[ty][value[0]]
        if not fields:
            return "$" + value[0]
        inner = ", ".join(self._write(v, f[1]) for v, f in zip(value[1:], fields, strict=True))
        return f"${value[0]}({inner})"

    def read(self, text: str, ty: str) -> str:
        """Return the canonical value of a field in Soufflé's text form, checked against type
        `ty`; ValueError (with the offset where it went wrong as its second argument) when it
        is not one."""
        check_depth(text)
        reader = _Reader(text, self)
        value = reader.value(ty, "", ())
        reader.space()
        if reader.pos != len(text):
            raise ValueError(f"unexpected {text[reader.pos]!r} after the value", reader.pos)
        return _dump(value)

    def canonical(self, text: str, ty: str) -> str:
        """Return a value in the engine's form (JSON, as levelflow's DataFrames hold it)
        checked against type `ty` and written canonically; ValueError naming the element."""
        check_depth(text)
        try:
            value = _load(text)
        except ValueError:
            raise ValueError("not JSON, the form levelflow's DataFrames hold a record in "
                             "([1,\"a\"], null, [\"Num\",1])") from None
        return _dump(self._checked(value, ty, ()))

    def _checked(self, value, ty: str, path: tuple[int, ...]):
        if ty not in self.table:
            what = problem(value, ty)
            if what is not None:
                raise ValueError(why(path, _show(value), what))
            return float(value) if ty == "float" else value
        kind, branches = self.table[ty]
        if kind == "record":
            fields = branches[0][1]
            if value is None:
                return None
            if not isinstance(value, list):
                raise ValueError(why(path, _show(value), f"a {ty}"))
            if len(value) != len(fields):
                raise ValueError(_at(path) + _count(ty, len(fields), len(value)))
            first = 0
        else:
            name = value[0] if isinstance(value, list) and value else None
            fields = self.branches[ty].get(name) if isinstance(name, str) else None
            if fields is None:
                raise ValueError(why(path, _show(value), f"a branch of {ty}"))
            if len(value) != 1 + len(fields):
                raise ValueError(_at(path) + _count(f"${name}", len(fields), len(value) - 1))
            first = 1
        out = value[:first]
        for i, (v, (_, ft)) in enumerate(zip(value[first:], fields, strict=True), 1):
            out.append(self._checked(v, ft, path + (i,)))
        return out


# ASCII digits only, as fact files take them (Python's \d and int() would take others).
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)",
                     re.I | re.ASCII)
_NAME = re.compile(r"[A-Za-z0-9_?.]+")
_SPACE = re.compile(r"\s+")


class _Reader:
    """A cursor over one field's text (Soufflé's ReadStream::readRecord / readADT); `path` is
    the element being read, for messages."""

    __slots__ = ("text", "pos", "types")

    def __init__(self, text: str, types: Types) -> None:
        self.text, self.pos, self.types = text, 0, types

    def space(self) -> None:
        pos = self.pos
        if pos < len(self.text) and self.text[pos].isspace():
            self.pos = _SPACE.match(self.text, pos).end()

    def char(self, c: str) -> None:
        self.space()
        if self.text[self.pos:self.pos + 1] != c:
            raise ValueError(f"expected '{c}' but found {self.found()}", self.pos)
        self.pos += 1

    def found(self) -> str:
        """Return what stands at the cursor, for a message."""
        return repr(self.text[self.pos]) if self.pos < len(self.text) else "the end"

    def value(self, ty: str, stops: str, path: tuple[int, ...]):
        self.space()
        if ty in self.types.table:
            kind, branches = self.types.table[ty]
            if kind == "record":
                return self.record(ty, branches[0][1], path)
            return self.branch(ty, path)
        if ty == "symbol":
            return self.symbol(stops)
        m = _NUMBER.match(self.text, self.pos)
        if m is None:
            raise ValueError(f"{_at(path)}expected {_WHAT[ty]}", self.pos)
        token = m.group()
        if ty == "float" or not token.lstrip("+-").isdigit():
            number = float(token)
        else:  # not converted when it has too many digits to be in range
            number = int(token) if len(token) <= _DIGITS + 1 else UINT64_MAX + 1
        if not (ty == "number" and INT64_MIN <= number <= INT64_MAX and type(number) is int):
            what = problem(number, ty)  # the common case above needs no call
            if what is not None:
                raise ValueError(why(path, short(token, 30), what), self.pos)
        self.pos = m.end()
        if ty == "unsigned":  # up to 2^64 - 1, held as the int64 of its bits
            return held_unsigned(number)
        return number

    def symbol(self, stops: str) -> str:
        text, start = self.text, self.pos
        if text.startswith('"', start):
            out, i = [], start + 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                out.append(text[i])
                i += 1
            if i >= len(text):
                raise ValueError("unterminated quoted symbol", start)
            self.pos = i + 1
            return "".join(out)
        end = min((i for i in (text.find(c, start) for c in stops) if i >= 0), default=-1)
        if end < 0:
            raise ValueError("unexpected end of the record", len(text))
        self.pos = end
        return text[start:end]

    def fields(self, fields: tuple, close: str, label: str, path: tuple[int, ...]) -> list:
        """Return the fields up to `close` (consumed); too few or too many said of `label`
        (the record type or the branch)."""
        out, text, stops = [], self.text, "," + close
        for i, (_, ftype) in enumerate(fields):
            if i:
                self.space()
                c = text[self.pos:self.pos + 1]
                if c != ",":
                    if c == close:
                        raise ValueError(_count(_at(path) + label, len(fields), i), self.pos)
                    raise ValueError(f"expected ',' but found {self.found()}", self.pos)
                self.pos += 1
            out.append(self.value(ftype, stops, path + (i + 1,)))
        self.space()
        c = text[self.pos:self.pos + 1]
        if c != close:
            if c == ",":
                raise ValueError(_count(_at(path) + label, len(fields), "more"), self.pos)
            raise ValueError(f"expected '{close}' but found {self.found()}", self.pos)
        self.pos += 1
        return out

    def record(self, ty: str, fields: tuple, path: tuple[int, ...]) -> list | None:
        if self.text.startswith("nil", self.pos):
            self.pos += 3
            return None
        self.char("[")
        return self.fields(fields, "]", ty, path)

    def branch(self, ty: str, path: tuple[int, ...]) -> list:
        self.char("$")
        m = _NAME.match(self.text, self.pos)
        name = m.group() if m else ""
        fields = self.types.branches[ty].get(name)
        if fields is None:
            raise ValueError(why(path, f"${name}", f"a branch of {ty}"), self.pos)
        self.pos = m.end()
        if not fields:
            return [name]
        self.char("(")
        return [name] + self.fields(fields, ")", "$" + name, path)
