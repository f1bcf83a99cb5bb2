"""Subsumptive rules (`r(x, d1) <= r(x, d2) :- d2 <= d1.`): a tuple of r that another tuple of r
dominates is removed, pruned in every round of r's recursion. Hand-derived answers for the
documented examples, the naive reference (tests/naive_datalog.py), every plan, random epochs
equal to from scratch, a dominating tuple deleted (what it dominated comes back) and a durable
restart."""

from __future__ import annotations

import random

import naive_datalog
import pytest
from lowered import check_lowered, rows_of, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.plans import evaluate_planned
from levelflow.engine.plans.planner import Plan
from levelflow.tasks import DatalogError, build_tasks, parse_program

# Shortest distances from node 1 (Soufflé's subsumption page): ends on a graph with cycles.
DIST = """.decl edge(x:number, y:number, w:number)
.input edge
.decl dist(x:number, d:number)
dist(1, 0).
dist(y, d + w) :- dist(x, d), edge(x, y, w).
dist(x, d1) <= dist(x, d2) :- d2 <= d1.
.output dist
.decl far(x:number)
far(x) :- dist(x, d), d > 5.
.output far
"""
# 1->2 (1), 2->3 (1), 3->1 (1): a cycle; 1->3 (5) longer than 1->2->3; 3->4 (7), 4->5 (2).
EDGES = {(1, 2, 1), (2, 3, 1), (3, 1, 1), (1, 3, 5), (3, 4, 7), (4, 5, 2)}
DISTANCES = {(1, 0), (2, 1), (3, 2), (4, 9), (5, 11)}

# Intervals contained in another are removed (non-recursive; several tuples per key survive).
INTERVALS = """.decl span(lo:number, hi:number)
.input span
.decl I(lo:number, hi:number)
I(l, h) :- span(l, h).
I(l1, h1) <= I(l2, h2) :- l2 <= l1, h1 <= h2.
.output I
"""

# Several subsumptive rules for one relation, one reading another relation (a given order of
# grades): the Pareto-best (grade, cost) offers per item.
OFFERS = """.decl offer(item:symbol, grade:symbol, cost:number)
.input offer
.decl better(a:symbol, b:symbol)
.input better
.decl best(item:symbol, grade:symbol, cost:number)
best(i, g, c) :- offer(i, g, c).
best(i, g1, c1) <= best(i, g2, c2) :- better(g2, g1), c2 <= c1.
best(i, g, c1) <= best(i, g, c2) :- c2 < c1.
.output best
"""


def test_shortest_distances_on_a_cycle(spark, tmp_path):
    check_lowered(spark, tmp_path, DIST, {"edge": EDGES},
                  {"dist": DISTANCES, "far": {(4,), (5,)}})


def test_contained_intervals_are_removed(spark, tmp_path):
    spans = {(0, 10), (2, 5), (3, 12), (11, 12), (20, 21)}
    check_lowered(spark, tmp_path, INTERVALS, {"span": spans},
                  {"I": {(0, 10), (3, 12), (20, 21)}})


def test_several_rules_and_another_relation(spark, tmp_path):
    offers = {("pen", "gold", 5), ("pen", "gold", 7), ("pen", "silver", 5),
              ("pen", "silver", 3), ("ink", "silver", 2), ("ink", "bronze", 2)}
    better = {("gold", "silver"), ("gold", "bronze"), ("silver", "bronze")}
    # pen: gold 7 > gold 5; silver 5 dominated by gold 5; silver 3 cheaper than gold: stays.
    check_lowered(spark, tmp_path, OFFERS, {"offer": offers, "better": better},
                  {"best": {("pen", "gold", 5), ("pen", "silver", 3), ("ink", "silver", 2)}},
                  sample=1)


def test_tuples_that_dominate_each_other_keep_the_smallest(spark, tmp_path):
    text = """.decl p(x:number, y:number)
.input p
.decl one(x:number, y:number)
one(x, y) :- p(x, y).
one(x, y) <= one(x, z) :- y != z.
.output one
"""
    check_lowered(spark, tmp_path, text, {"p": {(1, 5), (1, 3), (2, 7)}},
                  {"one": {(1, 3), (2, 7)}}, sample=1)


def test_an_aggregate_in_the_body(spark, tmp_path):
    """Soufflé allows an aggregate in a subsumptive body: here a node with more than two
    out-edges keeps only its smallest target, the others keep all of theirs."""
    text = """.decl e(x:number, y:number)
.input e
.decl r(x:number, y:number)
r(x, y) :- e(x, y).
r(x, y1) <= r(x, y2) :- y2 < y1, n = count : { e(x, _) }, n > 2.
.output r
"""
    edges = {(1, 2), (1, 3), (1, 4), (2, 5), (2, 6)}
    # The epoch removes (1, 2) and (1, 3): node 1 has one edge left, (1, 4), which stays.
    check_lowered(spark, tmp_path, text, {"e": edges}, {"r": {(1, 2), (2, 5), (2, 6)}})


def test_records_in_the_rule(spark, tmp_path):
    """Record patterns in both atoms of a subsumptive rule: intervals held as records."""
    text = """.type Iv = [lo:number, hi:number]
.decl span(i:Iv)
.input span
.decl I(i:Iv)
I(i) :- span(i).
I([l1, h1]) <= I([l2, h2]) :- l2 <= l1, h1 <= h2.
.output I
"""
    spans = {("[0, 10]",), ("[2, 5]",), ("[3, 4]",), ("[11, 12]",)}
    # The epoch removes the first two in text order, [0, 10] and [11, 12]: [2, 5] is left.
    check_lowered(spark, tmp_path, text, {"span": spans}, {"I": {("[0,10]",), ("[11,12]",)}})


# A subsumptive task runs locally under any plan (plans/run.py): a forced partitioned plan
# takes the path of a forced global one, and the local plan is what test_shortest_distances_on_a_
# cycle runs from scratch.
@pytest.mark.parametrize("plan", ["global"])
def test_every_plan_prunes_each_round(spark, tmp_path, plan):
    pt = build_tasks(parse_program(DIST, "d.dl"))
    write_facts(tmp_path, {"edge": EDGES})
    edge = evaluate_planned(spark, pt.program, pt.tasks[0], {}, tmp_path,
                            plan=Plan("global", "input"))
    task = pt.task_of("dist")
    out = evaluate_planned(spark, pt.program, task, {"edge": edge["edge"]}, tmp_path,
                           plan=Plan(plan, "forced", {"dist": 0, "edge": 0}))
    assert rows_of(out["dist"]) == DISTANCES


def test_a_deleted_dominating_tuple_brings_back_what_it_dominated(spark, tmp_path):
    write_facts(tmp_path / "f", {"span": {(0, 10), (2, 5), (3, 4)}})
    pt = build_tasks(parse_program(INTERVALS, "i.dl"))
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f", mode="incremental")
    try:
        assert rows_of(session.relation("I")) == {(0, 10)}
        session.remove("span", (0, 10))
        session.commit()
        assert rows_of(session.relation("I")) == {(2, 5)}  # (3, 4) is still inside (2, 5)
        session.remove("span", (2, 5))
        session.insert("span", (4, 9))
        session.commit()
        assert rows_of(session.relation("I")) == {(3, 4), (4, 9)}  # neither holds the other
        session.insert("span", (3, 9))
        session.commit()
        assert rows_of(session.relation("I")) == {(3, 9)}
        session.remove("span", (3, 9))
        session.commit()
        assert rows_of(session.relation("I")) == {(3, 4), (4, 9)}
    finally:
        session.close()


def _reference(pt, edges, factdir):
    write_facts(factdir, {"edge": edges})
    return naive_datalog.evaluate(pt, factdir)


@pytest.mark.parametrize(("text", "fragment"), [
    ("a(x) <= b(x) :- x < 1.", "a subsumptive rule relates tuples of one relation: 'a' <= 'b'"),
    ("a(x) <= a(y) :- b(x), x < y.\nb(x) :- a(x).",
     "the subsumptive rule of 'a' reads 'b', which is in a recursive cycle with 'a'"),
    ("a(x) <= a(y) :- y < \"s\".", "error"),
])
def test_bad_subsumptive_rules_are_one_line(text, fragment):
    head = ".decl a(x:number)\n.decl b(x:number)\na(1).\n"
    with pytest.raises(DatalogError) as e:
        parse_program(head + text, "bad.dl")
    message = str(e.value)
    assert message.startswith("bad.dl:4:") and "\n" not in message and fragment in message, \
        message


def test_run_state_and_update_cli(cli_spark, tmp_path, capsys):
    from levelflow.cli import main as cli_main

    program = tmp_path / "d.dl"
    program.write_text(DIST)
    write_facts(tmp_path / "f", {"edge": EDGES})
    with pytest.raises(SystemExit) as e:
        cli_main(["run", str(program), "-F", str(tmp_path / "f"), "-D", str(tmp_path / "o0"),
                  "--state", str(tmp_path / "state"), "-q"])
    assert e.value.code == 0, capsys.readouterr()
    assert (tmp_path / "o0" / "dist.csv").read_text().split("\n") == [
        "1\t0", "2\t1", "3\t2", "4\t9", "5\t11", ""]
    # 2->3 gone: 3 is reached by 1->3 (5) again, its old distance 2 no longer dominates it.
    (tmp_path / "e.diff").write_text("-edge(2, 3, 1)\n")
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(tmp_path / "state"), "--insert", str(tmp_path / "e.diff"),
                  "-D", str(tmp_path / "o1")])
    assert e.value.code == 0, capsys.readouterr()
    assert (tmp_path / "o1" / "dist.csv").read_text().split("\n") == [
        "1\t0", "2\t1", "3\t5", "4\t12", "5\t14", ""]


def test_a_program_change_to_the_subsumptive_rule_recomputes(spark, tmp_path):
    write_facts(tmp_path / "f", {"edge": EDGES})
    pt = build_tasks(parse_program(DIST, "d.dl"))
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f", mode="incremental")
    try:
        # Keep the longest distances below 12 instead of the shortest.
        longest = DIST.replace("dist(x, d1) <= dist(x, d2) :- d2 <= d1.",
                               "dist(x, d1) <= dist(x, d2) :- d1 <= d2.").replace(
            "dist(y, d + w) :- dist(x, d), edge(x, y, w).",
            "dist(y, d + w) :- dist(x, d), edge(x, y, w), d + w < 12.")
        (tmp_path / "m.dl").write_text(longest)
        result = session.replace_program(tmp_path / "m.dl")
        assert result.status["dist"] == "recomputed"
        ref = _reference(build_tasks(parse_program(longest, "m.dl")), EDGES, tmp_path / "r")
        assert rows_of(session.relation("dist")) == ref["dist"]
    finally:
        session.close()


def test_random_epochs_run_as_warm_ones_and_survive_a_restart(spark, tmp_path):
    """Random epochs equal the naive reference, before and after a durable restart. The
    bootstrap and the open keep the subsumptive task's frames in the driver and count `far` in
    its worker: the first epoch after either runs the jobs a warm epoch runs."""
    rng = random.Random(29)
    nodes = range(1, 16)
    pt = build_tasks(parse_program(DIST, "d.dl"))
    edges = {(rng.choice(nodes), rng.choice(nodes), rng.randint(1, 6)) for _ in range(40)}
    write_facts(tmp_path / "f0", {"edge": edges})
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", tmp_path / "state",
                                           mode="incremental")
    jobs = []
    try:
        for k in range(1, 4):
            if k == 2:  # a durable restart: the next epochs start from the stored state
                session.close()
                session = IncrementalSession.open(spark, tmp_path / "state", mode="incremental")
            gone = set(rng.sample(sorted(edges), 4))
            new = {(rng.choice(nodes), rng.choice(nodes), rng.randint(1, 6)) for _ in range(4)}
            new -= edges | gone
            for row in gone:
                session.remove("edge", row)
            for row in new:
                session.insert("edge", row)
            result = session.commit()
            assert result.strategies["dist"] == "subsume"  # repaired, not recomputed
            jobs.append((result.spark_jobs.get("dist", 0), result.spark_jobs.get("far", 0)))
            edges = (edges - gone) | new
            ref = _reference(pt, edges, tmp_path / f"f{k}")
            for name in ("dist", "far"):
                got = rows_of(session.relation(name))
                assert got == ref[name], f"epoch {k}: {name}: extra {got - ref[name]}, " \
                                         f"missing {ref[name] - got}"
            assert len({x for x, _ in ref["dist"]}) == len(ref["dist"])  # one per node
    finally:
        session.close()
    # Every epoch - 1 after the bootstrap, 2 after the open, and 3 after a durable commit -
    # repairs dist over frames the driver holds: no job. After the bootstrap and the open
    # `far` finds its counts in a worker: at most one job (none when its terms sum to
    # nothing), not a miss and then a job shipping the old versions.
    assert [d for d, _ in jobs] == [0] * 3, jobs
    assert jobs[0][1] <= 1 and jobs[1][1] <= 1, jobs
