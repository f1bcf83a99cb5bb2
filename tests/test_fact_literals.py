"""Fact literals of diff files and the shell: symbol escapes; values checked as in fact files."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from levelflow.engine.incremental.updates import UpdateError, parse_literal, read_updates
from levelflow.tasks import parse_program

PROGRAM = parse_program("""
.decl knows(a:symbol, b:symbol)
.input knows
.decl m(n:number, u:unsigned, f:float)
.input m
""", "lits.dl")


def quote(text: str) -> str:
    """Return `text` as a Soufflé string literal (backslash escaped first)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").replace(
        "\n", "\\n") + '"'


@given(st.text(alphabet='ab\\"\tn\n\r ,()', max_size=12), st.text(max_size=6))
def test_quoted_symbols_read_back_as_written(a, b):
    """Any symbol, a TAB, CR or newline too (written \\t, \\n), reads back as itself."""
    literal = f"knows({quote(a)}, {quote(b)})"
    assert parse_literal(PROGRAM, literal) == ("knows", (a, b))


def test_escaped_backslash_does_not_start_another_escape():
    assert parse_literal(PROGRAM, r'knows("a\\tb", "C:\\new")') == ("knows", ("a\\tb", "C:\\new"))


@pytest.mark.parametrize("fields,why", [
    ("1_000\t1\t1.0", "not a number"),
    ("1\t-1\t1.0", "not an unsigned number"),
    ("1\t1\tnan", "not a float"),
    ("1\t1\t1_5.0", "not a float"),
    ("99999999999999999999\t1\t1.0", "out of the 64-bit range"),
])
def test_diff_values_are_refused_like_fact_file_fields(tmp_path, fields, why):
    diff = tmp_path / "change.diff"
    diff.write_text("+m(1, 2, 3.5)\n+m(" + ", ".join(fields.split("\t")) + ")\n")
    with pytest.raises(UpdateError) as e:
        read_updates(PROGRAM, [diff], [])
    assert str(e.value).startswith(f"{diff}:2: error: argument ") and why in str(e.value)
    facts = tmp_path / "m.facts"
    facts.write_text("1\t2\t3.5\n" + fields + "\n")
    with pytest.raises(UpdateError) as e:
        read_updates(PROGRAM, [facts], [])
    assert str(e.value).startswith(f"{facts}:2:") and why in str(e.value)


def test_valid_values_parse_to_their_types():
    assert parse_literal(PROGRAM, "m(-5, 9223372036854775807, -1.5e3)") == \
        ("m", (-5, 9223372036854775807, -1500.0))


def test_a_fact_file_named_by_its_input_directive_is_read_as_facts(tmp_path):
    program = parse_program('.decl person(n:symbol, age:number)\n'
                            '.input person(filename="people.tsv", delimiter=",")\n', "p.dl")
    people = tmp_path / "people.tsv"
    people.write_text("ann,30\nbob,12\n")
    ops = read_updates(program, [], [people])
    assert [(op.sign, op.relation, op.row) for op in ops] == [
        (-1, "person", ("ann", 30)), (-1, "person", ("bob", 12))]
    people.write_text("ann,30\nbob,x\n")
    with pytest.raises(UpdateError) as e:
        read_updates(program, [people], [])
    assert str(e.value).startswith(f"{people}:2:5: error: field 2 'x' is not a number")


@pytest.mark.parametrize("relation,row,fragment", [
    ("m", 5, "a row of m is a tuple of 3 values, got 5"),
    ("m", "123", "a row of m is a tuple of 3 values, got '123'"),
    ("m", ("7", 1, 1.0), "value '7' is not a number (m.n)"),
    ("m", (7, True, 1.0), "value True is not an unsigned number (m.u)"),
    ("m", (7, 1, "1.5"), "value '1.5' is not a float (m.f)"),
    ("m", (7, 1, float("nan")), "value nan is not a float (m.f)"),
    ("m", (7, 1, float("-inf")), "value -inf is not a float (m.f)"),
    ("knows", ("a", 1), "value 1 is not a symbol (knows.b)"),
])
def test_api_rows_must_hold_values_of_the_column_types(relation, row, fragment):
    from levelflow.engine.incremental.updates import coerce_row

    with pytest.raises(UpdateError) as e:
        coerce_row(PROGRAM, relation, row)
    assert str(e.value) == f"<api>: error: {fragment}"


def test_api_rows_convert_integers_for_float_columns():
    from levelflow.engine.incremental.updates import coerce_row

    assert coerce_row(PROGRAM, "m", [-5, 7, 2]) == (-5, 7, 2.0)


def test_symbol_escapes_are_the_programs_own():
    r"""\a and \' mean in an update what they mean in a program's string literal, \r a CR;
    an escape Soufflé's scanner does not know (\0, \d) is refused as in a program."""
    assert parse_literal(PROGRAM, r'knows("a", "c\ad\'")') == ("knows", ("a", "c\ad'"))
    for bad in ("0", "d"):
        with pytest.raises(UpdateError, match=rf"argument 2 .* is a string with the unknown "
                                              rf"escape \\{bad} \(knows.b\)"):
            parse_literal(PROGRAM, f'knows("a", "c\\{bad}")')
    assert parse_literal(PROGRAM, r'knows("a\rb", "c")') == ("knows", ("a\rb", "c"))
