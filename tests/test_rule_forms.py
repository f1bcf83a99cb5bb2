"""Soufflé rule forms lowered by the parser: disjunction, negated groups, several heads,
`true`/`false`, and hex, binary and unsigned literals.

Each form is checked for its lowered rules, then run (tests/lowered.py): by hand-derived
expected tuples, the naive reference, the engine from scratch and one incremental epoch pair.
"""

from __future__ import annotations

import pytest
from lowered import check_lowered

from levelflow.tasks import DatalogError, parse_program
from levelflow.tasks.ast import Atom, Comparison, Const, Negation, Var

HEAD = """.decl b(x:number)
.decl c(x:number)
.decl d(x:number)
.input b
.input c
.input d
"""


def rules_of(text: str):
    return parse_program(HEAD + ".decl a(x:number)\n.decl a2(x:number)\n" + text, "t.dl").rules


def test_negated_group_is_de_morgan():
    (r1, r2) = rules_of("a(x) :- b(x), !(c(x), x > 2).")
    assert r1.body == (Atom("b", (Var("x"),)), Negation(Atom("c", (Var("x"),))))
    assert r2.body == (Atom("b", (Var("x"),)), Comparison("<=", Var("x"), Const(2, "number")))


def test_negated_disjunction_is_a_conjunction_of_negations():
    (r,) = rules_of("a(x) :- b(x), !(c(x) ; d(x)).")
    assert r.body == (Atom("b", (Var("x"),)), Negation(Atom("c", (Var("x"),))),
                      Negation(Atom("d", (Var("x"),))))


def test_double_negation_and_negated_true_false():
    assert rules_of("a(x) :- b(x), !!c(x).")[0].body == (Atom("b", (Var("x"),)),
                                                         Atom("c", (Var("x"),)))
    assert rules_of("a(x) :- b(x), !(false).")[0].body == (Atom("b", (Var("x"),)),)
    assert rules_of("a(x) :- b(x), !(true).") == ()


def test_nested_disjunction_and_false_alternatives_drop():
    rules = rules_of("a(x) :- (b(x) ; false ; (c(x), (d(x) ; x = 1))).")
    assert [tuple(lit.relation if isinstance(lit, Atom) else lit.op for lit in r.body)
            for r in rules] == [("b",), ("c", "d"), ("c", "=")]


def test_several_heads_share_one_body():
    (r,) = rules_of("a(x), a2(x + 1) :- b(x).")
    assert [h.relation for h in r.heads] == ["a", "a2"]


@pytest.mark.parametrize(("literal", "value"), [("0x1F", 31), ("0X1f", 31), ("0b101", 5),
                                                ("0B0", 0), ("7u", 7), ("0u", 0),
                                                # held as the int64 of its 64 bits
                                                ("18446744073709551615u", -1),
                                                ("0xffffffffffffffffu", -1),
                                                ("9223372036854775808u", -(2**63))])
def test_integer_literals(literal, value):
    p = parse_program(f".decl u(x:unsigned)\nu({literal}).", "t.dl")
    assert p.rules[0].heads[0].args == (Const(value, "number"),)  # lowered: the engine's kind


@pytest.mark.parametrize(("text", "where", "fragment"), [
    (".decl n(x:number)\nn(5u).", "t.dl:2:3", "the constant 5 is an unsigned"),
    (".decl f(x:float)\nf(5u).", "t.dl:2:3", "is float but the constant 5 is an unsigned"),
    (".decl n(x:number)\n.decl m(x:number)\nn(x) :- m(y), x = y + 1u.", "t.dl:3:21",
     "arithmetic '+' mixes number and unsigned"),
    (".decl u(x:unsigned)\nu(18446744073709551616u).", "t.dl:2:3", "does not fit in 64 bits"),
    (".decl u(x:unsigned)\n.decl v(x:unsigned)\nv(x) :- u(x), !(u(z)).", "t.dl:3:19",
     "variable 'z' is not grounded"),
])
def test_refusals_are_one_line(text, where, fragment):
    with pytest.raises(DatalogError) as e:
        parse_program(text, "t.dl")
    assert str(e.value).startswith(where + ": error: ") and fragment in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


PROGRAM = HEAD + """.decl u(x:unsigned)
.input u
.decl a(x:number)
.decl only_b(x:number)
.decl both(x:number)
.decl flag(x:number)
.decl big(x:unsigned)
.output a
a(x), both(x) :- (b(x) ; c(x)), !(d(x), x > 0x2).
only_b(x) :- b(x), !(c(x) ; d(x)).
flag(0b11) :- true.
flag(x) :- b(x), false.
big(x) :- u(x), x >= 10u.
.decl const_head(x:number, y:number)
const_head(1, 2) :- b(x), x > 2.
const_head(3, 4) :- b(x), x > 100.
"""


def test_rule_forms_run_from_scratch_and_incrementally(spark, tmp_path):
    facts = {"b": {(1,), (2,), (3,), (4,)}, "c": {(4,), (5,)}, "d": {(1,), (3,), (5,)},
             "u": {(7,), (10,), (12,)}}
    # a = (b | c) minus the d's above 2: {1,2,3,4,5} - {3,5}
    expected = {"a": {(1,), (2,), (4,)}, "both": {(1,), (2,), (4,)}, "only_b": {(2,)},
                "flag": {(3,)}, "big": {(10,), (12,)},
                # a head of constants: one tuple while some body row holds, none without
                "const_head": {(1, 2)}}
    check_lowered(spark, tmp_path, PROGRAM, facts, expected)
