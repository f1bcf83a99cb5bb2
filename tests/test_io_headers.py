"""`headers=true` on .input and .output, byte order marks, and the options levelflow refuses."""

from __future__ import annotations

import pytest

from levelflow.engine.evaluate import evaluate_program
from levelflow.engine.facts import FactError, read_facts, validate_facts
from levelflow.engine.incremental.updates import read_update_file
from levelflow.engine.runner import write_outputs
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.ast import Decl
from levelflow.tasks.errors import DatalogError

PROGRAM = """
.decl person(name:symbol, city:symbol)
.input person(IO=file, headers=true)
.decl age(name:symbol, years:number)
.input age(headers=true, delimiter=",")
.decl older(name:symbol, city:symbol, years:number)
older(n, c, y) :- person(n, c), age(n, y), y > 30.
.output older(headers=true)
.output older(filename="plain.csv")
"""


def rows(df):
    return sorted(tuple(r) for r in df.collect())


def test_header_lines_are_skipped_on_input_and_written_on_output(spark, tmp_path):
    pt = build_tasks(parse_program(PROGRAM, "h.dl"))
    (tmp_path / "person.facts").write_text("name\tcity\nann\tparis\nbob\tnew york\r\n")
    (tmp_path / "age.facts").write_text("name,years\nann,41\nbob,29\n")  # a number column
    rels = evaluate_program(spark, pt, tmp_path)
    assert rows(rels["person"]) == [("ann", "paris"), ("bob", "new york")]
    assert rows(rels["older"]) == [("ann", "paris", 41)]
    out = tmp_path / "out"
    assert write_outputs(pt.program, rels, out) == {"older": 1}
    assert (out / "older.csv").read_text() == "name\tcity\tyears\nann\tparis\t41\n"
    assert (out / "plain.csv").read_text() == "ann\tparis\t41\n"


def test_a_header_equal_to_a_data_line_keeps_that_tuple(spark, tmp_path):
    d = Decl("p", ("a", "b"), ("symbol", "symbol"))
    path = tmp_path / "p.facts"
    path.write_text("a\tb\nx\ty\na\tb\n")  # the header's text is also a tuple
    assert rows(read_facts(spark, d, path, "\t", headers=True)) == [("a", "b"), ("x", "y")]
    path.write_text("a\tb\nx\ty\n")
    assert rows(read_facts(spark, d, path, "\t", headers=True)) == [("x", "y")]


def test_errors_count_the_header_line(tmp_path):
    d = Decl("q", ("n",), ("number",))
    path = tmp_path / "q.facts"
    path.write_text("n\n1\nx\n")
    with pytest.raises(FactError, match=r"q.facts:3:1: error: field 1 'x' is not a number"):
        validate_facts(path, d, "\t", headers=True)
    path.write_text("n\n")
    assert validate_facts(path, d, "\t", headers=True) == 0


def test_a_byte_order_mark_is_skipped_for_every_type(spark, tmp_path):
    d = Decl("r", ("n", "s"), ("number", "symbol"))
    path = tmp_path / "r.facts"
    path.write_bytes("\ufeff1\thello\n2\tbye\n".encode())
    assert rows(read_facts(spark, d, path)) == [(1, "hello"), (2, "bye")]


def test_update_files_honour_headers_and_byte_order_marks(tmp_path):
    program = parse_program(PROGRAM, "h.dl")
    facts = tmp_path / "age.facts"
    facts.write_bytes("\ufeffname,years\ncid,50\n".encode())
    assert [(o.relation, o.row) for o in read_update_file(program, facts, +1)] == [
        ("age", ("cid", 50))]
    diff = tmp_path / "c.diff"
    diff.write_bytes('\ufeff+person("dee", "oslo")\n'.encode())
    assert [(o.relation, o.row) for o in read_update_file(program, diff, -1)] == [
        ("person", ("dee", "oslo"))]


@pytest.mark.parametrize("directive, message", [
    (".input a(IO=file, rfc4180=true)", "option 'rfc4180' is not supported for .input"),
    (".output a(compress=yes)", "compress=yes must be true or false"),
    (".input a(IO=spark)", "IO=spark takes table="),
    (".output a(headers=yes)", "headers=yes must be true or false"),
])
def test_options_levelflow_lacks_are_refused_not_ignored(directive, message):
    with pytest.raises(DatalogError, match=message) as e:
        parse_program(".decl a(x:number)\n" + directive + "\n", "io.dl")
    assert str(e.value).startswith("io.dl:2:")
