"""Groundedness is a property of the whole body (as in Soufflé); `.decl A, B(...)` declares two."""

from __future__ import annotations

from levelflow.engine.evaluate import evaluate_program
from levelflow.tasks import build_tasks, parse_program

PROGRAM = """
.decl A, B(x:number)
.decl g(a:number, n:number)
.decl f(n:number, a:number)
.decl fib(n:number, v:number)
g(1, 5). g(2, 6). g(3, 9).
f(4, 1). f(5, 2). f(4, 3).
A(x) :- f(x, _).
B(a) :- f(n - 1, a), g(a, n).
.decl r(n:number, a:number)
r(4, 1).
r(n, a) :- r(n - 1, a), g(a, n).
fib(0, 0). fib(1, 1).
fib(n, v1 + v2) :- fib(n - 1, v1), fib(n - 2, v2), fib(m, _), n = m + 1, n <= 10.
"""


def test_one_declaration_names_several_relations():
    program = parse_program(PROGRAM, "p.dl")
    assert program.decls["A"].types == program.decls["B"].types == ("number",)
    assert program.decls["A"].attrs == program.decls["B"].attrs == ("x",)


def test_a_variable_bound_by_another_atom_grounds_an_expression(spark):
    rels = evaluate_program(spark, build_tasks(parse_program(PROGRAM, "p.dl")), None)
    assert sorted(tuple(r) for r in rels["B"].collect()) == [(1,), (2,)]  # f(4,1)+g(1,5) ...
    assert sorted(tuple(r) for r in rels["A"].collect()) == [(4,), (5,)]
    assert sorted(tuple(r) for r in rels["r"].collect()) == [(4, 1), (5, 1)]  # the delta atom
    assert dict(tuple(r) for r in rels["fib"].collect())[10] == 55
