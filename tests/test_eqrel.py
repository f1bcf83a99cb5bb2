"""`eqrel` relations: reflexive over their elements, symmetric, transitive (tasks/eqrel.py
lowers them to four rules), from scratch and through an epoch pair."""

from __future__ import annotations

import itertools

import pytest
from lowered import check_lowered

from levelflow.tasks import DatalogError, parse_program


def classes(*groups):
    """Return every ordered pair within each group: the equivalence the groups make."""
    return {(a, b) for g in groups for a, b in itertools.product(g, g)}


PROGRAM = """.decl link(x:number, y:number)
.input link
.decl same(x:number, y:number) eqrel
.output same
same(x, y) :- link(x, y).
same(100, 101).
.decl named(a:symbol, b:symbol) eqrel
.input named
.decl lone(x:number)
.output lone
lone(x) :- same(x, x), !link(x, _), !link(_, x).
"""


def test_eqrel_is_the_smallest_equivalence(spark, tmp_path):
    facts = {"link": {(1, 2), (2, 3), (5, 4), (6, 6)},
             "named": {("a", "b"), ("c", "b"), ("d", "e")}}
    expected = {"same": classes((1, 2, 3), (4, 5), (6,), (100, 101)),
                "named": classes(("a", "b", "c"), ("d", "e")),
                "lone": {(100,), (101,)}}
    check_lowered(spark, tmp_path, PROGRAM, facts, expected)


@pytest.mark.parametrize(("decl", "col"), [(".decl e(x:number) eqrel", 19),
                                           (".decl e(x:number, y:symbol) eqrel", 29)])
def test_eqrel_needs_two_attributes_of_one_type(decl, col):
    with pytest.raises(DatalogError) as e:
        parse_program(decl, "t.dl")
    assert str(e.value) == (f"t.dl:1:{col}: error: eqrel relation 'e' must have two "
                            "attributes of one type")
