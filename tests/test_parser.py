"""The Datalog front end turns each supported Soufflé construct into the expected AST."""

from __future__ import annotations

import pytest

from levelflow.tasks import DatalogError, load_program, parse_program
from levelflow.tasks.ast import (
    IO,
    Atom,
    BinOp,
    Comparison,
    Const,
    Decl,
    Loc,
    Negation,
    Rule,
    Var,
    Wildcard,
)

NUM = ".decl A(x:number)\n.decl B(x:number, y:number)\n.decl S(s:symbol)\n.decl F(f:float)\n"


def v(name: str) -> Var:
    return Var(name)


def n(value: int) -> Const:
    return Const(value, "number")


def rules_of(text: str, prefix: str = NUM) -> tuple[Rule, ...]:
    return parse_program(prefix + text, "t.dl").rules


def only_rule(text: str, prefix: str = NUM) -> Rule:
    rules = rules_of(text, prefix)
    assert len(rules) == 1
    return rules[0]


# -- declarations and types ------------------------------------------------------------------

def test_decl_primitive_types_in_order():
    p = parse_program(".decl R(a:number, b:unsigned, c:float, d:symbol)", "t.dl")
    assert p.decls == {"R": Decl("R", ("a", "b", "c", "d"),
                                 ("number", "unsigned", "float", "symbol"))}
    assert p.decls["R"].arity == 4
    assert p.decls["R"].loc == Loc("t.dl", 1, 1)


def test_nullary_decl_and_fact():
    p = parse_program(".decl Z()\nZ().\n.decl Y()\nY() :- Z().", "t.dl")
    assert p.decls["Z"].arity == 0
    assert p.rules == (Rule((Atom("Z", ()),), ()), Rule((Atom("Y", ()),), (Atom("Z", ()),)))


def test_decls_keep_source_order():
    p = parse_program(".decl C(x:number)\n.decl A(x:number)\n.decl B(x:number)", "t.dl")
    assert list(p.decls) == ["C", "A", "B"]


def test_user_types_resolve_to_primitives():
    text = """
    .type Id <: number
    .type Name <: symbol
    .type Alias = Name
    .type Weight = float
    .type Either = Id | Id2
    .type Id2 <: Id
    .number_type Old
    .symbol_type OldS
    .decl R(a:Id, b:Alias, c:Weight, d:Either, e:Old, f:OldS)
    """
    p = parse_program(text, "t.dl")
    assert p.decls["R"].types == ("number", "symbol", "float", "number", "number", "symbol")


def test_decl_qualifiers_are_accepted_and_old_io_qualifiers_become_directives():
    p = parse_program(".decl A(x:number) brie\n.decl B(x:number) btree inline output\n"
                      "A(1).\nB(x) :- A(x).", "t.dl")
    assert set(p.decls) == {"A", "B"}
    assert list(p.outputs) == ["B"]
    assert len(p.rules) == 2


# -- directives ------------------------------------------------------------------------------

def test_input_output_printsize_with_options():
    text = NUM + ('.input B(IO=file, filename="b file.tsv", delimiter="\\t")\n'
                  '.output A, S(IO=file, delimiter=",")\n.printsize A\n.printsize S\n')
    p = parse_program(text, "t.dl")
    assert p.inputs == {"B": IO("input", "B", (("IO", "file"), ("filename", "b file.tsv"),
                                               ("delimiter", "\t")))}
    assert p.inputs["B"].option("delimiter") == "\t"
    assert p.inputs["B"].option("missing", "x") == "x"
    # Options of a multi-relation directive apply to every relation it names.
    assert p.outputs == {"A": IO("output", "A", (("IO", "file"), ("delimiter", ","))),
                         "S": IO("output", "S", (("IO", "file"), ("delimiter", ",")))}
    assert p.printsize == ("A", "S")
    assert p.outputs["S"].loc == Loc("t.dl", 6, 12)


def test_option_values_may_be_words_and_numbers():
    p = parse_program(NUM + ".input A(IO=file, headers=true, delimiter=2)", "t.dl")
    assert p.inputs["A"].options == (("IO", "file"), ("headers", "true"), ("delimiter", "2"))


# -- facts and constants ---------------------------------------------------------------------

@pytest.mark.parametrize(("literal", "value", "kind"), [
    ("0", 0, "number"), ("42", 42, "number"), ("-7", -7, "number"), ("0x1F", 31, "number"),
    ("0b101", 5, "number"), ("- 3", -3, "number"),
    # Soufflé's scanner: an IPv4 address is the number (a << 24) + (b << 16) + (c << 8) + d in
    # a 32-bit int, so from 128.0.0.0 on it is negative
    ("1.2.3.4", 16909060, "number"), ("192.168.0.1", 3232235521 - 2**32, "number"),
    ("0.0.0.0", 0, "number"), ("255.255.255.255", -1, "number"),
])
def test_integer_constants(literal, value, kind):
    assert only_rule(f"A({literal}).").heads[0].args == (Const(value, kind),)


@pytest.mark.parametrize(("literal", "value"), [("7u", 7), ("0xffu", 255), ("0b101u", 5)])
def test_unsigned_constants_in_every_base(literal, value):
    """Soufflé's scanner reads `[0-9]+u`, `0x[0-9a-f]+u` and `0b[01]+u` as unsigned."""
    p = parse_program(f".decl U(x:unsigned)\nU({literal}).", "t.dl")
    assert p.rules[0].heads[0].args[0].value == value


def test_an_ip_part_above_255_is_an_error():
    with pytest.raises(DatalogError, match=r"t\.dl:2:3: error: IP out of range"):
        parse_program(".decl A(x:number)\nA(1.2.256.4).", "t.dl")


def test_a_string_may_span_lines_as_in_soufflé():
    """Soufflé's string token is `"(\\.|[^"\\])*"`: a raw newline is part of the string."""
    p = parse_program('.decl S(s:symbol)\nS("one\ntwo").\nS("x").', "t.dl")
    assert [r.heads[0].args[0].value for r in p.rules] == ["one\ntwo", "x"]
    assert p.rules[1].loc == Loc("t.dl", 4, 1)


@pytest.mark.parametrize(("literal", "value"), [
    ("1.5", 1.5), ("-2.0e3", -2000.0), ("3e2", 300.0), ("0.25E-1", 0.025), ("7", 7.0),
])
def test_float_constants(literal, value):
    (arg,) = only_rule(f"F({literal}).").heads[0].args
    assert arg == Const(value, "float")
    assert isinstance(arg.value, float)


@pytest.mark.parametrize(("literal", "value"), [
    ('"plain"', "plain"),  # TAB and newline are refused: test_bad_values.py
    ('"quote \\" inside"', 'quote " inside'), ('"back\\\\slash"', "back\\slash"),
    ('"with space and // not a comment"', "with space and // not a comment"),
    ('""', ""), ('"ünïcødé"', "ünïcødé"), ('"\\a\\b\\f\\v\\\'"', "\a\b\f\v'"),
    ('"\\\\d+\\\\.\\\\\\\\"', "\\d+\\.\\\\"),  # a regex's backslashes are written doubled
])
def test_string_constants_are_unescaped(literal, value):
    assert only_rule(f"S({literal}).").heads[0].args == (Const(value, "symbol"),)


@pytest.mark.parametrize("body", ["\\d+", "a\\.b", "\\0", "\\q", "ok\\n\\x41"])
def test_an_unknown_escape_is_an_error_at_its_backslash(body):
    """Soufflé's scanner knows \\" \\' \\\\ \\a \\b \\f \\n \\r \\t \\v and reports any other
    escape as an error (`Unknown escape sequence \\d`), so `"\\d"` is refused, not kept."""
    bad = next(i for i in range(len(body)) if body[i] == "\\" and body[i + 1] not in "n")
    with pytest.raises(DatalogError) as e:
        parse_program(f'.decl S(s:symbol)\nS("x"). S("{body}").', "t.dl")
    assert str(e.value).startswith(f"t.dl:2:{12 + bad}: error: unknown escape sequence "
                                   f"\\{body[bad + 1]} in a string")


def test_constant_arithmetic_in_a_fact_is_folded_with_c_division():
    rules = rules_of("A(1 + 2 * 3). A(-7 / 2). A(-7 % 2). A(7 % -2). A((1 + 2) * 3).")
    assert [r.heads[0].args[0] for r in rules] == [n(7), n(-3), n(-1), n(1), n(9)]


def test_facts_in_a_row_and_their_positions():
    rules = rules_of("A(1). A(2).\n  B(3, 4).")
    assert [r.heads[0] for r in rules] == [Atom("A", (n(1),)), Atom("A", (n(2),)),
                                           Atom("B", (n(3), n(4)))]
    assert all(r.is_fact for r in rules)
    assert [r.loc for r in rules] == [Loc("t.dl", 5, 1), Loc("t.dl", 5, 7), Loc("t.dl", 6, 3)]
    assert rules[2].heads[0].args[1].loc == Loc("t.dl", 6, 8)


# -- rules -----------------------------------------------------------------------------------

def test_rule_with_several_body_atoms_and_a_wildcard():
    rule = only_rule("A(x) :- B(x, y), B(y, _), A(y).")
    assert rule == Rule((Atom("A", (v("x"),)),),
                        (Atom("B", (v("x"), v("y"))), Atom("B", (v("y"), Wildcard())),
                         Atom("A", (v("y"),))))
    assert not rule.is_fact


def test_several_heads():
    rule = only_rule("A(x), S(s) :- B(x, _), S(s).")
    assert [h.relation for h in rule.heads] == ["A", "S"]


def test_negation():
    rule = only_rule("C(x) :- B(x, _), !A(x), !B(_, x).", NUM + ".decl C(x:number)\n")
    assert rule.body[1:] == (Negation(Atom("A", (v("x"),))),
                             Negation(Atom("B", (Wildcard(), v("x")))))
    assert rule.body[1].loc == Loc("t.dl", 6, 18)


@pytest.mark.parametrize("op", ["=", "!=", "<", "<=", ">", ">="])
def test_comparison_operators(op):
    rule = only_rule(f"A(x) :- B(x, y), x {op} y.")
    assert rule.body[1] == Comparison(op, v("x"), v("y"))


def test_arithmetic_precedence_and_parentheses():
    rule = only_rule("A(z) :- B(x, y), z = x + y * 2 - (x - y) / 3 % 4.")
    expected = BinOp("-", BinOp("+", v("x"), BinOp("*", v("y"), n(2))),
                     BinOp("%", BinOp("/", BinOp("-", v("x"), v("y")), n(3)), n(4)))
    assert rule.body[1] == Comparison("=", v("z"), expected)


def test_subtraction_is_left_associative():
    rule = only_rule("A(z) :- B(x, y), z = x - y - 1.")
    assert rule.body[1].right == BinOp("-", BinOp("-", v("x"), v("y")), n(1))


def test_unary_minus_of_a_variable_is_zero_minus_it():
    rule = only_rule("A(z) :- B(x, _), z = -x * 2.")
    assert rule.body[1].right == BinOp("*", BinOp("-", n(0), v("x")), n(2))


def test_arithmetic_in_heads_and_atom_arguments():
    rule = only_rule("B(n, a + b) :- B(n - 1, a), B(n - 2, b), n < 30, B(n, _).")
    assert rule.heads[0].args[1] == BinOp("+", v("a"), v("b"))
    assert rule.body[0].args[0] == BinOp("-", v("n"), n(1))


def test_equality_binds_a_variable_for_the_head():
    rule = only_rule("A(y) :- A(x), y = x * 2.")
    assert rule.body[1] == Comparison("=", v("y"), BinOp("*", v("x"), n(2)))
    rule = only_rule("A(y) :- A(x), x + 1 = y.")
    assert rule.body[1].right == v("y")


def test_body_atoms_in_any_order():
    rule = only_rule("A(z) :- z = x + 1, x < 5, A(x).")
    assert isinstance(rule.body[2], Atom)


def test_an_input_relation_may_also_have_rules():
    p = parse_program(NUM + ".input A\nA(x) :- B(x, _).", "t.dl")
    assert "A" in p.inputs and len(p.rules) == 1


def test_disjunction_expands_into_one_rule_per_alternative():
    rules = rules_of("C(x) :- B(x, y), (A(y) ; y = 1 ; y > x, !A(x)).", NUM + ".decl C(x:number)\n")
    assert [len(r.body) for r in rules] == [2, 2, 3]
    assert [r.body[1] for r in rules] == [Atom("A", (v("y"),)), Comparison("=", v("y"), n(1)),
                                          Comparison(">", v("y"), v("x"))]
    assert all(r.body[0] == Atom("B", (v("x"), v("y"))) for r in rules)
    top = rules_of("A(x) :- A(x) ; B(x, _).")
    assert [r.body for r in top] == [(Atom("A", (v("x"),)),), (Atom("B", (v("x"), Wildcard())),)]


def test_parenthesized_arithmetic_is_not_a_body_group():
    rule = only_rule("A(x) :- A(x), (x + 1) * 2 < 10.")
    assert rule.body[1] == Comparison("<", BinOp("*", BinOp("+", v("x"), n(1)), n(2)), n(10))


def test_true_and_false_literals():
    assert only_rule("A(x) :- A(x), true.").body == (Atom("A", (v("x"),)),)
    assert rules_of("A(x) :- A(x), false.") == ()


def test_comments_are_ignored_but_count_lines():
    text = "// line comment A(1).\n/* block\n A(2). */ A(3). // trailing\n/**/A(/* in */4)."
    rules = rules_of(text)
    assert [r.heads[0].args[0].value for r in rules] == [3, 4]
    assert rules[0].loc == Loc("t.dl", 7, 11)


def test_whitespace_crlf_and_bom():
    p = parse_program("\ufeff.decl A(x:number)\r\nA(1).\r\n", "t.dl")
    assert p.rules[0].loc == Loc("t.dl", 2, 1)


def test_clause_dot_followed_by_a_word_is_not_a_directive():
    rules = rules_of("A(1).B(2, 3).")
    assert [r.heads[0].relation for r in rules] == ["A", "B"]


def test_float_arithmetic_and_float_variables():
    rule = only_rule("F(y) :- F(x), y = x * 1.5 - 2.", NUM)
    assert rule.body[1].right == BinOp("-", BinOp("*", v("x"), Const(1.5, "float")), n(2))


def test_program_properties_and_file_name():
    p = parse_program(NUM + "A(1).\nA(x) :- B(x, _).", "prog.dl")
    assert p.file == "prog.dl"
    assert len(p.facts) == 1 and p.facts[0].heads[0].args == (n(1),)


def test_load_program_reads_a_file(tmp_path):
    path = tmp_path / "p.dl"
    path.write_text(NUM + "A(1).\n")
    p = load_program(path)
    assert p.file == str(path)
    assert p.rules[0].loc == Loc(str(path), 5, 1)


def test_load_program_missing_file_names_it(tmp_path):
    path = tmp_path / "missing.dl"
    with pytest.raises(DatalogError) as e:
        load_program(path)
    assert str(e.value) == f"{path}: error: cannot read program: No such file or directory"


def test_load_program_bad_utf8_points_at_the_byte(tmp_path):
    path = tmp_path / "bin.dl"
    path.write_bytes(b".decl A(x:number)\nA(1). \xff\n")
    with pytest.raises(DatalogError) as e:
        load_program(path)
    assert str(e.value) == f"{path}:2:7: error: the file is not valid UTF-8"
