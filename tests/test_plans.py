"""Plans: each task's fixpoint in the driver, inside Spark tasks (local, partitioned) or round by
round (global).

Every plan must give the naive reference's tuples; the planner must pick by the rules' shape
and refuse a forced plan that does not apply, naming the task.
"""

from __future__ import annotations

import random

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_incremental_properties import FAMILIES, SIZES, rows_of, write_facts

from levelflow.engine.plans import PlanError, carried_key, choose_plan, static_plan
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, parse_program

COUNTER = """
.decl start(x:number, y:number)
start(0, 320).
start(5, 40).
.decl loop(i:number, x:number, y:number, z:number)
loop(0, x, y, x) :- start(x, y).
loop(i + 1, x, y, z + 1) :- loop(i, x, y, z), z < y.
.decl met(x:number, i:number)
met(x, i) :- loop(i, x, y, y).
"""


def _tasks(text: str):
    return build_tasks(parse_program(text, "p.dl"))


def test_a_counter_loop_of_over_300_rounds_runs_in_one_spark_job(spark):
    pt = _tasks(COUNTER)
    result = run_program(spark, pt, None, None, jobs=1, driver_rows=None)  # auto on Spark
    loop = pt.task_of("loop").id
    stats = result.task_stats[loop]
    assert stats.iterations == 321 and stats.plan == "local"
    assert result.trace.extra[loop]["spark_jobs"] == 1
    assert rows_of(result.relation("met")) == {(0, 320), (5, 35)}
    assert result.relation("loop").count() == 321 + 36


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_random_families_agree_across_plans(spark, tmp_path, family):
    # One seed per family: the families are the distinct rule shapes; a second seed ran the
    # same plans over other random facts (test_incremental_properties draws more of those).
    text, gens = FAMILIES[family]
    rng = random.Random(11)
    facts = {name: {gen(rng) for _ in range(SIZES[name] * 3)} for name, gen in gens.items()}
    write_facts(tmp_path, facts)
    pt = _tasks(text)
    expected = naive_evaluate(pt, tmp_path)
    for plan in ("driver", "local", "partitioned", "global"):
        if plan == "partitioned" and any(t.recursive and carried_key(t, pt.program.decls)[0]
                                         is None for t in pt.tasks):
            continue  # refused, as test_programs checks; the other plans still run
        result = run_program(spark, pt, tmp_path, None, jobs=2, plan=plan)
        for name in pt.program.decls:
            assert rows_of(result.relation(name)) == expected[name], (plan, name)


def test_the_planner_reads_the_rules_shape():
    pt = _tasks("""
.decl e(x:number, y:number)
.input e
.decl left(x:number, y:number)
left(x, y) :- e(x, y).
left(x, z) :- left(x, y), e(y, z).
.decl sq(x:number, y:number)
sq(x, y) :- e(x, y).
sq(x, z) :- sq(x, y), sq(y, z).
.decl a(x:number, y:number)
.decl b(x:number, y:number)
a(x, y) :- e(x, y).
a(x, z) :- b(x, y), e(y, z).
b(x, z) :- a(x, y), e(y, z).
""")
    decls = pt.program.decls
    assert carried_key(pt.task_of("left"), decls)[0] == {"left": 0}
    assert carried_key(pt.task_of("sq"), decls)[0] is None
    assert carried_key(pt.task_of("a"), decls)[0] == {"a": 0, "b": 0}
    assert static_plan(pt.task_of("e"), decls).kind == "global"
    assert choose_plan(pt.task_of("left"), decls, 100).kind == "local"
    assert choose_plan(pt.task_of("left"), decls, 50_000).kind == "partitioned"
    assert choose_plan(pt.task_of("left"), decls, 10**9).kind == "global"
    assert choose_plan(pt.task_of("sq"), decls, 50_000).kind == "local"
    # Auto runs small inputs in the driver when the caller allows it, whatever the shape;
    # a forced plan is kept.
    assert choose_plan(pt.task_of("sq"), decls, 100, driver_rows=100).kind == "driver"
    assert choose_plan(pt.task_of("e"), decls, 0, driver_rows=100).kind == "driver"
    assert choose_plan(pt.task_of("left"), decls, 101, driver_rows=100).kind == "local"
    # Up to the threshold whatever the shape, a linear recursion the partitioned plan would
    # split into shares too (its Polars joins use both cores).
    assert choose_plan(pt.task_of("left"), decls, 50_000, driver_rows=50_000).kind == "driver"
    assert choose_plan(pt.task_of("left"), decls, 50_001, driver_rows=50_000).kind == \
        "partitioned"
    assert choose_plan(pt.task_of("sq"), decls, 50_000, driver_rows=50_000).kind == "driver"
    assert choose_plan(pt.task_of("left"), decls, 10**9, "driver").kind == "driver"
    assert choose_plan(pt.task_of("left"), decls, 100, "local", driver_rows=100).kind == "local"
    with pytest.raises(PlanError, match=r"^task sq: the partitioned plan does not apply "
                                        r"\(non-linear rule at line 9"):
        choose_plan(pt.task_of("sq"), decls, 0, "partitioned")
    with pytest.raises(PlanError, match="plan: must be one of"):
        choose_plan(pt.task_of("sq"), decls, 0, "fast")


def test_the_partitioned_plan_is_one_spark_job_over_several_shares(spark):
    pt = _tasks("""
.decl edge(x:number, y:number)
edge(1, 2). edge(2, 3). edge(3, 1). edge(3, 4). edge(5, 6). edge(6, 7). edge(8, 8).
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
""")
    result = run_program(spark, pt, None, None, jobs=1, plan="partitioned")
    path = pt.task_of("path").id
    assert result.task_stats[path].plan == "partitioned"
    assert result.trace.extra[path]["spark_jobs"] == 1
    cycle = {(a, b) for a in (1, 2, 3) for b in (1, 2, 3, 4)}
    assert rows_of(result.relation("path")) == cycle | {(5, 6), (6, 7), (5, 7), (8, 8)}


def test_shares_of_a_partitioned_fixpoint_split_the_whole_fixpoint():
    import polars as pl

    from levelflow.engine.plans.fixpoint import run_task

    pt = _tasks("""
.decl e(x:number, y:number)
.decl p(x:number, y:number)
p(x, y) :- e(x, y).
p(x, z) :- p(x, y), e(y, z).
""")
    task = pt.task_of("p")
    rng = random.Random(5)
    edges = pl.DataFrame([(rng.randrange(30), rng.randrange(30)) for _ in range(60)],
                         schema={"c0": pl.Int64, "c1": pl.Int64}, orient="row").unique()
    rules, decls = tuple(r for r in task.rules if r.body), pt.program.decls
    whole = run_task(rules, task.relations, decls, {"e": edges}, {}).relation("p")
    parts = []
    for index in range(3):
        def share(name, df, index=index):
            return df.filter(pl.col("c0").hash(seed=7) % 3 == index)
        parts.append(run_task(rules, task.relations, decls, {"e": edges}, {}, share)
                     .relation("p"))
    assert all(p.height for p in parts)
    assert sum(p.height for p in parts) == whole.height
    assert set(pl.concat(parts).rows()) == set(whole.rows())
