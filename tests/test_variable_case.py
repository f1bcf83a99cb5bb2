"""Variables that differ only in case are different variables, in a session left as it was."""

from __future__ import annotations

import itertools

from levelflow.engine.compile import var_col
from levelflow.engine.evaluate import evaluate_program
from levelflow.tasks import build_tasks, parse_program


def test_column_names_are_unique_regardless_of_case():
    names = ["i", "I", "_i", "_I", "i_", "I_", "__i", "iI", "Ii", "x1", "X1", "_1", "a_b", "aB"]
    cols = [var_col(n) for n in names]
    assert len({c.lower() for c in cols}) == len(names)
    assert all(c == c.lower() and c.startswith("v_") for c in cols)
    # every pair of short identifiers over a tricky alphabet stays apart
    short = ["".join(p) for n in (1, 2, 3) for p in itertools.product("aA_1", repeat=n)
             if not p[0].isdigit()]
    assert len({var_col(n).lower() for n in short}) == len(short)


def test_i_and_I_in_one_rule_are_two_variables(spark):
    before = spark.conf.get("spark.sql.caseSensitive")
    pt = build_tasks(parse_program("""
        .decl e(x:number, y:number)
        e(1, 2). e(2, 3). e(3, 3).
        .decl r(a:number, b:number, c:number)
        r(i, I, j) :- e(i, I), e(I, j), i != j.
        .decl s(a:number, b:number)
        s(I_, _I) :- e(I_, _I), I_ < _I.
    """, "case.dl"))
    rels = evaluate_program(spark, pt, None)
    assert sorted(tuple(r) for r in rels["r"].collect()) == [(1, 2, 3), (2, 3, 3)]
    assert sorted(tuple(r) for r in rels["s"].collect()) == [(1, 2), (2, 3)]
    assert spark.conf.get("spark.sql.caseSensitive") == before  # not changed to get there
