"""Aggregates' variable scopes as Soufflé has them, nested aggregates' types, and aggregates in
recursive rules: expected answers derived by hand, under every plan, and through epochs
against a from-scratch reference.

Soufflé (its ast/analysis/Aggregate.cpp and the GroundWitnesses transformer; issue #1801:
`youngest(p, n) :- n = min x : family(p, x).` gives every p of the minimum) reads a variable
that the rest of a rule names without grounding, and that the aggregate's body grounds, as a
*witness*: a min or max gives each binding that reaches its value, ties included; a count, sum
or mean refuses it. A variable of the target expression is the aggregate's own, whatever the
rest of the rule names so; a variable grounded outside and named in the body is injected.
"""

from __future__ import annotations

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_functors import _run_all_plans
from test_incremental_properties import rows_of, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.errors import DatalogError

DECLS = """
.decl Student(name:symbol, height:number)
.input Student
.decl family(name:symbol, age:number)
.input family
.decl emp(d:symbol, name:symbol, pay:number)
.input emp
.decl dept(d:symbol)
.input dept
.decl A(x:number, y:number)
.input A
"""

WITNESSES = DECLS + """
.decl Tallest(student:symbol, height:number)
Tallest(s, n) :- n = max h : { Student(s, h) }.
.decl youngest(name:symbol, age:number)
youngest(p, n) :- n = min x : family(p, x).
.decl youngestAdult(name:symbol, age:number)
youngestAdult(p, n) :- n = min x : { family(p, x), x > 20 }.
.decl tallestName(s:symbol)
tallestName(s) :- _ = max h : { Student(s, h) }.
.decl headMax(s:symbol, n:number)
headMax(s, max h : Student(s, h)).
.decl topPaid(d:symbol, e:symbol, p:number)
topPaid(d, e, p) :- dept(d), p = max q : { emp(d, e, q) }.
.decl minSum(x:number, y:number, s:number)
minSum(x, y, s) :- s = min x + y : { A(x, y) }.
.decl pair(p:symbol, q:symbol)
pair(p, q) :- _ = min a : family(p, a), _ = max h : Student(q, h).
.decl highest(x:number)
highest(x) :- x = max x : A(_, x).
.decl shadow(x:number, m:number)
shadow(x, m) :- A(x, _), m = max x : A(_, x).
.decl peak(x:number, m:number)
peak(x, m) :- A(x, _), m = max y : A(x, y).
"""

FACTS = {
    "Student": {("Anna", 170), ("Rachel", 177), ("Quarantina", 180), ("Zoe", 180)},
    "family": {("Alissa", 10), ("Maria", 46), ("Mark", 50), ("John", 10)},
    "emp": {("hr", "ann", 50), ("hr", "bob", 70), ("hr", "cid", 70), ("it", "dan", 90),
            ("ops", "eve", 20)},
    "dept": {("hr",), ("it",), ("law",)},
    "A": {(1, 2), (2, 1), (3, 5), (0, 3)},
}


def test_witnesses_and_scopes_under_every_plan(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, WITNESSES, FACTS)
    assert ref["Tallest"] == {("Quarantina", 180), ("Zoe", 180)}  # a tie: both
    assert ref["youngest"] == {("Alissa", 10), ("John", 10)}
    assert ref["youngestAdult"] == {("Maria", 46)}  # the body's filter holds for the witness
    assert ref["tallestName"] == {("Quarantina",), ("Zoe",)}  # `_ = max ...` (Soufflé's own)
    assert ref["headMax"] == ref["Tallest"]  # an aggregate in the head
    # d injected (one max per department, law has none), e the witness of each
    assert ref["topPaid"] == {("hr", "bob", 70), ("hr", "cid", 70), ("it", "dan", 90)}
    assert ref["minSum"] == {(1, 2, 3), (2, 1, 3), (0, 3, 3)}  # an expression's witnesses
    assert ref["pair"] == {(p, q) for p in ("Alissa", "John") for q in ("Quarantina", "Zoe")}
    assert ref["highest"] == {(5,)}  # `x = max x : ...`: the target is the aggregate's own
    assert ref["shadow"] == {(x, 5) for x in (0, 1, 2, 3)}  # so it shadows the rule's x
    assert ref["peak"] == {(1, 2), (2, 1), (3, 5), (0, 3)}  # named in the body: injected


NESTED = """
.decl w(x:number, v:float)
.input w
.decl n(x:number)
.input n
.decl c(y:number)
.input c
.decl e(x:number, y:number)
.input e
.decl nsum(s:float)
nsum(s) :- s = sum y : { n(x), y = sum v : w(x, v) }.
.decl ncount(s:number)
ncount(s) :- s = sum k : { n(x), k = count : w(x, _) }.
.decl nmean(s:float)
nmean(s) :- s = max m : { n(x), m = mean v : w(x, v) }.
.decl nexpr(s:float)
nexpr(s) :- s = sum y * 2.0 : { n(x), y = sum v : w(x, v) }.
.decl nmeanc(s:float)
nmeanc(s) :- s = mean k : { n(x), k = count : w(x, _) }.
.decl deep(s:float)
deep(s) :- s = sum a : { n(x), a = max b : { w(x, v), b = sum u : { w(y, u), y <= x } + v } }.
.decl r(o:number, x:number, s:number)
r(1, 1, 0).
r(o, y, s) :- r(o, x, _), e(x, y), s = sum k : { c(k), k < y }.
"""

NESTED_FACTS = {
    "w": {(1, 2.5), (1, 0.5), (2, 4.0), (3, -1.25)},
    "n": {(1,), (2,), (4,)},
    "c": {(1,), (2,), (5,)},
    "e": {(1, 2), (2, 3), (3, 4)},
}


def test_nested_and_recursive_aggregates_under_every_plan(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, NESTED, NESTED_FACTS)
    # the inner sums per n: 3.0, 4.0 and 0.0 (n = 4 has no w: a sum of nothing), one group
    assert ref["nsum"] == {(7.0,)}
    assert ref["ncount"] == {(3,)}  # counts 2, 1, 0
    assert ref["nmean"] == {(4.0,)}  # means 1.5 and 4.0; n = 4 has no mean
    assert ref["nexpr"] == {(14.0,)}
    assert ref["nmeanc"] == {(1.0,)}  # (2 + 1 + 0) / 3: a float mean of numbers
    # x = 1: max(3.0 + 2.5, 3.0 + 0.5); x = 2: 7.0 + 4.0; x = 4: no w, no max
    assert ref["deep"] == {(16.5,)}
    # y from e, below r's cycle: the sums of c below 1, 2, 3 and 4
    assert ref["r"] == {(1, 1, 0), (1, 2, 1), (1, 3, 3), (1, 4, 3)}


@pytest.mark.parametrize("rule,message", [
    ("r(y) :- n(x), c = count : { e(x, y) }, c > 0.",
     r"f\.dl:4:3: error: variable 'y' is bound only inside the count aggregate at 4:19 but "
     r"used outside it: only a min or max aggregate gives its witnesses"),
    ("r(z) :- n(x), s = sum y : { e(x, y), e(y, z) }, s > 0.",
     r"f\.dl:4:3: .*'z' is bound only inside the sum aggregate"),
    ("r(z) :- n(x), s = mean y : { e(x, y), e(y, z) }, s > 0.",
     r"f\.dl:4:3: .*'z' is bound only inside the mean aggregate"),
])
def test_a_witness_of_count_sum_or_mean_is_refused_in_one_line(rule, message):
    text = ".decl n(x:number)\n.decl e(x:number, y:number)\n.decl r(x:number)\n" + rule + "\n"
    with pytest.raises(DatalogError, match=message) as err:
        parse_program(text, "f.dl")
    assert "\n" not in str(err.value)


def test_an_aggregate_whose_keys_only_its_cycle_gives_is_one_line():
    text = (".decl c(y:number)\n.decl r(x:number, s:number)\nr(1, 0).\n"
            "r(y, s) :- r(x, _), y = x + 1, y < 5, s = sum k : { c(k), k < y }.\n")
    with pytest.raises(DatalogError, match=r"^f\.dl:4:\d+: .*aggregate in a recursive rule of "
                                           r"'r' whose injected variables only that cycle binds"):
        parse_program(text, "f.dl")


EPOCHS = [  # (relation, row, +1 insert / -1 remove), one epoch each
    [("Student", ("Max", 185), 1)],  # a new maximum: its witness alone
    [("Student", ("Max", 185), -1)],  # gone: the tie is back
    [("Student", ("Zoe", 180), -1), ("family", ("John", 10), -1)],  # ties broken
    [("family", ("Baby", 1), 1), ("emp", ("law", "fay", 10), 1)],  # a new min; law's max
    [("emp", ("hr", "bob", 70), -1), ("A", (4, -2), 1), ("A", (3, 5), -1)],
    [("w", (4, 1.5), 1), ("n", (2,), -1), ("c", (0,), 1), ("e", (4, 5), 1)],
    [("c", (1,), -1), ("e", (2, 3), -1), ("w", (1, 2.5), -1)],
]


def test_epochs_change_witnesses_ties_and_extremes_as_from_scratch(spark, tmp_path):
    text = WITNESSES + NESTED
    pt = build_tasks(parse_program(text, "w.dl"))
    facts = {name: set(rows) for name, rows in {**FACTS, **NESTED_FACTS}.items()}
    write_facts(tmp_path / "f0", facts)
    # The default (elastic) mode: `r`'s epochs that change `c` (negated in its lowered rules)
    # recompute it in the driver; forced incremental, each ran DRed's rounds as Spark jobs (a
    # minute; tests/test_souffle_cases.py covers that side).
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0")
    seen = []
    for k, ops in enumerate(EPOCHS, 1):
        for name, row, sign in ops:
            (session.insert if sign > 0 else session.remove)(name, row)
            (facts[name].add if sign > 0 else facts[name].discard)(row)
        session.commit()
        write_facts(tmp_path / f"ref{k}", facts)
        ref = naive_evaluate(pt, tmp_path / f"ref{k}")
        # Not session.size: after the last epoch it says 0 where r has 2 tuples. That is
        # DRed's, not the aggregates': r reading a plain relation `a` in one rule and `!a(y, _)`
        # in another (the lowered form here) gives the same without any aggregate.
        for name in pt.program.decls:
            assert rows_of(session.relation(name)) == ref[name], (k, name)
        seen.append({name: rows_of(session.relation(name))
                     for name in ("Tallest", "youngest", "topPaid", "minSum", "nsum", "r")})
    assert seen[0]["Tallest"] == {("Max", 185)}
    assert seen[1]["Tallest"] == {("Quarantina", 180), ("Zoe", 180)}
    assert seen[2]["Tallest"] == {("Quarantina", 180)}
    assert seen[2]["youngest"] == {("Alissa", 10)}
    assert seen[3]["youngest"] == {("Baby", 1)}
    assert seen[3]["topPaid"] == {("hr", "bob", 70), ("hr", "cid", 70), ("it", "dan", 90),
                                  ("law", "fay", 10)}
    assert seen[4]["topPaid"] == {("hr", "cid", 70), ("it", "dan", 90), ("law", "fay", 10)}
    assert seen[4]["minSum"] == {(4, -2, 2)}
    # n = {1, 4}: 3.0 + 1.5; r gains 5 (sum of c below 5: 0 + 1 + 2)
    assert seen[5]["nsum"] == {(4.5,)}
    assert seen[5]["r"] == {(1, 1, 0), (1, 2, 1), (1, 3, 3), (1, 4, 3), (1, 5, 3)}
    assert seen[6]["nsum"] == {(2.0,)}  # 0.5 + 1.5
    assert seen[6]["r"] == {(1, 1, 0), (1, 2, 0)}  # 3 unreachable; c below 2: 0
    session.close()
