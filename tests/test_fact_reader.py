"""engine/fact_reader.py, the vectorized fact reader, against a plain line-by-line reading of
Soufflé's rules (facts.py's docstring): the same tuples, in the order of their first lines,
and the same one-line error at the same line, column and field, for small and large files."""

from __future__ import annotations

import gzip
import random

import pytest

from levelflow.engine import fact_reader
from levelflow.engine.fact_reader import read_fact_rows
from levelflow.engine.facts import FactError, check_fact_lines, fact_table, validate_facts
from levelflow.tasks.ast import Decl
from levelflow.tasks.functors import MAX_SYMBOL
from levelflow.tasks.numbers import held_unsigned

CONVERT = {"number": int, "unsigned": lambda f: held_unsigned(int(f)), "float": float,
           "symbol": str}


def decl(*types):
    return Decl("r", tuple(f"a{i}" for i in range(len(types))), tuple(types))


def reference_rows(data: bytes, d: Decl, delimiter: str, headers: bool = False) -> list[tuple]:
    """Return the distinct tuples of a valid fact file, in the order of their first lines, one
    line at a time: gunzipped, UTF-8, BOM skipped, split on LF, one trailing CR dropped, the
    header skipped, fields split on the literal delimiter, extra fields ignored."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    lines = data.decode("utf-8").removeprefix("\ufeff").split("\n")
    if lines[-1] == "":
        lines.pop()
    out: dict[tuple, None] = {}
    for line in lines[1 if headers else 0:]:
        fields = line.removesuffix("\r").split(delimiter, d.arity)[:d.arity]
        out[tuple(CONVERT[t](f) for t, f in zip(d.types, fields, strict=True))] = None
    return list(out)


def reference_error(data: bytes, d: Decl, delimiter: str, path) -> str:
    """Return the line-by-line check's error for an (uncompressed, UTF-8) fact file."""
    lines = data.decode("utf-8").removeprefix("\ufeff").split("\n")
    if lines[-1] == "":
        lines.pop()
    with pytest.raises(FactError) as e:
        check_fact_lines(path, lines, d, delimiter, False)
    return str(e.value)


def got_rows(path, d, delimiter, headers=False) -> list[tuple]:
    return [tuple(r.values()) for r in fact_table(path, d, delimiter, headers)
            .to_pylist()]


def random_text(rng: random.Random, d: Decl, delimiter: str, lines: int, *, cr=False,
                extra=False) -> str:
    """Return a valid fact file of `lines` lines with repeats, some lines CR-ended or with
    extra fields if asked."""
    values = {"number": lambda: str(rng.randint(-50, 50)),
              "unsigned": lambda: rng.choice(["0", "7", "+12", "007", "-0", str(2**64 - 1),
                                              str(2**63)]),
              "float": lambda: rng.choice(["0.5", "-1e3", ".25", "2.", "3"]),
              "symbol": lambda: rng.choice([s for s in ["a", "b c", "", "é", "x\"y", "'q'", "\\"]
                                            if delimiter not in s])}
    out = []
    for _ in range(lines):
        line = delimiter.join(values[t]() for t in d.types)
        if extra and rng.random() < 0.1:
            line += delimiter + "more" + delimiter + "still"
        if cr and rng.random() < 0.3:
            line += "\r"
        out.append(line)
    return "\n".join(out) + "\n"


SHAPES = [  # (types, delimiter, cr, extra): the CSV path and the line-by-line path
    (("number", "number"), "\t", False, False),
    (("number", "symbol", "float", "unsigned"), "\t", False, False),
    (("symbol", "number"), ",", True, False),
    (("number", "symbol"), "\t", False, True),
    (("symbol", "float"), "::", False, False),
    (("symbol", "number"), "é", True, True),
    (("symbol",), "\t", False, True),
]


@pytest.mark.parametrize("types,delimiter,cr,extra", SHAPES)
def test_a_large_file_reads_as_the_reference(tmp_path, types, delimiter, cr, extra):
    d, rng = decl(*types), random.Random(repr((types, delimiter)))
    data = random_text(rng, d, delimiter, 60_000, cr=cr, extra=extra).encode()
    path = tmp_path / "r.facts"
    path.write_bytes(data)
    assert got_rows(path, d, delimiter) == reference_rows(data, d, delimiter)
    assert validate_facts(path, d, delimiter) == 60_000


def test_bom_gzip_header_and_a_last_line_without_newline(tmp_path):
    d = decl("symbol", "number")
    data = gzip.compress("\ufeffname\tn\r\na\t1\r\nb\t2\na\t1\nc\t3".encode())
    path = tmp_path / "r.facts"
    path.write_bytes(data)
    assert got_rows(path, d, "\t", headers=True) == [("a", 1), ("b", 2), ("c", 3)]
    assert read_fact_rows(path, d, "\t", headers=True).lines == 4


BAD = [  # (types, delimiter, a bad line put into a large valid file)
    (("number", "number"), "\t", "12\tx"),
    (("number", "number"), "\t", "12"),
    (("number", "number"), "\t", "1 2"),
    (("number", "number"), "\t", ""),
    (("unsigned", "symbol"), "\t", "-3\ta"),
    (("number", "symbol"), "\t", "99999999999999999999\ta"),
    (("symbol", "float"), "\t", "a\t1e999"),
    (("symbol", "float"), "\t", "a\tnan"),
    (("symbol", "number"), ",", "a\rb,1"),
    (("symbol", "symbol"), ",", "a\tb,c"),
    (("symbol", "number"), "::", "a:1"),
    (("number", "number"), "\t", "1\t 2"),
    (("number", "number"), "\t", "1\t0x10"),
    (("number", "number"), "\t", "-\t1"),
    (("number", "number"), "\t", "99999999999999999999\t1"),
    (("unsigned", "number"), "\t", "-3\t1"),
    (("unsigned", "number"), "\t", f"{2**64}\t1"),
]


@pytest.mark.parametrize("types,delimiter,bad", BAD)
@pytest.mark.parametrize("where", [0, 777, 39_999])
def test_a_bad_line_anywhere_gives_the_line_by_line_error(tmp_path, types, delimiter, bad,
                                                          where):
    d, rng = decl(*types), random.Random(where)
    lines = random_text(rng, d, delimiter, 40_000).splitlines()
    lines[where] = bad
    lines.append(bad)  # a later bad line is not the one named
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "r.facts"
    path.write_bytes(data)
    with pytest.raises(FactError) as e:
        read_fact_rows(path, d, delimiter)
    message = str(e.value)
    assert message == reference_error(data, d, delimiter, path)
    assert message.startswith(f"{path}:{where + 1}:") and "\n" not in message


def test_a_checked_file_is_read_once_unless_it_changed(tmp_path, monkeypatch):
    reads = []
    real = fact_reader._read
    monkeypatch.setattr(fact_reader, "_read", lambda *a: reads.append(a) or real(*a))
    d, path = decl("number"), tmp_path / "r.facts"
    path.write_text("1\n2\n")
    assert validate_facts(path, d, "\t") == 2
    assert got_rows(path, d, "\t") == [(1,), (2,)] and len(reads) == 1
    assert got_rows(path, d, "\t") == [(1,), (2,)] and len(reads) == 2  # taken, not kept
    validate_facts(path, d, "\t")
    path.write_text("3\n4\n5\n")  # changed after the check: read again
    assert got_rows(path, d, "\t") == [(3,), (4,), (5,)] and len(reads) == 4


def test_a_file_without_repeats_keeps_every_line_in_order(tmp_path):
    d, path = decl("number", "float", "symbol"), tmp_path / "r.facts"
    data = "".join(f"{(i * 7919) % 50_000}\t{i / 8}\ts{i % 3}\n" for i in range(50_000)).encode()
    path.write_bytes(data + b"0\t0\ts0\n0\t-0\ts0\n")  # line 1 again, and with -0: the same
    assert got_rows(path, d, "\t") == reference_rows(data, d, "\t")
    assert len(got_rows(path, d, "\t")) == 50_000


@pytest.mark.parametrize("types", [("number", "number"), ("number", "symbol")])
def test_the_reader_keeps_repeats_and_fact_table_drops_them(tmp_path, types):
    # Numbers only take the Polars CSV path, a symbol the string path: both keep every line.
    d, path = decl(*types), tmp_path / "r.facts"
    lines = ["3\t4", "1\t2", "3\t4", "5\t6", "1\t2"]
    path.write_text("\n".join(lines) + "\n")
    convert = [CONVERT[t] for t in types]
    every = [tuple(f(v) for f, v in zip(convert, line.split("\t"), strict=True))
             for line in lines]
    rows = read_fact_rows(path, d, "\t")
    assert rows.lines == 5
    assert [tuple(r.values()) for r in rows.table.to_pylist()] == every
    assert got_rows(path, d, "\t") == every[:2] + every[3:4]  # first lines' order


def test_unsigned_up_to_2_64_and_a_symbol_too_long(tmp_path):
    d, path = decl("unsigned", "number"), tmp_path / "r.facts"
    path.write_text(f"{2**64 - 1}\t1\n{2**63}\t2\n5\t3\n")
    assert got_rows(path, d, "\t") == [(-1, 1), (-(2**63), 2), (5, 3)]  # the int64 of the bits
    d = decl("symbol", "number")
    data = f"a\t1\nb\t2\n{'x' * (MAX_SYMBOL + 1)}\t3\n{'y' * MAX_SYMBOL}\t4\n".encode()
    path.write_bytes(data)
    with pytest.raises(FactError) as e:
        read_fact_rows(path, d, "\t")
    assert str(e.value) == reference_error(data, d, "\t", path)
    assert str(e.value).startswith(f"{path}:3:1: error: field 1 ") and "longer than" in str(e.value)
