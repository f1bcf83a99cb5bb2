"""Values no relation can hold are refused in one line at every entry point.

Bytes that are not UTF-8, digits that are not ASCII, floats beyond a double; in a fact file a
TAB or CR inside a field (a file split wrong). Fact files (run and update), diff files, the
API and program constants agree. A symbol that is allowed survives run -> output -> update
unchanged. A symbol with a TAB or newline is held and written as it is, as Soufflé writes it;
a diff line or the API carries it (`\n` in a quoted diff symbol).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.engine.facts import FactError, validate_facts
from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.incremental.updates import UpdateError, coerce_row, read_update_file
from levelflow.errors import LevelflowError
from levelflow.tasks import parse_program
from levelflow.tasks.errors import DatalogError

PROGRAM = """
.decl r(s:symbol, n:number, f:float)
.input r
.decl c(s:symbol)
.input c(delimiter=",")
.decl out(s:symbol, n:number)
out(s, n) :- r(s, n, _).
.output out
"""


@pytest.fixture
def program():
    return parse_program(PROGRAM, "p.dl")


def facts(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("rel,data,where,fragment", [
    ("c", b"ok\na\tb,x\n", ":2:1:", "TAB, CR or newline"),  # a TAB inside a ','-split field
    ("c", b"a\rb,x\n", ":1:1:", "TAB, CR or newline"),
    ("r", b"x\t1\t2.5\ny\xff\t2\t1\n", ":2:2:", "not UTF-8 text (byte 0xff)"),
    ("r", b"x\t\xd9\xa3\xd9\xa4\t1.0\n", ":1:3:", "not a number"),  # Arabic-Indic 34
    ("r", b"x\t1\t\xd9\xa1.\xd9\xa5\n", ":1:5:", "not a float"),
    ("r", b"x\t1\t1e400\n", ":1:5:", "beyond the range of a float"),
    ("r", b"x 1 2.5\n", ":1:8:", "expects 3 fields, found 1 (fields are TAB-separated)"),
])
def test_fact_files_refuse_what_cannot_be_held(program, tmp_path, rel, data, where, fragment):
    path = facts(tmp_path, f"{rel}.facts", data)
    delimiter = "," if rel == "c" else "\t"
    with pytest.raises(FactError) as e:
        validate_facts(path, program.decls[rel], delimiter)
    assert str(e.value).startswith(f"{path}{where} error:") and fragment in str(e.value)
    with pytest.raises(UpdateError) as u:  # update reads the same file the same way
        read_update_file(program, path, +1)
    assert str(u.value) == str(e.value)


@pytest.mark.parametrize("line", ['+r(x, 1, 1e400)', '+r(x, ٣٤, 1.0)'])
def test_diff_lines_refuse_what_cannot_be_held(program, tmp_path, line):
    path = facts(tmp_path, "d.diff", (line + "\n").encode())
    with pytest.raises(UpdateError, match=rf"^{path}:1: error: argument \d") as e:
        read_update_file(program, path, +1)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("row", [("x", 1, float("inf")), ("x", "1", 1.0), (1, 1, 1.0)])
def test_the_api_refuses_what_cannot_be_held(program, row):
    with pytest.raises(UpdateError, match=r"^<api>: error: value .* \(r\.[snf]\)$"):
        coerce_row(program, "r", row)


@pytest.mark.parametrize("line,symbol", [('+r("a\\tb", 1, 1.0)', "a\tb"),
                                         ('+r("a\\nb", 1, 1.0)', "a\nb"),
                                         ('+r("a\tb\\r\\v", 1, 1.0)', "a\tb\r\v"),
                                         ('+r("\\f\x0b", 1, 1.0)', "\f\v")])
def test_diff_lines_and_the_api_carry_any_symbol(program, tmp_path, line, symbol):
    """A quoted diff symbol holds what a program's string literal holds (its escapes, a raw
    TAB); a raw \\v or \\f does not end the line (only LF does)."""
    path = facts(tmp_path, "d.diff", (line + "\n+r(y, 2, 2.0)\n").encode())
    ops = read_update_file(program, path, +1)
    assert [op.row for op in ops] == [(symbol, 1, 1.0), ("y", 2, 2.0)]
    assert coerce_row(program, "r", (symbol, 1, 1.0)) == (symbol, 1, 1.0)


@pytest.mark.parametrize("text,fragment", [
    ('.decl a(f:float)\na(1e400).', "2:3: error: float constant 1e400 is beyond"),
    ('.decl a(n:number)\na(٣٤).', "2:3: error: unexpected character"),
])
def test_program_constants_refuse_what_cannot_be_held(text, fragment):
    with pytest.raises(DatalogError, match=fragment):
        parse_program(text, "p.dl")


def test_a_huge_name_is_cut_in_the_message():
    name = "a" * 1_000_000
    with pytest.raises(DatalogError) as e:
        parse_program(f".decl q(x:number)\nq(x) :- {name}(x).", "p.dl")
    message = str(e.value)
    assert len(message) < 400 and "[1000000 chars]" in message and message.startswith("p.dl:2")
    assert len(str(LevelflowError("x " * 5000))) < 2100


def test_run_checks_every_fact_file_before_spark(tmp_path, capsys):
    from levelflow.cli import main as cli_main

    prog = facts(tmp_path, "p.dl", PROGRAM.encode())
    fdir = tmp_path / "facts"
    fdir.mkdir()
    facts(fdir, "r.facts", b"x\t1\t1.0\n")
    bad = facts(fdir, "c.facts", b"ok\n\xff\n")
    with pytest.raises(SystemExit) as e:
        cli_main(["run", str(prog), "-F", str(fdir), "-D", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert e.value.code == 1 and err == f"{bad}:2:1: error: not UTF-8 text (byte 0xff)\n"


def test_an_allowed_symbol_round_trips_run_output_update(spark, tmp_path):
    """Spaces, quotes, a backslash, commas, non-ASCII: written out, read back, removed."""
    prog = facts(tmp_path, "p.dl", PROGRAM.encode())
    odd = ['sp ace', 'qu"ote', 'back\\slash', 'com,ma', 'héllo ☃', '']
    fdir = tmp_path / "facts"
    fdir.mkdir()
    facts(fdir, "r.facts", "".join(f"{s}\t{i}\t1.5\n" for i, s in enumerate(odd)).encode())
    facts(fdir, "c.facts", b"")
    s = IncrementalSession.bootstrap(spark, prog, fdir)
    s.write_outputs(tmp_path / "out")
    written = (tmp_path / "out" / "out.csv").read_text(encoding="utf-8")
    assert sorted(written.splitlines()) == sorted(f"{x}\t{i}" for i, x in enumerate(odd))
    back = facts(tmp_path, "r.facts", "".join(f"{line}\t1.5\n" for line in
                                              written.splitlines()).encode())
    s.extend(read_update_file(s.program, back, -1))
    s.commit()
    assert s.relation("out").count() == 0 and s.size("r") == 0


def test_a_tab_or_newline_in_a_symbol_is_written_as_it_is(spark, tmp_path):
    """Soufflé accepts `Fact("baz<TAB>")` and writes a symbol to an output as it is, a TAB or a
    newline too (its test symbol_operations expects `one:1, pi:3.140000` then an empty line)."""
    from levelflow.engine.runner import run_program
    from levelflow.tasks import build_tasks

    text = ('.decl f(s:symbol)\nf("baz\t"). f("baz\\t"). f("baz").\n.printsize f\n'
            '.decl g(s:symbol, n:number)\ng(s, 1) :- f(s).\n'
            'g("one:" + to_string(1) + ", pi:" + to_string(3.14) + "\\n", 2).\n.output g\n')
    pt = build_tasks(parse_program(text, "p.dl"))
    assert {r.heads[0].args[0].value for r in pt.program.rules if r.heads[0].relation == "f"} \
        == {"baz\t", "baz"}
    result = run_program(spark, pt, None, tmp_path / "ok", jobs=1)
    assert result.printsize == {"f": 2}
    assert sorted((tmp_path / "ok" / "g.csv").read_text().split("\n")) == sorted(
        ["baz\t\t1", "baz\t1", "one:1, pi:3.140000", "\t2", ""])
