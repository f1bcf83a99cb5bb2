"""Soufflé's user types: subtypes, aliases, unions of subtypes of one base, `.number_type`,
`.symbol_type` and `as(x, T)` casts, checked as Soufflé checks them and lowered to primitives.

A variable takes the intersection of the types of the positive atoms binding it; in a head or
a negation its type must be a subtype of the attribute's (Soufflé issue 1560 shows the latter).
"""

from __future__ import annotations

import pytest
from lowered import check_lowered

from levelflow.tasks import DatalogError, parse_program

TYPES = """.type Even <: number
.type Odd <: number
.type Small <: Even
.type Any = Even | Odd
.type Alias = Odd
.number_type Weight
.symbol_type Name
.decl e(x:Even)
.decl o(x:Odd)
.decl a(x:Any)
.decl s(x:Small)
.decl n(x:number)
.decl al(x:Alias)
.decl w(x:Weight)
.decl nm(x:Name)
.decl sy(x:symbol)
"""
LINE = TYPES.count("\n") + 1  # the line of the rule under test


@pytest.mark.parametrize("rule", [
    "a(x) :- e(x).",  # a subtype where its union is expected
    "e(x) :- s(x).",  # a subtype of a subtype
    "n(x) :- e(x).",  # up to the primitive
    "al(x) :- o(x).", "o(x) :- al(x).",  # an alias is its type
    "e(x) :- a(x), e(x).",  # bound by both: the intersection is Even
    "s(x) :- a(x), s(x), !e(x).",  # Small within Even
    "e(as(x, Even)) :- n(x).", "n(as(x, number)) :- e(x).",
    "e(x) :- n(y), x = as(y, Even).",
    "sy(x) :- nm(x).", "nm(as(x, Name)) :- sy(x).",
    "e(2).", "w(3).", "nm(\"bob\").",
])
def test_accepted(rule):
    parse_program(TYPES + rule, "t.dl")


@pytest.mark.parametrize(("rule", "col", "fragment"), [
    ("e(x) :- a(x).", 3, "variable 'x' is Any but the attribute of 'e' is Even (Any is not a "
                         "subtype of Even)"),
    ("s(x) :- e(x).", 3, "Even is not a subtype of Small"),
    ("e(x) :- n(x).", 3, "number is not a subtype of Even"),
    ("w(x) :- n(x).", 3, "number is not a subtype of Weight"),
    ("nm(x) :- sy(x).", 4, "symbol is not a subtype of Name"),
    ("n(x) :- e(x), o(x).", 17, "variable 'x' is Odd here but Even at"),
    ("n(x) :- a(x), !s(x).", 18, "Any is not a subtype of Small"),
    ("e(as(x, Odd)) :- n(x).", 3, "the cast is Odd but the attribute of 'e' is Even"),
    ("e(as(x, symbol)) :- n(x).", 3, "casts a number to symbol"),
    ("e(as(x, Nope)) :- n(x).", 9, "unknown type 'Nope'"),
])
def test_refused_with_one_line(rule, col, fragment):
    with pytest.raises(DatalogError) as e:
        parse_program(TYPES + rule, "t.dl")
    assert str(e.value).startswith(f"t.dl:{LINE}:{col}: error: "), str(e.value)
    assert fragment in str(e.value), str(e.value)


@pytest.mark.parametrize(("text", "fragment"), [
    (".type U = Even | Name", "union type 'U' mixes the primitive types number and symbol"),
    (".type Even = Even", "type 'Even' is already defined"),
    (".type L = M\n.type M = L", "type 'L' is defined in terms of itself"),
])
def test_bad_type_definitions(text, fragment):
    with pytest.raises(DatalogError, match=fragment):
        parse_program(TYPES + text, "t.dl")


def test_types_lower_to_primitives():
    p = parse_program(TYPES + "e(as(x, Even)) :- n(x).", "t.dl")
    assert p.decls["a"].types == ("number",) and p.decls["nm"].types == ("symbol",)
    assert p.rules[0].heads[0].args[0].name == "x"  # the cast is gone


PROGRAM = TYPES + """.input n
.input sy
.decl big(x:Any)
.output big
e(x) :- n(y), y % 2 = 0, x = as(y, Even).
o(as(y, Odd)) :- n(y), y % 2 != 0.
s(as(x, Small)) :- e(x), x < 4.
a(x) :- e(x), !s(as(x, Small)).
a(x) :- o(x).
al(x) :- o(x), x > 1.
big(x) :- a(x), x >= 3.
nm(as(x, Name)) :- sy(x), x != "z".
"""


def test_typed_program_runs_from_scratch_and_incrementally(spark, tmp_path):
    facts = {"n": {(1,), (2,), (3,), (4,), (6,)}, "sy": {("a",), ("z",)}}
    expected = {"e": {(2,), (4,), (6,)}, "o": {(1,), (3,)}, "s": {(2,)},
                "a": {(4,), (6,), (1,), (3,)}, "al": {(3,)}, "big": {(3,), (4,), (6,)},
                "nm": {("a",)}}
    check_lowered(spark, tmp_path, PROGRAM, facts, expected)
