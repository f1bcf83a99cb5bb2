"""Soufflé fact files: every reading rule, every error (file:line:col), and the output format."""

from __future__ import annotations

import math

import pytest

from levelflow.engine.facts import (
    FactError,
    fact_table,
    format_value,
    input_path,
    output_path,
    read_facts,
    validate_facts,
    write_relation,
)
from levelflow.engine.types import empty_relation, rows_frame
from levelflow.tasks.ast import IO, Decl


def decl(name, *types):
    return Decl(name, tuple(f"a{i}" for i in range(len(types))), tuple(types))


def rows(df):
    return sorted(tuple(r) for r in df.collect())


def write(tmp_path, text, name="r.facts"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


# --- reading -----------------------------------------------------------------------------------

def test_tab_default_types_duplicates_extra_columns_and_cr(spark, tmp_path):
    d = decl("r", "number", "symbol", "float", "unsigned")
    path = write(tmp_path, "1\ta b\t0.5\t7\n-2\tc\t1e3\t0\textra\tcols\r\n1\ta b\t0.5\t7\n")
    assert rows(read_facts(spark, d, path)) == [(-2, "c", 1000.0, 0), (1, "a b", 0.5, 7)]


def test_multi_character_and_regex_special_delimiters(spark, tmp_path):
    d = decl("r", "symbol", "number")
    path = write(tmp_path, "x y::1\nz|z::2::3\n")
    assert rows(read_facts(spark, d, path, "::")) == [("x y", 1), ("z|z", 2)]
    path = write(tmp_path, "a.*b.*7\n", "s.facts")
    assert rows(read_facts(spark, decl("s", "symbol", "symbol", "number"), path, ".*")) == [
        ("a", "b", 7)]


def test_symbols_are_raw_text_no_quoting(spark, tmp_path):
    d = decl("r", "symbol", "symbol")
    path = write(tmp_path, '"quoted"\t back\\slash \n\tempty first\n')
    assert rows(read_facts(spark, d, path)) == [("", "empty first"), ('"quoted"', " back\\slash ")]


def test_glob_characters_in_the_path_are_taken_literally(spark, tmp_path):
    d = decl("r", "number")
    (tmp_path / "a[1]").mkdir()
    path = write(tmp_path / "a[1]", "5\n", "r {x}*.facts")
    assert rows(read_facts(spark, d, path)) == [(5,)]


def test_only_the_one_trailing_cr_is_dropped(spark, tmp_path):
    path = write(tmp_path, "ab\r\ncd\r\ne\n")
    assert rows(read_facts(spark, decl("r", "symbol"), path)) == [("ab",), ("cd",), ("e",)]
    # Another CR would be part of a symbol, which an output line could not carry back.
    with pytest.raises(FactError, match=r":2:1: error: field 1 'cd\\r' is a symbol with a TAB"):
        read_facts(spark, decl("r", "symbol"), write(tmp_path, "ab\ncd\r\r\n"))


def test_empty_file_and_nullary_files(spark, tmp_path):
    assert rows(read_facts(spark, decl("r", "number"), write(tmp_path, ""))) == []
    assert rows(read_facts(spark, decl("n"), write(tmp_path, "()\n", "n.facts"))) == [(True,)]
    assert rows(read_facts(spark, decl("m"), write(tmp_path, "", "m.facts"))) == []


DRIVER_CASES = [  # (types, text, delimiter): every reading rule a driver parse must keep
    (("number", "symbol", "unsigned"), "1\ta b\t7\n-2\tc\t0\textra\tcols\r\n1\ta b\t7\n", "\t"),
    (("number", "number"), "+5\t007\n-9223372036854775808\t9223372036854775807\n+5\t7\n", "\t"),
    (("symbol", "number"), "x y::1\nz|z::2::3\n::4\n", "::"),
    (("symbol", "symbol", "number"), "a.*b.*7\n.*.*-0\n", ".*"),
    (("symbol", "symbol"), '"quoted"\t back\\slash \n\tempty first\nab\tcd\r\n', "\t"),
    (("symbol",), "\ufeffbom\nab\r\n\n", "\t"),
    (("number",), "", "\t"),
]


@pytest.mark.parametrize("types,text,delimiter", DRIVER_CASES)
def test_the_driver_rows_are_what_spark_gets(spark, tmp_path, types, text, delimiter):
    d, path = decl("r", *types), write(tmp_path, text)
    table = fact_table(path, d, delimiter)
    # The same rows, each once, whether kept in the driver or shipped to Spark.
    assert sorted(tuple(r.values()) for r in table.to_pylist()) == \
        rows(read_facts(spark, d, path, delimiter))
    assert table.num_rows == len(set(map(tuple, (r.values() for r in table.to_pylist()))))


def test_the_driver_reads_floats_headers_and_nullary(tmp_path):
    path = write(tmp_path, "a\tb\n1\t0.5\n2\t-1e3\n1\t0.5\n")
    assert fact_table(path, decl("r", "number", "float"), headers=True).to_pylist() == [
        {"c0": 1, "c1": 0.5}, {"c0": 2, "c1": -1000.0}]
    assert fact_table(write(tmp_path, "()\n()\n", "n.facts"), decl("n")).to_pylist() == [
        {"c0": True}]
    assert fact_table(write(tmp_path, "", "m.facts"), decl("n")).num_rows == 0
    with pytest.raises(FactError, match=r"r\.facts:3:3: error: field 2 '0\.5' is not a num"):
        fact_table(write(tmp_path, "1\t2\n3\t4\n1\t0.5\n"), decl("r", "number", "number"))


def test_input_and_output_paths_honour_filename(tmp_path):
    assert input_path(IO("input", "e"), tmp_path) == tmp_path / "e.facts"
    assert input_path(IO("input", "e", (("filename", "sub/x.tsv"),)), tmp_path) == \
        tmp_path / "sub" / "x.tsv"
    assert output_path(IO("output", "p"), tmp_path) == tmp_path / "p.csv"
    assert output_path(IO("output", "p", (("filename", "p.out"),)), tmp_path) == tmp_path / "p.out"


# --- errors: one line, path:line:col ------------------------------------------------------------

@pytest.mark.parametrize("types, text, where, fragment", [
    (("number", "number"), "1\t2\n3\n", "2:2", "expects 2 fields, found 1"),
    (("number", "number"), "1\t2\n3\tx4\n", "2:3", "field 2 'x4' is not a number"),
    (("symbol", "number"), "ab\t1_000\n", "1:4", "not a number"),
    (("symbol", "number"), "abc::12.5\n", "1:6", "not a number"),
    (("unsigned",), "4\n-1\n", "2:1", "not an unsigned number"),
    (("float",), "1.5\n2.5\nnope\n", "3:1", "not a float"),
    (("number",), "99999999999999999999\n", "1:1", "out of the 64-bit range"),
    (("unsigned",), "18446744073709551616\n", "1:1", "above 2^64-1, the largest unsigned"),
    (("number",), " 5\n", "1:1", "not a number"),
    (("number", "symbol"), "\n", "1:1", "expects 2 fields, found 1"),
])
def test_bad_lines_name_file_line_and_column(tmp_path, types, text, where, fragment):
    path = write(tmp_path, text)
    delim = "::" if "::" in text else "\t"
    with pytest.raises(FactError) as e:
        validate_facts(path, decl("r", *types), delim)
    message = str(e.value)
    assert message.startswith(f"{path}:{where}: error: ")
    assert fragment in message
    assert "\n" not in message


def test_missing_file_is_a_fact_error(spark, tmp_path):
    with pytest.raises(FactError, match=r"nope\.facts:1:1: error: cannot read fact file"):
        read_facts(spark, decl("r", "number"), tmp_path / "nope.facts")


def test_good_numbers_of_every_kind_validate(tmp_path):
    path = write(tmp_path, "+5\t-9223372036854775808\t18\t.5\t1.\t-2e-3\n")
    d = decl("r", "number", "number", "unsigned", "float", "float", "float")
    assert validate_facts(path, d, "\t") == 1


# --- writing -----------------------------------------------------------------------------------

def test_write_formats_floats_to_17_significant_digits_and_counts(spark, tmp_path):
    """Soufflé's writer sets the stream's precision to max_digits10 (17 for a double)."""
    d = decl("r", "symbol", "float", "number")
    df = rows_frame(spark, d, [("b c", 1.0, -3), ("a", 0.5, 10), ("z", 3.14159265, 0),
                               ("y", 1e20, 1), ("x", math.inf, 2)])
    path = tmp_path / "out" / "r.csv"
    assert write_relation(df, d, path, ",") == 5
    assert path.read_text() == ("a,0.5,10\nb c,1,-3\nx,inf,2\ny,1e+20,1\n"
                                "z,3.1415926500000002,0\n")


def test_write_nullary_and_empty_relations(spark, tmp_path):
    n = decl("n")
    assert write_relation(rows_frame(spark, n, [()]), n, tmp_path / "n.csv") == 1
    assert (tmp_path / "n.csv").read_text() == "()\n"
    assert write_relation(empty_relation(spark, n), n, tmp_path / "m.csv") == 0
    assert (tmp_path / "m.csv").read_text() == ""
    r = decl("r", "number", "symbol")
    assert write_relation(empty_relation(spark, r), r, tmp_path / "r.csv") == 0
    assert (tmp_path / "r.csv").read_text() == ""


def test_big_relations_are_streamed_sorted(spark, tmp_path, monkeypatch):
    import levelflow.engine.facts as facts

    monkeypatch.setattr(facts, "COLLECT_ROWS", 3)  # take the toLocalIterator path
    d = decl("r", "number", "symbol")
    data = [(i % 4, f"s{9 - i}") for i in range(10)]
    path = tmp_path / "r.csv"
    assert write_relation(rows_frame(spark, d, data).repartition(3), d, path) == 10
    assert path.read_text().splitlines() == [f"{a}\t{b}" for a, b in sorted(data)]


def test_read_back_what_was_written(spark, tmp_path):
    d = decl("r", "number", "symbol", "unsigned")
    data = [(i - 3, f"s {i}", i * 7) for i in range(6)]
    path = tmp_path / "r.csv"
    write_relation(rows_frame(spark, d, data), d, path, "|")
    assert rows(read_facts(spark, d, path, "|")) == sorted(data)


def test_format_value():
    values = (1.0, 0.5, 100000.0, 1234567.0, -0.25, 2.0**-10, 0.1, 1e17, 1e-5, 2.0**60)
    assert [format_value(v, "float") for v in values] == [
        "1", "0.5", "100000", "1234567", "-0.25", "0.0009765625", "0.10000000000000001",
        "1e+17", "1.0000000000000001e-05", "1.152921504606847e+18"]
    assert format_value(-7, "number") == "-7"
