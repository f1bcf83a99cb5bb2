"""Groundedness is a property of the whole body (as in Soufflé); `.decl A, B(...)` declares two."""

from __future__ import annotations

from levelflow.engine.evaluate import evaluate_program
from levelflow.engine.rules import term_vars
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
fib(n, v1 + v2) :- fib(n - 1, v1), fib(n - 2, v2), fib(m, _), n = m + 1, n <= 6.
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
    # fib(n) bound by fib(m) one round later: a Spark round each, so a few suffice
    assert dict(tuple(r) for r in rels["fib"].collect()) == {0: 0, 1: 1, 2: 1, 3: 2, 4: 3,
                                                              5: 5, 6: 8}


TAK = """
.decl natural(n:number)
.input natural
.decl tak(x:number, y:number, z:number, v:number, q:number)
tak(X,Y,Z,Y,0) :- Y >= X, natural(X), natural(Y), natural(Z).
tak(X,Y,Z,V,Q1+Q2+Q3+Q4+1) :- tak(X-1,Y,Z,V1,Q1), tak(Y-1,Z,X,V2,Q2), tak(Z-1,X,Y,V3,Q3),
                              tak(V1,V2,V3,V,Q4), Y < X.
"""


def takeuchi(low: int, high: int) -> set[tuple]:
    """Return tak's tuples by the Takeuchi function itself, counting its calls (no Datalog).

    tak(x, y, z) holds when every call it makes stays within [low, high]; then v is y if
    y >= x (Soufflé's example returns y there), and q counts the calls below it.
    """
    import functools

    @functools.cache
    def tak(x, y, z):
        if not all(low <= a <= high for a in (x, y, z)):
            return None
        if y >= x:
            return y, 0
        parts = [tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y)]
        if None in parts:
            return None
        last = tak(*(v for v, _ in parts))
        return None if last is None else (last[0], sum(q for _, q in parts) + last[1] + 1)

    span = range(low, high + 1)
    return {(x, y, z, *tak(x, y, z)) for x in span for y in span for z in span
            if tak(x, y, z) is not None}


def test_every_delta_version_of_every_rule_finds_a_join_order():
    """No atom of tak's rule can be matched whole first (each `tak(X-1, ...)` needs X from
    another): every semi-naive variant still joins, matching an expression once it is bound."""
    import polars as pl

    from levelflow.engine.plans.columnar import body_rows, empty_frame

    for text in (TAK, PROGRAM):
        program = parse_program(text, "p.dl")
        for rule in (r for r in program.rules if r.body):
            atoms = [i for i, _, _ in rule.body_atoms()]
            for first in (None, *atoms):
                frames = {i: empty_frame(program.decls[a.relation])
                          for i, a, _ in rule.body_atoms()}
                body, types = body_rows(rule, program.decls, frames, first=first)
                assert isinstance(body, pl.DataFrame) and body.height == 0
                for head in rule.heads:
                    assert set().union(*map(term_vars, head.args)) <= set(types), (rule, first)


def test_takeuchi_in_one_python_worker_is_the_function():
    import polars as pl

    from levelflow.engine.plans.fixpoint import run_task

    pt = build_tasks(parse_program(TAK, "tak.dl"))
    task = pt.task_of("tak")
    natural = pl.DataFrame({"c0": list(range(-4, 5))})
    outcome = run_task(tuple(r for r in task.rules if r.body), task.relations, pt.program.decls,
                       {"natural": natural}, {})
    assert set(outcome.relation("tak").rows()) == takeuchi(-4, 4)
    assert len(takeuchi(-4, 4)) > 9 * 10 * 9 // 2  # more than the base tuples: it recursed
