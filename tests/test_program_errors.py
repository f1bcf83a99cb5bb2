"""A bad program gives ONE line `file:line:col: error: ...` at its first problem, never a crash."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from levelflow.cli import main
from levelflow.tasks import DatalogError, build_tasks, parse_program

# Line 1-4 declare; cases start on line 5.
HEAD = ".decl A(x:number)\n.decl B(x:number, y:number)\n.decl S(s:symbol)\n.decl U(u:unsigned)\n"

CASES = [
    # (program text after HEAD, line, col, message fragment)
    ("A(1) :- C(1).", 5, 9, "relation 'C' is not declared"),
    ("C(1).", 5, 1, "relation 'C' is not declared"),
    (".output Nope", 5, 9, "relation 'Nope' is not declared"),
    ("A(1, 2).", 5, 1, "relation 'A' has arity 1 but is used with 2 arguments"),
    ("A(x) :- B(x).", 5, 9, "relation 'B' has arity 2 but is used with 1 argument"),
    ('A("one").', 5, 3, "type mismatch: attribute 'x' of 'A' is number but the constant \"one\" "
                        "is a symbol"),
    ("A(1.5).", 5, 3, "attribute 'x' of 'A' is number but the constant 1.5 is a float"),
    ("S(1).", 5, 3, "attribute 's' of 'S' is symbol but the constant 1 is a number"),
    ("U(-1).", 5, 3, "attribute 'u' of 'U' is unsigned but the constant -1 is negative"),
    ("A(x) :- B(x, _), S(x).", 5, 20,
     "type mismatch: variable 'x' is symbol here (attribute 's' of 'S') but number at 5:3"),
    ("A(x) :- B(x, _), U(x).", 5, 20, "variable 'x' is unsigned here"),
    ('A(x) :- B(x, _), x != "a".', 5, 20, "type mismatch: cannot compare number x with symbol"),
    ("A(x) :- B(x, _), S(s), x = s + 1.", 5, 30, "arithmetic '+' on a symbol"),
    ("A(x) :- B(y, _).", 5, 3, "variable 'x' is not grounded"),
    ("A(y) :- B(y, _), !S(z).", 5, 21, "variable 'z' is not grounded"),
    ("A(y) :- B(y, _), z < y.", 5, 18, "variable 'z' is not grounded"),
    ("A(y) :- B(y, _), A(z + 1).", 5, 20, "variable 'z' is not grounded"),
    ("A(y) :- B(y, _), z = w + 1, w = z.", 5, 18, "variable 'z' is not grounded"),
    ("A(x) :- B(x, _), !A(x).", 5, 18, "relation 'A' is negated inside a recursive cycle with "
                                       "itself (the program is not stratifiable)"),
    ("A(x) :- B(x, _).\nB(x, x) :- A(x), !A(x).", 6, 18,
     "relation 'A' is negated inside a recursive cycle with 'B'"),
    (".decl A(y:symbol)", 5, 7, "relation 'A' is already declared at 1:1"),
    ("A(x).", 5, 3, "fact argument 'x' is not a constant"),
    ("A(_).", 5, 3, "wildcard '_' is not allowed in a rule head"),
    ("A(_) :- B(_, _).", 5, 3, "wildcard '_' is not allowed in a rule head"),
    ("A(x) :- B(x, _), _ < 3.", 5, 18, "wildcard '_' is not allowed in a comparison"),
    ("A(x) :- B(x, _), A(_ + 1).", 5, 20, "wildcard '_' is not allowed in arithmetic"),
    ("A(x) :- B(x, y) :- B(y, x).", 5, 17, "expected ',' or '.' but found ':-'"),
    ("A(x :- B(x, y).", 5, 5, "expected ')' but found ':-'"),
    ("A(x) :- B(x, y) A(y).", 5, 17, "expected ',' or '.' but found 'A'"),
    ("A(x) :- .", 5, 9, "expected an atom, a negation or a comparison but found '.'"),
    ("A(x) :- \n.decl C(x:number)", 6, 1, "expected an atom, a negation or a comparison but "
                                         "found '.decl'"),
    ("A(x) :- B(x, y)", 5, 16, "expected ',' or '.' but found end of file"),
    ("A(1), A(2).", 5, 11, "expected ':-' but found '.'"),
    ("A(1)", 5, 5, "expected ':-' or '.' but found end of file"),
    (".decl R(x number)", 5, 11, "expected ':' but found 'number'"),
    ("A(x) :- B(x, y), x y.", 5, 20, "expected a comparison operator but found 'y'"),
    ("1(x).", 5, 1, "expected a directive, a rule or a fact but found '1'"),
    ('S("abc).', 5, 3, "unterminated string"),
    ("/* never closed\nA(1).", 5, 1, "unterminated comment"),
    ("A(1). ` ", 5, 7, "unexpected character '`'"),
    (".decl R(x:Node)", 5, 11, "unknown type 'Node'"),
    (".type T <: T", 5, 7, "type 'T' is defined in terms of itself"),
    (".type T = number | symbol", 5, 7, "union type 'T' mixes the primitive types"),
    (".type number <: symbol", 5, 7, "cannot redefine the primitive type 'number'"),
    (".type T <: number\n.type T <: number", 6, 7, "type 'T' is already defined at 5:7"),
    (".input A\n.input A", 6, 8, "relation 'A' already has an .input directive at 5:8"),
    ("A(7 / 0).", 5, 5, "division by zero"),
    ("A(99999999999999999999).", 5, 3, "does not fit in 64 bits"),
    ("A(" + "9" * 5000 + ").", 5, 3, "integer constant 99999999999999999999... does not fit"),
    ("A(9223372036854775807 + 1).", 5, 23, "integer overflow: 9223372036854775808 does not fit"),
    # Constructs outside the subset: "<construct> is not supported".
    ("A(c) :- A(x), c = count : { A(_) }.", 5, 19, "aggregate over 'A' inside a recursive "
                                                  "cycle with 'A'"),
    ("A(c) :- B(c, _), c = sum y : { B(c, y) }, y > 0.", 5, 43, "variable 'y' is bound only "
                                                               "inside the aggregate at 5:22"),
    ("A(c) :- A(x), c = ord(x).", 5, 19, "type mismatch: 'ord' takes (symbol), not number"),
    ("A(x) :- B(x, _), x = @f(x).", 5, 22, "functor '@f' is not declared"),
    ("A(x) :- B(x, _), x = [1, 2].", 5, 20, "the type of this record or ADT term is not known"),
    ("A(x) :- B(x, _), x = $ Cons(1).", 5, 22, "'$' (counters: write autoinc()) is not "
                                               "supported"),
    ("S(s) :- S(t), s = cat(t, 1).", 5, 19, "type mismatch: 'cat' does not take a number"),
    ("A(n) :- A(t), n = strlen(t).", 5, 19, "'strlen' takes (symbol), not number"),
    ("A(n) :- A(x), n = as(x, symbol).", 5, 19, "as(..., symbol) casts a number to symbol: "
                                                "only casts within one primitive type"),
    ("A(n) :- A(x), n = x band 1.5.", 5, 21, "'band' takes number or unsigned, not float"),
    ('A(n) :- A(x), n = x ^ "2".', 5, 21, "arithmetic '^' on a symbol"),
    ("A(n) :- A(x), n = x & 2.", 5, 21, "the operator '&' is not supported"),
    ("A(n) :- A(m), n = range(m).", 5, 19, "'range' takes two or three arguments"),
    (".comp C { ", 5, 1, "component 'C' has no closing '}'"),
    (".init c = C", 5, 1, "component 'C' is not defined"),
    (".functor f(x:number): number", 5, 1, "functor 'f' has no binding: pass --functors"),
    ('.pragma magic', 5, 9, "expected a pragma name in quotes but found 'magic'"),
    ("A(x) :- A(x).\n.plan 0:1", 6, 9, "expected '(' but found '1'"),
    (".limitsize A(m=3)", 5, 12, ".limitsize A takes one option n=N"),
    ('.include "other.dl"', 5, 1, "cannot find included file 'other.dl' (searched .)"),
    ('#include "other.dl"', 5, 1, "cannot find included file 'other.dl' (searched .)"),
    ('#define F(x) #x', 5, 1, "#define F: '#' and '##' in a macro body are not supported"),
    ("#if 1\nA(1).", 5, 1, "#if without #endif"),
    (".decl E(x:number) eqrel", 5, 19, "eqrel relation 'E' must have two attributes of one "
                                       "type"),
    (".decl C(x:number, y:number) choice-domain x, z", 5, 29,
     "choice-domain of 'C' names 'z', not one of its attributes"),
    (".type P = [a: number, a: symbol]", 5, 23, "field 'a' is declared twice"),
    (".type T = Leaf {x: number} | Leaf {}", 5, 30, "branch 'Leaf' is declared twice"),
    ("A(x) :- B(x, _), !(B(x, y), x > 1).", 5, 25, "variable 'y' is not grounded"),
    ("A(x) <= B(y) :- x < y.", 5, 1, "a subsumptive rule relates tuples of one relation"),
    ("A(x), A(z) <= A(y) :- x < y.", 5, 1, "a subsumptive rule has one dominated atom"),
    ("A(x) <= A(y) :- x < w.", 5, 21, "variable 'w' is not grounded"),
    (".decl E(a:number, a:number)", 5, 19, "attribute 'a' of E is declared twice"),
]


@pytest.mark.parametrize(("text", "line", "col", "fragment"), CASES,
                         ids=[c[0][:40] for c in CASES])
def test_error_location_and_message(text, line, col, fragment):
    with pytest.raises(DatalogError) as e:
        parse_program(HEAD + text, "bad.dl")
    message = str(e.value)
    assert message.startswith(f"bad.dl:{line}:{col}: error: "), message
    assert fragment in message
    assert "\n" not in message
    assert e.value.loc.line == line and e.value.loc.col == col


def test_the_first_problem_in_source_order_wins():
    # A type mismatch on line 6 is reported even though the undeclared relation is found by
    # another pass, and the negation cycle (found last) sits later still.
    text = HEAD + "A(1).\nA(\"x\").\nA(x) :- Nope(x).\nA(x) :- B(x, _), !A(x)."
    with pytest.raises(DatalogError) as e:
        parse_program(text, "bad.dl")
    assert str(e.value).startswith("bad.dl:6:3: error: type mismatch")
    # Uses before a later duplicate declaration: the duplicate (line 6) comes after the use.
    with pytest.raises(DatalogError) as e:
        parse_program(HEAD + "A(y) :- B(y, _), q < 1.\n.decl A(x:number)", "bad.dl")
    assert str(e.value).startswith("bad.dl:5:18: error: variable 'q' is not grounded")


def test_a_semantic_problem_before_a_syntax_error_wins():
    text = HEAD + 'A("s").\nA(x) :- B(x, _)\nA(1).'
    with pytest.raises(DatalogError) as e:
        parse_program(text, "bad.dl")
    assert str(e.value).startswith("bad.dl:5:3: error: type mismatch")
    # Also before a lexer error, and a negation cycle found in the complete statements.
    with pytest.raises(DatalogError) as e:
        parse_program(HEAD + "A(x) :- B(x, _), !A(x).\nS(\"open", "bad.dl")
    assert str(e.value).startswith("bad.dl:5:18: error: relation 'A' is negated")


def test_a_syntax_error_wins_over_names_declared_after_it():
    # C and T may be declared past the syntax error: the syntax error is the first real problem.
    text = HEAD + "A(x) :- C(x).\n.decl D(x:T)\nA(1) A(2).\n.decl C(x:number)\n.type T <: number"
    with pytest.raises(DatalogError) as e:
        parse_program(text, "bad.dl")
    assert str(e.value) == "bad.dl:7:6: error: expected ':-' or '.' but found 'A'"
    with pytest.raises(DatalogError) as e:
        parse_program(HEAD + "A(x) :- C(x).\nS(\"open", "bad.dl")
    assert str(e.value).startswith("bad.dl:6:3: error: unterminated string")


def test_declaration_after_use_is_fine():
    p = parse_program("A(1).\n.decl A(x:number)", "ok.dl")
    assert list(p.decls) == ["A"]


def test_error_in_the_second_alternative_of_a_disjunction():
    with pytest.raises(DatalogError) as e:
        parse_program(HEAD + "A(x) :- B(x, _) ;\n S(x).", "bad.dl")
    assert str(e.value).startswith("bad.dl:6:4: error: type mismatch: variable 'x' is symbol")


def test_deep_nesting_is_an_error_not_a_crash():
    deep = "A(x) :- A(x), x = " + "(" * 5000 + "1" + ")" * 5000 + "."
    with pytest.raises(DatalogError, match="nesting deeper than"):
        parse_program(HEAD + deep, "bad.dl")
    long_sum = "A(x) :- A(x), x = " + " + ".join(["1"] * 5000) + "."
    with pytest.raises(DatalogError, match="expression deeper than"):
        parse_program(HEAD + long_sum, "bad.dl")
    blowup = "A(x) :- " + ", ".join(["(A(x) ; A(x))"] * 12) + "."
    with pytest.raises(DatalogError, match="disjunction expands into more than"):
        parse_program(HEAD + blowup, "bad.dl")


# -- the CLI shows the same one line -----------------------------------------------------

@pytest.mark.parametrize(("text", "line", "col", "fragment"), CASES[::6],
                         ids=[c[0][:40] for c in CASES[::6]])
def test_cli_prints_one_line_and_exits_1(tmp_path, capsys, text, line, col, fragment):
    path = tmp_path / "bad.dl"
    path.write_text(HEAD + text)
    with pytest.raises(SystemExit) as e:
        main(["graph", str(path)])
    assert e.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1
    assert err.startswith(f"{path}:{line}:{col}: error: ")
    assert fragment in err


def test_cli_missing_program_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["graph", str(tmp_path / "nope.dl")])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err == f"{tmp_path / 'nope.dl'}: error: cannot read program: No such file or directory\n"


def test_cli_subprocess_has_no_traceback(tmp_path):
    path = tmp_path / "bad.dl"
    path.write_text(HEAD + "A(x) :- B(x, y) :- B(y, x).")
    exe = Path(sys.executable).with_name("levelflow")
    proc = subprocess.run([str(exe), "graph", str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == f"{path}:5:17: error: expected ',' or '.' but found ':-'\n"


# -- fuzz: no text crashes the front end -------------------------------------------------

ONE_LINE = re.compile(r"^fuzz\.dl:\d+:\d+: error: [^\n]+$")
PIECES = [
    ".decl ", ".type ", ".input ", ".output ", ".printsize ", ".comp ", "A", "B", "S", "x", "y",
    "_", "(", ")", ",", ".", ":-", ":", "!", "=", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/",
    "%", ";", "number", "symbol", "float", "unsigned", "1", "-2", "1.5", '"s"', '"\\t"', " ",
    "\n", "<:", "|", "count", "cat", "@f", "[", "]", "$", "#", "//c\n", "/*c*/", "/*", '"',
    "true", "false", "brie", "eqrel", "IO=file", "A(x)", "B(x, y)", "A(1).", "x = y + 1",
    ".decl A(a:number)\n", ".decl B(a:number, b:number)\n", ".decl S(a:symbol)\n",
    "A(x) :- B(x, y).\n", "\x00", "é", "\t", "9" * 90, "9" * 19, "1e400", "*", "1.5",
    ".decl F(a:float)\n", "F(", ".decl U(a:unsigned)\n", "U(",
]


def _parse_or_one_line_error(text: str) -> None:
    try:
        build_tasks(parse_program(text, "fuzz.dl"))
    except DatalogError as e:
        assert ONE_LINE.match(str(e)), str(e)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_fuzz_token_soup_never_crashes(text):
    _parse_or_one_line_error(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_fuzz_random_text_never_crashes(text):
    _parse_or_one_line_error(text)
