"""Record and ADT values as the engine holds them, and their text in fact files and outputs.

A record or ADT value is one symbol: its canonical JSON text (`[1,"a",[2,"b"]]`; nil is
`null`; an ADT branch is its name then its fields, `["Num",1]`, an enumeration's `["Mon"]`).
Equal values have equal text, so equality, joins, sets and the incremental engine work on
them as on any symbol, every backend makes and takes them apart with the same two functors
(`#pack:CODES` and `#get:CODE`, plain Python over rows), and the value needs no table: it is
the same in every process, epoch and restart. CODES name each field's kind: i number,
u unsigned, f float, s symbol, r a record or ADT.

Fact files and outputs carry Soufflé's text form instead (its ReadStream / WriteStream):
`[1, a]`, `nil`, `$Num(1)`, `$Mon`; symbols inside are written bare and read bare (up to `,`
and the closing bracket) or double-quoted with backslash escapes.
"""

from __future__ import annotations

import json
import re

from levelflow.tasks.numbers import float_text, held_unsigned, unsigned_value

NIL = "null"
CODES = {"number": "i", "unsigned": "u", "float": "f", "symbol": "s"}

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
    if code == "s":
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


# -- Soufflé's text form --------------------------------------------------------------------

class Types:
    """The record and ADT types of a program: name -> (kind, ((branch, ((field, type)...))...))."""

    __slots__ = ("table",)

    def __init__(self, record_types: tuple) -> None:
        self.table = {name: (kind, branches) for name, kind, branches in record_types}

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
        fields = dict(branches)[value[0]]
        if not fields:
            return "$" + value[0]
        inner = ", ".join(self._write(v, f[1]) for v, f in zip(value[1:], fields, strict=True))
        return f"${value[0]}({inner})"

    def read(self, text: str, ty: str) -> str:
        """Return the canonical value of a field in Soufflé's text form; ValueError (with the
        offset where it went wrong as its second argument) when it is not one."""
        reader = _Reader(text, self.table)
        value = reader.value(ty, "")
        reader.space()
        if reader.pos != len(text):
            raise ValueError(f"unexpected {text[reader.pos]!r} after the value", reader.pos)
        return _dump(value)


_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)", re.I)
_NAME = re.compile(r"[A-Za-z0-9_?.]+")


class _Reader:
    """A cursor over one field's text (Soufflé's ReadStream::readRecord / readADT)."""

    __slots__ = ("text", "pos", "table")

    def __init__(self, text: str, table: dict) -> None:
        self.text, self.pos, self.table = text, 0, table

    def space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def char(self, c: str) -> None:
        self.space()
        if not self.text.startswith(c, self.pos):
            got = repr(self.text[self.pos]) if self.pos < len(self.text) else "the end"
            raise ValueError(f"expected '{c}' but found {got}", self.pos)
        self.pos += 1

    def value(self, ty: str, stops: str):
        self.space()
        if ty in self.table:
            kind, branches = self.table[ty]
            return self.record(branches[0][1]) if kind == "record" else self.branch(ty, branches)
        if ty == "symbol":
            return self.symbol(stops)
        m = (_FLOAT if ty == "float" else _INT).match(self.text, self.pos)
        if m is None:
            raise ValueError(f"expected a {ty}", self.pos)
        self.pos = m.end()
        number = float(m.group()) if ty == "float" else int(m.group())
        if ty == "unsigned":  # up to 2^64 - 1, held as the int64 of its bits
            if not 0 <= number < 2**64:
                raise ValueError(f"{m.group()} is not a {ty}", m.start())
            return held_unsigned(number)
        if ty != "float" and not -2**63 <= number < 2**63:
            raise ValueError(f"{m.group()} is not a {ty}", m.start())
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

    def record(self, fields: tuple) -> list | None:
        if self.text.startswith("nil", self.pos):
            self.pos += 3
            return None
        self.char("[")
        out = []
        for i, (_, ftype) in enumerate(fields):
            if i:
                self.char(",")
            out.append(self.value(ftype, ",]"))
        self.char("]")
        return out

    def branch(self, ty: str, branches: tuple) -> list:
        self.char("$")
        m = _NAME.match(self.text, self.pos)
        name = m.group() if m else ""
        fields = dict(branches).get(name)
        if fields is None:
            raise ValueError(f"'{name}' is not a branch of {ty}", self.pos)
        self.pos = m.end()
        out: list = [name]
        if not fields:
            return out
        self.char("(")
        for i, (_, ftype) in enumerate(fields):
            if i:
                self.char(",")
            out.append(self.value(ftype, ",)"))
        self.char(")")
        return out
