"""`.output R(IO=stdout)` prints R as Soufflé does; IO kinds the engine lacks are refused."""

from __future__ import annotations

import pytest

from levelflow.engine.runner import write_outputs
from levelflow.engine.types import rows_frame
from levelflow.tasks import parse_program
from levelflow.tasks.errors import DatalogError

PROGRAM = """
.decl a(x:number, s:symbol)
.decl b(x:number, s:symbol)
.output a
.output b(IO=stdout, delimiter=",")
"""


def test_stdout_output_is_framed_and_formatted_like_a_file(spark, tmp_path, capsys):
    program = parse_program(PROGRAM, "io.dl")
    rows = [(2, "two words"), (-1, "x"), (10, "é")]
    rels = {n: rows_frame(spark, program.decls[n], rows) for n in ("a", "b")}
    counts = write_outputs(program, rels, tmp_path)
    assert counts == {"a": 3, "b": 3}
    as_file = (tmp_path / "a.csv").read_text(encoding="utf-8").replace("\t", ",")
    assert capsys.readouterr().out == (
        "---------------\nb\n===============\n" + as_file + "===============\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]  # no file, no temp left


@pytest.mark.parametrize("directive,message", [
    (".output a(IO=stdin)",
     "IO=stdin is not supported for .output (supported: file, parquet, spark, sqlite, stdout)"),
    (".input a(IO=stdin)",
     "IO=stdin is not supported for .input (supported: file, parquet, spark, sqlite)"),
])
def test_unsupported_io_is_one_error_at_the_directive(directive, message):
    with pytest.raises(DatalogError) as e:
        parse_program(".decl a(x:number)\n" + directive + "\n", "io.dl")
    col = directive.index(" ") + 2  # the directive's relation name
    assert str(e.value) == f"io.dl:2:{col}: error: {message}"


def test_one_relation_can_have_several_output_directives(spark, tmp_path, capsys):
    program = parse_program("""
.decl b(x:number, s:symbol)
.output b
.output b(IO=stdout)
.output b(filename="sub/b.tsv", delimiter="|")
""", "io.dl")
    rows = [(3, "c"), (1, "a b")]
    counts = write_outputs(program, {"b": rows_frame(spark, program.decls["b"], rows)}, tmp_path)
    assert counts == {"b": 2}
    as_csv = (tmp_path / "b.csv").read_text(encoding="utf-8")
    assert as_csv == "1\ta b\n3\tc\n"
    assert (tmp_path / "sub" / "b.tsv").read_text(encoding="utf-8") == as_csv.replace("\t", "|")
    assert capsys.readouterr().out == "---------------\nb\n===============\n" + as_csv + \
        "===============\n"


@pytest.mark.parametrize("directives,message", [
    ('.output a\n.output a(filename="a.csv")', "3:9: error: the .output directive at 2:9 "
                                                "already writes 'a' to a.csv"),
    ('.output a(filename="x")\n.output c(filename="x")', "3:9: error: the .output directive "
                                                         "at 2:9 already writes 'a' to x"),
    (".output a(IO=stdout)\n.output a(IO=stdout)", "3:9: error: the .output directive at 2:9 "
                                                   "already writes 'a' to standard output"),
])
def test_two_outputs_to_one_place_are_refused(directives, message):
    with pytest.raises(DatalogError) as e:
        parse_program(".decl a(x:number)\n" + directives + "\n.decl c(x:number)\n", "io.dl")
    assert str(e.value) == f"io.dl:{message}"


def test_floats_are_written_as_souffle_writes_them_everywhere(spark, tmp_path, capsys):
    """Soufflé's writer prints a double to 17 significant digits (the stream's precision is
    max_digits10), in files, on stdout and inside records; `to_string` is std::to_string (%f)."""
    from levelflow.engine.runner import run_program
    from levelflow.tasks import build_tasks

    pt = build_tasks(parse_program("""
.decl f(x:float)
f(0.0009765625). f(0.1). f(1.5). f(1e20).
.decl s(t:symbol)
s(to_string(x)) :- f(x), x < 2.0.
.type R = [v: float]
.decl r(x: R)
r([x]) :- f(x).
.output f
.output f(IO=stdout)
.output s
.output r
""", "fl.dl"))
    run_program(spark, pt, None, tmp_path, jobs=1)
    as_file = (tmp_path / "f.csv").read_text()
    assert as_file == "0.0009765625\n0.10000000000000001\n1.5\n1e+20\n"
    assert capsys.readouterr().out == "---------------\nf\n===============\n" + as_file + \
        "===============\n"
    assert sorted((tmp_path / "s.csv").read_text().splitlines()) == [
        "0.000977", "0.100000", "1.500000"]
    assert sorted((tmp_path / "r.csv").read_text().splitlines()) == [
        "[0.0009765625]", "[0.10000000000000001]", "[1.5]", "[1e+20]"]
