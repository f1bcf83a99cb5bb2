"""autoinc() in the head of a rule whose body holds a negation: every plan, the session's
bootstrap and its epochs number the same bindings (Soufflé: a new number per derived tuple,
not in recursive rules; levelflow numbers a rule's distinct bindings in sorted order).

The bootstrap counted such a task in the driver from empty versions, one counting term per
changed atom: the negated atom's term numbered its own rows from 0 again, and the tuple it
was to take back stayed (`c` held (2, 3) below).
"""

from __future__ import annotations

from naive_datalog import evaluate as naive_evaluate
from test_functors import _run_all_plans
from test_incremental_properties import rows_of, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program

PROGRAM = """
.decl a(x:number)
.input a
.decl b(x:number)
b(x) :- a(x), !a(x + 1).
.decl c(i:number, x:number)
c(autoinc(), x) :- a(x), !b(x).
.decl d(x:number)
d(x) :- a(x), !c(_, x).
"""


def test_autoinc_under_a_negation_under_every_plan(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, PROGRAM, {"a": {(1,), (2,), (3,)}})
    assert ref["b"] == {(3,)}
    assert ref["c"] == {(0, 1), (1, 2)}  # 3 has a b: not numbered
    assert ref["d"] == {(3,)}


def test_autoinc_under_a_negation_from_bootstrap_through_epochs(spark, tmp_path):
    pt = build_tasks(parse_program(PROGRAM, "a.dl"))
    facts = {"a": {(1,), (2,), (3,)}}
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    expected = [{(0, 1), (1, 2)},  # the bootstrap
                {(0, 1), (1, 2), (2, 3)},  # + a(4): b = {4}
                {(0, 3)}]  # - a(2): b = {1, 4}, so only 3 is numbered
    for k, (sign, row) in enumerate([(0, None), (1, (4,)), (-1, (2,))]):
        if sign:
            (session.insert if sign > 0 else session.remove)("a", row)
            (facts["a"].add if sign > 0 else facts["a"].discard)(row)
            session.commit()
        assert rows_of(session.relation("c")) == expected[k], k
        write_facts(tmp_path / f"ref{k}", facts)
        ref = naive_evaluate(pt, tmp_path / f"ref{k}")
        for name in pt.program.decls:
            assert rows_of(session.relation(name)) == ref[name], (k, name)
            assert session.size(name) == len(ref[name]), (k, name)
    assert rows_of(session.relation("d")) == {(1,), (4,)}
    session.close()
