"""Issue 42: bounds by size on what a program makes, each one line and a non-zero exit.

The preprocessor: the text macro expansion makes (preprocess.MAX_GROWTH times the program,
at least MIN_ROOM), how deep macro calls nest, `#if`'s operators, nesting and 64-bit values.
The parser: nesting of records, ADT terms and parentheses (parser.MAX_NESTING).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from levelflow.tasks import DatalogError, parse_program
from levelflow.tasks.parser import MAX_NESTING
from levelflow.tasks.ppexpr import MAX_OPERATORS, MAX_PARENS
from levelflow.tasks.preprocess import MAX_GROWTH, MAX_MACRO_NESTING, MIN_ROOM, preprocess

DECL = ".decl p(x:number)\n.output p\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def refused(text: str) -> str:
    """Return the one line a program is refused with (in well under a second)."""
    t0 = time.perf_counter()
    with pytest.raises(DatalogError) as e:
        parse_program(text, "p.dl")
    assert time.perf_counter() - t0 < 5  # refused before the text grows, not after
    assert "\n" not in str(e.value)
    return str(e.value)


# --- macro expansion: bounded by size -----------------------------------------------------

TENFOLD = "#define D(x) x x x x x x x x x x\n"  # each call makes 10 copies of its argument


def test_a_macro_whose_argument_repeats_stops_at_the_bound():
    # D nested 9 deep would make 10^9 characters; the bound is 1 MiB for a small program.
    text = DECL + TENFOLD + "p(" + "D(" * 9 + "1" + ")" * 9 + ").\n"
    assert refused(text) == (f"p.dl:4:1: error: macro 'D' expands past {MIN_ROOM:,} characters "
                             f"(macros may make {MAX_GROWTH} times the program's {len(text)}, "
                             f"at least {MIN_ROOM:,})")


def test_an_argument_expanded_and_dropped_counts_too():
    text = DECL + TENFOLD + "#define DROP(x)\nDROP(" + "D(" * 9 + "1" + ")" * 9 + ")\n"
    assert refused(text).startswith("p.dl:5:1: error: macro 'D' expands past")


def test_bodies_that_multiply_stop_at_the_bound():
    levels = "".join(f"#define A{k + 1} " + f"A{k} " * 10 + "\n" for k in range(4))
    text = DECL + "#define A0 " + "x" * 1000 + "\n" + levels + "p(A4).\n"
    assert refused(text).startswith("p.dl:8:1: error: macro 'A0' expands past")


def test_the_bound_grows_with_the_program():
    # 20,000 lines of one call each make more than 1 MiB: about 10 times the program's text,
    # well inside 32 times.
    lines = "".join(f"E({i}, {i + 1})\n" for i in range(20_000))
    done = preprocess("#define E(a, b) e(a, b). e(b, a). e(a, a). e(b, b).\n" + lines, "p.dl")
    assert len(done.text) > MIN_ROOM
    assert done.text.split("\n")[20_000] == "e(19999, 20000). e(20000, 19999). " \
                                            "e(19999, 19999). e(20000, 20000)."


def test_macro_calls_nested_past_the_bound_are_one_line():
    text = DECL + "#define I(x) x\np(" + "I(" * 600 + "1" + ")" * 600 + ").\n"
    assert refused(text) == (f"p.dl:4:1: error: macro calls nest deeper than "
                             f"{MAX_MACRO_NESTING} levels (at 'I')")
    chain = "".join(f"#define M{i} M{i + 1}\n" for i in range(600)) + "#define M600 1\n"
    assert refused(DECL + chain + "p(M0).\n") == (
        f"p.dl:604:1: error: macro calls nest deeper than {MAX_MACRO_NESTING} levels (at "
        f"'M{MAX_MACRO_NESTING}')")


def test_macro_calls_nested_within_the_bound_expand():
    depth = MAX_MACRO_NESTING - 1
    text = DECL + "#define I(x) x + 1\np(" + "I(" * depth + "0" + ")" * depth + ").\n"
    [fact] = parse_program(text, "p.dl").rules
    assert fact.heads[0].args[0].value == depth  # 0 + 1 + ... + 1: one 1 per call


def test_many_continuation_lines_join_in_linear_time():
    t0 = time.perf_counter()
    done = preprocess("#define ONE 1\n" + "// ONE \\\n" * 300_000 + "\np(ONE).", "p.dl")
    lines = done.text.split("\n")
    assert lines[-1] == "p(1)." and done.map.where(len(lines)) == ("p.dl", 300_003)
    assert time.perf_counter() - t0 < 30  # 300,000 joined lines: quadratic took minutes


# --- #if: 64-bit values, bounded expressions ----------------------------------------------

@pytest.mark.parametrize("condition,taken", [
    ("9223372036854775807 + 1 < 0", True),  # wraps as C's intmax_t
    ("-7 / 2 == -3 && -7 % 2 == -1", True),  # truncated toward zero, exactly
    ("4611686018427387903 / 3 == 1537228672809129301", True),  # no float on the way
    ("0x10 == 16 && 010 == 8 && (1 << 63) < 0", True),
    ("18446744073709551615 == -1", True),  # the largest 64-bit constant, as intmax_t
])
def test_if_computes_as_cs_64_bit_integers(condition, taken):
    program = parse_program(DECL + f"#if {condition}\np(1).\n#endif\n", "p.dl")
    assert len(program.rules) == int(taken)


@pytest.mark.parametrize("condition,message", [
    ("1" * 5000, "#if: integer constant 111111111111111111111111111111... is too large"),
    ("18446744073709551616", "#if: integer constant 18446744073709551616 is too large"),
    ("1 << 100000000", "#if: shift by 100000000 (a shift takes 0 to 63)"),
    ("1 >> -1", "#if: shift by -1 (a shift takes 0 to 63)"),
    ("09", "#if: 09 is not an octal constant"),
    ("(" * 600 + "1" + ")" * 600,
     f"#if: more than {MAX_PARENS} nested parentheses or {MAX_OPERATORS} operators"),
    ("+".join(["1"] * 5000),
     f"#if: more than {MAX_PARENS} nested parentheses or {MAX_OPERATORS} operators"),
    ("-" * 600 + "1", f"#if: more than {MAX_PARENS} nested parentheses or {MAX_OPERATORS} "
                      "operators"),
])
def test_if_refuses_what_has_no_64_bit_value_in_one_line(condition, message):
    assert refused(DECL + f"#if {condition}\n#endif\n") == f"p.dl:3:1: error: {message}"


# --- nesting in program text: bounded before the parser recurses --------------------------

@pytest.mark.parametrize("term", [
    "[" * 600 + "nil" + "]" * 600,  # a record nested 600 deep
    "$A(" * 600 + "$B()" + ")" * 600,  # an ADT term
    "(" * 600 + "1" + ")" * 600,  # parentheses
])
def test_a_term_nested_600_deep_is_one_line(term):
    text = ".type R = [r:R]\n.type T = A {x:T} | B {}\n.decl p(x:number)\n" \
           f".decl q(x:R)\n.decl t(x:T)\nq(x) :- p(_), x = {term}.\n"
    message = refused(text)
    assert message.startswith("p.dl:6:") and message.endswith(
        f"error: nesting deeper than {MAX_NESTING} levels")


def test_the_cli_refuses_a_deep_record_and_a_macro_bomb_in_one_line(tmp_path, cli):
    (tmp_path / "facts").mkdir()
    for name, text in [("rec.dl", ".type R = [r:R]\n.decl q(x:R)\n.output q\nq("
                        + "[" * 600 + "nil" + "]" * 600 + ").\n"),
                       ("bomb.dl", DECL + TENFOLD + "p(" + "D(" * 9 + "1" + ")" * 9 + ").\n")]:
        prog = write(tmp_path / name, text)
        code, out, err = cli(["run", prog, "-F", tmp_path / "facts", "-D", tmp_path / "out"])
        assert (code, out, err.count("\n")) == (1, "", 1), err
        assert err.startswith(f"{prog}:4:") and "error: " in err
        assert not (tmp_path / "out").exists()


def test_records_nested_within_the_bound_still_run(tmp_path, cli, cli_spark):
    depth = 30
    value = "[" * depth + "nil" + "]" * depth
    prog = write(tmp_path / "p.dl", f".type R = [r:R]\n.decl q(x:R)\n.output q\nq({value}).\n"
                                    ".decl n(x:number)\n.output n\nn(1) :- q([_]).\n")
    (tmp_path / "facts").mkdir()
    code, _, err = cli(["run", prog, "-F", tmp_path / "facts", "-D", tmp_path / "out", "-q"])
    assert code == 0, err
    # Soufflé's text form of the value is the value as written; n holds since q's value is
    # a record of one field.
    assert (tmp_path / "out" / "q.csv").read_text() == value + "\n"
    assert (tmp_path / "out" / "n.csv").read_text() == "1\n"
