"""Update input, validated: fact literals `edge(1,"a")`, fact files, `+r(..)`/`-r(..)` diffs.

Everything here is pure Python and runs before any Spark job: a bad update is refused whole,
with one line `file:line: error: ...`, and nothing is applied.
An update is a list of `Op(sign, relation, row)`, applied in order (sign +1 insert, -1 remove).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from levelflow.engine.fact_checks import TOO_LONG_WHY, FactError, field_error, shown
from levelflow.engine.facts import fact_table, io_delimiter, io_headers
from levelflow.errors import LevelflowError
from levelflow.tasks.ast import Program
from levelflow.tasks.functors import MAX_SYMBOL
from levelflow.tasks.lexer import unescape
from levelflow.tasks.numbers import held_unsigned


class UpdateError(LevelflowError):
    """An update names an unknown relation, has the wrong arity or a badly typed value."""


@dataclass(frozen=True, slots=True)
class Op:
    """One base-fact change: sign +1 inserts `row` into input relation `relation`, -1 removes."""

    sign: int
    relation: str
    row: tuple


def _split_args(text: str, nested: bool = False) -> list[str] | None:
    """Return the comma-separated arguments of `text` (quotes respected, and with `nested`
    the commas inside records' [...] and ADTs' (...) too), or None if unbalanced."""
    args, cur, quoted, i, depth = [], [], False, 0, 0
    while i < len(text):
        c = text[i]
        if quoted:
            if c == "\\" and i + 1 < len(text):
                cur.append(c + text[i + 1])
                i += 2
                continue
            quoted = c != '"'
            cur.append(c)
        elif c == '"':
            quoted = True
            cur.append(c)
        elif c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            if nested and c in "[(":
                depth += 1
            elif nested and c in "])":
                depth -= 1
            cur.append(c)
        i += 1
    if quoted:
        return None
    last = "".join(cur).strip()
    if args or last:
        args.append(last)
    return args


_A = {"number": "a number", "unsigned": "an unsigned number", "float": "a float",
      "symbol": "a symbol"}


def _unquote(arg: str) -> str:
    """Return a symbol argument without its quotes and escapes (bare words as they are)."""
    if len(arg) >= 2 and arg[0] == arg[-1] == '"':
        return unescape(arg[1:-1])  # the program's own escapes, so a literal reads alike in both
    return arg


def convert(value: str, primitive: str) -> int | float | str:
    """Return a field converted to its primitive type; raise ValueError(why) if it does not parse.

    Numbers and floats pass the same check as a field of a fact file.
    """
    if primitive == "symbol":  # any symbol, a newline too: a diff writes it as \n
        value = _unquote(value)
        if len(value) > MAX_SYMBOL:
            raise ValueError(TOO_LONG_WHY)
        return value
    why = field_error(value, primitive)
    if why is not None:
        raise ValueError(why)
    if primitive == "unsigned":  # up to 2^64 - 1, held as the int64 of its bits
        return held_unsigned(int(value, 10))
    return float(value) if primitive == "float" else int(value, 10)


def parse_literal(program: Program, text: str, where: str = "<input>") -> tuple[str, tuple]:
    """Return (relation, row) of a fact literal like `edge(1, "a")`; raise UpdateError."""
    text = text.strip().removesuffix(".").strip()
    open_at = text.find("(")
    if open_at <= 0 or not text.endswith(")"):
        raise UpdateError(f"{where}: error: expected a fact like rel(1, \"a\"), got {text!r}")
    name = text[:open_at].strip()
    check_input(program, name, where)
    decl = program.decls[name]
    args = _split_args(text[open_at + 1:-1], bool(decl.shapes))
    if args is None:
        raise UpdateError(f"{where}: error: unterminated string in {text!r}")
    _check_arity(name, decl.arity, len(args), "arguments", where)
    row = []
    for i, (arg, primitive) in enumerate(zip(args, decl.types, strict=True)):
        if decl.shapes and decl.shapes[i]:
            row.append(read_record(decl, i, arg, where, UpdateError))
            continue
        try:
            row.append(convert(arg, primitive))
        except ValueError as e:
            raise UpdateError(f"{where}: error: argument {i + 1} {shown(arg)} is {e} "
                              f"({name}.{decl.attrs[i]})") from None
    return name, tuple(row)


def _check_arity(name: str, arity: int, got: int, what: str, where: str) -> None:
    """Return None if a row has the relation's arity; else raise UpdateError saying both."""
    if got != arity:
        raise UpdateError(f"{where}: error: {name} has arity {arity}, got {got} {what}")


def check_input(program: Program, name: str, where: str) -> None:
    """Return None if `name` is an `.input` relation of the program; else raise UpdateError."""
    if name not in program.decls:
        raise UpdateError(f"{where}: error: unknown relation {name}")
    if name not in program.inputs:
        raise UpdateError(f"{where}: error: {name} is not an .input relation; only input facts "
                          f"can be inserted or removed")


def coerce_row(program: Program, name: str, values: Iterable, where: str = "<api>", *,
               held: bool = False) -> tuple:
    """Return a Python row checked and converted for input relation `name`; raise UpdateError.

    Values must already have their column's type (an integer, a real or a str; a float
    column takes an integer too): a string is not parsed as a number. NaN and infinities are
    refused, as in fact files: NaN is not equal to itself, so it could never be removed.
    A record or ADT is Soufflé's text form, or with `held` the engine's (a queued op's row).
    """
    check_input(program, name, where)
    decl = program.decls[name]
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise UpdateError(f"{where}: error: a row of {name} is a tuple of {decl.arity} values, "
                          f"got {values!r}")
    values = tuple(values)
    _check_arity(name, decl.arity, len(values), "values", where)
    out = []
    for i, (v, primitive) in enumerate(zip(values, decl.types, strict=True)):
        try:
            if isinstance(v, bool):  # an int to Python, never a Datalog value
                raise ValueError
            if decl.shapes and decl.shapes[i]:  # a record or ADT in Soufflé's text form
                if not isinstance(v, str):
                    raise ValueError(f"not a {decl.shapes[i]} in Soufflé's text form (a str)")
                out.append(read_record(decl, i, v, where, UpdateError, held))
                continue
            if primitive == "symbol":
                if not isinstance(v, str):
                    raise ValueError
                if len(v) > MAX_SYMBOL:  # a newline is fine: outputs write it as it is
                    raise UpdateError(f"{where}: error: value {shown(v)} is {TOO_LONG_WHY} "
                                      f"({name}.{decl.attrs[i]})")
                out.append(v)
            elif primitive == "float":
                if not isinstance(v, numbers.Real) or not math.isfinite(v):
                    raise ValueError
                out.append(float(v))
            else:
                if not isinstance(v, numbers.Integral):  # numpy's ints too
                    raise ValueError
                out.append(convert(str(int(v)), primitive))  # the fact-file check, range included
        except ValueError as e:
            record = decl.shapes and decl.shapes[i] and e.args
            why = e.args[0] if record else f"not {_A[primitive]}"
            raise UpdateError(f"{where}: error: value {v!r} is {why} "
                              f"({name}.{decl.attrs[i]})") from None
    return tuple(out)


def read_record(decl, i: int, text: str, where: str, error: type[Exception],
                held: bool = False) -> str:
    """Return the value of a record or ADT written in Soufflé's text form (with `held`, the
    engine's) for attribute i, checked against its type; `error` naming `where` and the
    field when it is not one."""
    from levelflow.engine.record_facts import field_error
    from levelflow.tasks.record_values import Types

    types = Types(decl.record_types)
    try:
        return (types.canonical if held else types.read)(text, decl.shapes[i])
    except ValueError as e:
        raise error(f"{where}: error: {field_error(decl, i, text, e.args[0])}") from None


def _fact_file_rows(program: Program, name: str, path: Path) -> list[tuple]:
    """Return the distinct rows of a Soufflé fact file for `name`, validated with the run's own
    checks (engine/fact_reader.py)."""
    decl = program.decls[name]
    io = program.inputs[name]
    try:
        table = fact_table(path, decl, io_delimiter(io), io_headers(io))
    except FactError as e:
        raise UpdateError(str(e)) from None
    if decl.arity == 0:
        return [()] if table.num_rows else []
    return list(zip(*(column.to_pylist() for column in table.columns), strict=True))


def read_update_file(program: Program, path: str | Path, sign: int) -> list[Op]:
    """Return the ops of one update file: a fact file (every row gets `sign`) or a diff.

    A fact file is named `<rel>.facts`, or as the `filename=` of the relation's .input.

    A diff file has one change per line, `+rel(1,"a")` or `-rel(2,"b")`; blank lines and lines
    starting with `//` or `#` are skipped. Under `--remove` the signs of a diff are flipped.
    """
    path = Path(path)
    if not path.is_file():
        raise UpdateError(f"{path}:1: error: cannot read update file (no such file)")
    # A fact file is named as its .input reads it: `filename=` of the directive, or REL.facts.
    named = {Path(io.option("filename")).name: n for n, io in program.inputs.items()
             if io.option("filename")}
    if path.name in named:
        return [Op(sign, named[path.name], row)
                for row in _fact_file_rows(program, named[path.name], path)]
    stem = path.name.removesuffix(".facts")
    if path.name.endswith(".facts"):
        check_input(program, stem, f"{path}:1")
        return [Op(sign, stem, row) for row in _fact_file_rows(program, stem, path)]
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark is not a change
    except (OSError, UnicodeDecodeError) as e:
        raise UpdateError(f"{path}:1: error: cannot read update file ({e})") from None
    return parse_diff(program, text, str(path), sign)


def parse_diff(program: Program, text: str, source: str, sign: int = 1) -> list[Op]:
    """Return the ops of a diff's text (`+rel(..)` / `-rel(..)` lines, `//` or `#` comments);
    errors name `source:LINE`."""
    ops = []
    # Lines end at LF only (a CR before it dropped): a quoted symbol may hold a raw \v or \f,
    # which str.splitlines would break at.
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.strip(" \t\r")
        if not line or line.startswith(("//", "#")):
            continue
        where = f"{source}:{lineno}"
        if line[0] not in "+-":
            raise UpdateError(f"{where}: error: a diff line starts with + or -, got {line!r}")
        name, row = parse_literal(program, line[1:], where)
        ops.append(Op(sign * (1 if line[0] == "+" else -1), name, row))
    return ops


def read_updates(program: Program, inserts: Iterable, removes: Iterable) -> list[Op]:
    """Return the ops of every --insert file, then every --remove file, all validated first."""
    ops: list[Op] = []
    for path in inserts:
        ops += read_update_file(program, path, +1)
    for path in removes:
        ops += read_update_file(program, path, -1)
    return ops
