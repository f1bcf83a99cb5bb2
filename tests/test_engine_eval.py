"""Evaluating tasks on Spark: schemas, plans, semi-naive rounds, arithmetic edge cases, cancel,
checkpoint modes, and a randomized cross-check against the naive Python reference."""

from __future__ import annotations

import random
import sys
import threading
from pathlib import Path

import pytest
from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType

from levelflow.engine.compile import body_frame
from levelflow.engine.evaluate import Cancelled, evaluate_program, evaluate_task
from levelflow.engine.types import empty_relation, relation_schema, rows_frame
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.ast import Decl

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402


def rows(df):
    return sorted(tuple(r) for r in df.collect())


def program(text):
    return build_tasks(parse_program(text, "test.dl"))


def write_facts(dirpath: Path, name: str, tuples) -> None:
    dirpath.mkdir(parents=True, exist_ok=True)
    (dirpath / f"{name}.facts").write_text("".join("\t".join(map(str, t)) + "\n"
                                                   for t in tuples))


def plan_text(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_schema_types_and_nullary_representation(spark):
    d = Decl("r", ("a", "b", "c", "d"), ("number", "unsigned", "float", "symbol"))
    schema = relation_schema(d)
    assert schema.names == ["c0", "c1", "c2", "c3"]
    assert [f.dataType for f in schema] == [LongType(), LongType(), DoubleType(), StringType()]
    nullary = relation_schema(Decl("n", (), ()))
    assert nullary.names == ["c0"] and nullary[0].dataType == BooleanType()
    assert empty_relation(spark, d).schema == schema
    assert rows(empty_relation(spark, d)) == []


def test_nonrecursive_task_unions_facts_file_and_rules(spark, tmp_path):
    pt = program("""
        .decl e(x:number, y:number)
        .input e
        e(9, 9).
        e(x, x) :- e(x, _), x < 2.
        .decl two(x:number, z:number)
        two(x, z) :- e(x, y), e(y, z).
    """)
    write_facts(tmp_path, "e", [(1, 2), (2, 3), (1, 2)])
    rels = evaluate_program(spark, pt, tmp_path)
    assert rows(rels["e"]) == [(1, 1), (1, 2), (2, 3), (9, 9)]
    # A self-join: both atoms read `e`, renamed per atom, so nothing is ambiguous.
    assert rows(rels["two"]) == [(1, 1), (1, 2), (1, 3), (9, 9)]


def test_semi_naive_rounds_find_each_tuple_once(spark):
    pt = program("""
        .decl e(x:number, y:number)
        e(1, 2). e(2, 3). e(3, 4). e(4, 5).
        .decl p(x:number, y:number)
        p(x, y) :- e(x, y).
        p(x, z) :- p(x, y), p(y, z).
    """)
    e = evaluate_task(spark, pt.program, pt.tasks[0], {})
    result = evaluate_task(spark, pt.program, pt.task_of("p"), dict(e))
    assert result.stats.rows == {"p": 10}
    # Doubling path lengths on a 5-chain: 4 edges, then paths of length 2, 3..4, then nothing.
    assert result.stats.per_iteration == [{"p": 4}, {"p": 3}, {"p": 3}, {"p": 0}]
    assert result.stats.iterations == 3
    assert rows(result["p"]) == sorted((a, b) for a in range(1, 6) for b in range(a + 1, 6))


@pytest.mark.parametrize("small, big", [(0, 1 << 62), (0, 0)])
def test_anti_join_paths_give_the_same_rounds(spark, monkeypatch, small, big):
    import levelflow.engine.fixpoint_relations as fr

    # The plain anti join, then the "few candidates against a big relation" one (semi join +
    # broadcast), instead of the group-by that tiny relations take.
    monkeypatch.setattr(fr, "SMALL_FULL_ROWS", small)
    monkeypatch.setattr(fr, "BIG_STABLE_ROWS", big)
    pt = program("""
        .decl e(x:number, y:number)
        e(1, 2). e(2, 3). e(3, 1). e(3, 4).
        .decl p(x:number, y:number)
        p(x, y) :- e(x, y).
        p(x, z) :- p(x, y), e(y, z).
    """)
    e = evaluate_task(spark, pt.program, pt.tasks[0], {})
    assert e.stats.rows == {"e": 4} and e.stats.iterations == 0
    result = evaluate_task(spark, pt.program, pt.task_of("p"), dict(e), counts=e.stats.rows)
    assert rows(result["p"]) == sorted([(a, b) for a in (1, 2, 3) for b in (1, 2, 3, 4)])
    # Paths of length 1, 2, 3 (4 each on this graph), then nothing new.
    assert [it["p"] for it in result.stats.per_iteration] == [4, 4, 4, 0]


def test_mutual_recursion_in_one_task(spark):
    pt = program("""
        .decl s(x:number, y:number)
        s(0, 1). s(1, 2). s(2, 3). s(3, 4).
        .decl even(x:number)
        .decl odd(x:number)
        even(0).
        odd(y) :- even(x), s(x, y).
        even(y) :- odd(x), s(x, y).
    """)
    task = pt.task_of("even")
    assert set(task.relations) == {"even", "odd"} and task.recursive
    rels = evaluate_program(spark, pt, None)
    assert rows(rels["even"]) == [(0,), (2,), (4,)]
    assert rows(rels["odd"]) == [(1,), (3,)]


def test_division_by_zero_and_overflow_drop_the_row(spark):
    pt = program("""
        .decl n(a:number, b:number)
        n(7, 0). n(-7, 2). n(9223372036854775807, 1).
        .decl q(a:number, v:number)
        q(a, a / b) :- n(a, b).
        .decl m(a:number, v:number)
        m(a, a % b) :- n(a, b).
        .decl s(a:number, v:number)
        s(a, a + b) :- n(a, b).
    """)
    rels = evaluate_program(spark, pt, None)
    assert rows(rels["q"]) == [(-7, -3), (9223372036854775807, 9223372036854775807)]
    assert rows(rels["m"]) == [(-7, -1), (9223372036854775807, 0)]
    assert rows(rels["s"]) == [(-7, -5), (7, 7)]  # the overflowing sum is dropped


def test_unsigned_arithmetic_wraps_and_compares_unsigned(spark):
    """Soufflé's unsigned is C's 64-bit unsigned: `x - y` below zero wraps to 2^64 - ...,
    `x - 10 > 0` compares the wrapped value, `top + 1` is 2^63 (held as the int64 -2^63)."""
    pt = program("""
        .decl u(x:unsigned)
        u(0). u(5). u(20). u(9223372036854775807).
        .decl d(x:unsigned, y:unsigned, z:unsigned)
        d(x, y, z) :- u(x), u(y), x != y, z = x - y.
        .decl big(x:unsigned)
        big(x) :- u(x), x - 10 > 0.
        .decl inc(x:unsigned)
        inc(x + 1) :- u(x).
    """)
    rels = evaluate_program(spark, pt, None)
    top = 2**63 - 1

    def held(v):  # the int64 of an unsigned's 64 bits
        v %= 2**64
        return v - 2**64 if v >= 2**63 else v
    values = (0, 5, 20, top)
    assert rows(rels["d"]) == sorted((x, y, held(x - y)) for x in values for y in values
                                     if x != y)
    assert held(0 - 5) == -5 and held(5 - top) == -(2**63) + 6  # 2^64 - 5, 2^63 + 6
    # 0 - 10 and 5 - 10 wrap to 2^64 - 10 and 2^64 - 5: above 0 too
    assert rows(rels["big"]) == [(0,), (5,), (20,), (top,)]
    assert rows(rels["inc"]) == [(-(2**63),), (1,), (6,), (21,)]  # top + 1 is 2^63


def test_negation_with_expression_and_constant_arguments(spark):
    pt = program("""
        .decl n(x:number)
        n(1). n(2). n(4). n(5). n(9).
        .decl run_end(x:number)
        run_end(x) :- n(x), !n(x + 1).
        .decl tag(x:number, t:symbol)
        tag(1, "a"). tag(4, "b").
        .decl no_a(x:number)
        no_a(x) :- n(x), !tag(x, "a").
    """)
    rels = evaluate_program(spark, pt, None)
    assert rows(rels["run_end"]) == [(2,), (5,), (9,)]
    assert rows(rels["no_a"]) == [(2,), (4,), (5,), (9,)]


def test_join_order_follows_shared_variables_not_text_order(spark):
    pt = program("""
        .decl a(x:number)
        .decl b(y:number)
        .decl c(x:number, y:number)
        .decl r(x:number, y:number)
        r(x, y) :- a(x), b(y), c(x, y).
    """)
    rule = pt.task_of("r").rules[0]
    decls = pt.program.decls
    frames = {0: rows_frame(spark, decls["a"], [(1,), (2,)]),
              1: rows_frame(spark, decls["b"], [(3,)]),
              2: rows_frame(spark, decls["c"], [(1, 3), (2, 4)])}
    df, types = body_frame(spark, rule, decls, frames)
    plan = plan_text(df)
    assert "CartesianProduct" not in plan and "NestedLoopJoin" not in plan
    assert types == {"x": "number", "y": "number"}
    assert sorted(tuple(r) for r in df.select("v_x", "v_y").collect()) == [(1, 3)]
    # With row counts known, the small sides are broadcast into the join.
    df, _ = body_frame(spark, rule, decls, frames, counts={0: 2, 1: 1, 2: 2})
    assert "BroadcastHashJoin" in plan_text(df)


def test_cancel_stops_a_recursive_task(spark):
    pt = program("""
        .decl p(x:number)
        p(0).
        p(x + 1) :- p(x), x < 100.
    """)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled, match="before it started"):
        evaluate_task(spark, pt.program, pt.tasks[0], {}, cancel=cancel)

    class SetAfterFirstCheck:
        """An event that reads clear once (the start check), then set (the first round)."""

        def __init__(self):
            self.calls = 0

        def is_set(self):
            self.calls += 1
            return self.calls > 1

    with pytest.raises(Cancelled, match="after 0 rounds"):
        evaluate_task(spark, pt.program, pt.tasks[0], {}, cancel=SetAfterFirstCheck())


def test_missing_lower_relation_is_reported(spark):
    pt = program("""
        .decl a(x:number)
        a(1).
        .decl b(x:number)
        b(x) :- a(x).
    """)
    with pytest.raises(KeyError, match="relation a"):
        evaluate_task(spark, pt.program, pt.task_of("b"), {})


def test_bad_checkpoint_mode_is_rejected(spark):
    pt = program(".decl a(x:number)\na(1).")
    with pytest.raises(ValueError, match="checkpoint"):
        evaluate_task(spark, pt.program, pt.tasks[0], {}, checkpoint="sometimes")


def test_reliable_checkpoints_give_the_same_relations(spark, tmp_path):
    pt = program("""
        .decl e(x:number, y:number)
        e(1, 2). e(2, 3). e(3, 1).
        .decl p(x:number, y:number)
        p(x, y) :- e(x, y).
        p(x, z) :- p(x, y), e(y, z).
    """)
    sc = spark.sparkContext
    sc.setCheckpointDir(str(tmp_path / "ck"))
    try:
        e = evaluate_task(spark, pt.program, pt.tasks[0], {}, checkpoint="reliable")
        p = evaluate_task(spark, pt.program, pt.task_of("p"), dict(e), checkpoint="reliable")
        assert rows(p["p"]) == [(a, b) for a in (1, 2, 3) for b in (1, 2, 3)]
        assert any((tmp_path / "ck").rglob("part-*"))  # really written to the checkpoint dir
    finally:
        # Other tests expect a session without a checkpoint directory.
        getattr(sc._jsc.sc(), "checkpointDir_$eq")(sc._jvm.scala.Option.apply(None))
    assert not sc.getCheckpointDir()


RANDOM_PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl sg(x:number, y:number)
sg(x, y) :- edge(p, x), edge(p, y), x != y.
sg(x, y) :- edge(a, x), sg(a, b), edge(b, y).
.decl lonely(x:number)
lonely(x) :- edge(x, _), !path(_, x).
"""


def test_random_graphs_match_the_naive_reference(spark, tmp_path):
    # Three random graphs evaluated as one: on nodes apart (seed * 100 + i) no rule joins two
    # of them, so each relation is the union of the three graphs' own (one Spark run, not three).
    edges = set()
    for seed in (1, 2, 3):
        rng = random.Random(seed)
        n = rng.randint(4, 8)
        edges |= {(seed * 100 + rng.randrange(n), seed * 100 + rng.randrange(n))
                  for _ in range(rng.randint(n, 2 * n))}
    write_facts(tmp_path, "edge", sorted(edges))
    pt = program(RANDOM_PROGRAM)
    expected = naive_datalog.evaluate(pt, tmp_path)
    rels = evaluate_program(spark, pt, tmp_path)
    for name in ("path", "sg", "lonely"):
        assert rows(rels[name]) == sorted(expected[name]), name
