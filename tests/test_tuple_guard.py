"""The tuple guard (engine/guard.py): a task past --max-tuples stops with one line, nothing
written; under the limit a program runs unchanged (checked against the naive evaluator).

A cross product is refused from its input counts before its job starts; a recursive task is
stopped after the round that passes the limit, under each plan (global rounds in Spark, the
Python worker's rounds, the native closure); a one-pass join is stopped after its job.
"""

from __future__ import annotations

import naive_datalog
import pytest

from levelflow.engine.guard import TupleLimit, check_limit, product_size
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, load_program, parse_program

CROSS = """.decl a(x:number)
.input a
.decl b(x:number)
.input b
.decl p(x:number, y:number)
p(x, y) :- a(x), b(y).
.output p
"""

TC = """.decl e(x:number, y:number)
.input e
.decl tc(x:number, y:number)
tc(x, y) :- e(x, y).
tc(x, z) :- tc(x, y), e(y, z).
.output tc
.decl reach(x:number, y:number)
reach(x, y) :- [e+](x, y).
.output reach
.decl two(x:number, z:number)
two(x, z) :- e(x, y), e(y, z).
.output two
"""


def _write(tmp_path, text: str, facts: dict[str, list[tuple]]):
    """Return the ProgramTasks of `text` with its fact files written under tmp_path/facts."""
    prog = tmp_path / "p.dl"
    prog.write_text(text)
    fdir = tmp_path / "facts"
    fdir.mkdir(exist_ok=True)
    for name, rows in facts.items():
        (fdir / f"{name}.facts").write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    return build_tasks(load_program(prog)), fdir


def _chain(n: int) -> list[tuple]:
    """Return the edges of a path 0 -> 1 -> ... -> n: its closure has n(n+1)/2 pairs."""
    return [(i, i + 1) for i in range(n)]


@pytest.mark.parametrize("head,body,size", [
    ("h2(x, y)", "a(x), b(y)", 20 * 30),
    ("h3(x, y, z)", "a(x), b(_), c(y, z)", 20 * 30 * 40),
    ("h2(x, y)", "a(x), b(y), !c(x, y), x < y", 20 * 30),  # filters: Spark makes the product
    ("h2(x, y)", "a(x), b(y), x != y", 20 * 30),
    ("h1(x)", "a(x), b(x)", None),  # a join on x
    ("h2(x, y)", "a(x), b(y), x = y", None),  # an equality joins too
    ("h2(x, z)", "a(x), b(y), z = y + 1, x = z", None),  # through a chain of them
    ("h1(x)", "a(x), b(y)", None),  # b(y) is an existence test (tasks/exists.py): once
    ("h2(x, y)", "a(x), c(y, y)", None),  # a repeated variable filters
    ("h2(x, y)", "a(x), c(y, 1)", None),  # so does a constant
    ("h2(x, y)", "c(x, y)", None),  # one atom: a copy
])
def test_product_size_counts_only_products_of_whole_relations(head, body, size):
    text = (".decl a(x:number)\n.decl b(x:number)\n.decl c(x:number, y:number)\n"
            ".decl h1(x:number)\n.decl h2(x:number, y:number)\n"
            f".decl h3(x:number, y:number, z:number)\n{head} :- {body}.\n")
    rule = parse_program(text, "p.dl").rules[0]
    found = product_size(rule, {"a": 20, "b": 30, "c": 40})
    assert (found[0] if found else None) == size


JOINED = """.decl a(x:number)
.input a
.decl b(x:number)
.input b
.decl p(x:number, y:number)
p(x, y) :- a(x), b(y), y = x + 1.
.output p
.decl q(x:number)
q(x) :- a(x), b(y).
.output q
"""


@pytest.mark.parametrize("plan", ["auto", "local", "global"])
def test_joins_by_an_equality_or_a_test_run_under_the_limit(spark, tmp_path, plan):
    # 2,000 x 2,000 = 4,000,000 as products; p joins on y = x + 1 (x 4..1,999), q reads b
    # once (b is not empty): neither makes more than 2,000 tuples.
    pt, fdir = _write(tmp_path, JOINED, {"a": [(i,) for i in range(2_000)],
                                         "b": [(i,) for i in range(5, 2_005)]})
    result = run_program(spark, pt, fdir, None, plan=plan, max_tuples=10_000)
    assert {tuple(r) for r in result.relation("p").collect()} == \
        {(x, x + 1) for x in range(4, 2_000)}
    assert {tuple(r) for r in result.relation("q").collect()} == {(x,) for x in range(2_000)}


def test_max_tuples_must_be_a_positive_int():
    assert check_limit(None) is None and check_limit(5) == 5
    for bad in (0, -1, 2.5, True, "10"):
        with pytest.raises(TupleLimit, match="must be a positive number"):
            check_limit(bad)


def test_cross_product_past_the_limit_stops_before_its_job(spark, tmp_path):
    pt, fdir = _write(tmp_path, CROSS, {"a": [(i,) for i in range(20_000)],
                                        "b": [(i,) for i in range(5, 20_005)]})
    out = tmp_path / "out"
    with pytest.raises(TupleLimit) as e:
        run_program(spark, pt, fdir, out, max_tuples=1_000_000)
    assert str(e.value) == (f"{pt.program.file}:6: task p: more than 1,000,000 tuples "
                            "(--max-tuples 1000000): its rule joins 20,000 x 20,000 = "
                            "400,000,000; stopped")
    assert not out.exists() or not any(out.iterdir())


def test_cli_run_past_the_limit_is_one_line_and_writes_nothing(tmp_path, cli, cli_spark):
    # Before the guard, this product spilled 3.6 GB for minutes.
    _write(tmp_path, CROSS, {"a": [(i,) for i in range(20_000)],
                             "b": [(i,) for i in range(20_000)]})
    out = tmp_path / "out"
    code, stdout, stderr = cli(["run", tmp_path / "p.dl", "-F", tmp_path / "facts", "-D", out,
                                "-q", "--max-tuples", "1000"])
    assert code == 1 and stdout == "" and stderr.count("\n") == 1
    assert stderr == (f"{tmp_path / 'p.dl'}:6: task p: more than 1,000 tuples "
                      "(--max-tuples 1000): its rule joins 20,000 x 20,000 = "
                      "400,000,000; stopped\n")
    assert not out.exists()  # the folder the failed run made is removed again


@pytest.mark.parametrize("plan", ["global", "local", "partitioned"])
def test_recursion_past_the_limit_stops_after_a_round(spark, tmp_path, plan):
    pt, fdir = _write(tmp_path, TC, {"e": _chain(300)})  # closures of 45,150 pairs
    out = tmp_path / "out"
    with pytest.raises(TupleLimit) as e:
        run_program(spark, pt, fdir, out, plan=plan, max_tuples=5_000, jobs=1)
    message = str(e.value)
    assert message.startswith(f"{pt.program.file}: task ")
    assert "more than 5,000 tuples (--max-tuples 5000)" in message and "\n" not in message
    assert not out.exists() or not any(out.iterdir())


def test_a_join_past_the_limit_stops_after_its_job(spark, tmp_path):
    # every x meets every z through the one hub 0: 200 x 200 pairs from 400 edges
    edges = [(i, 0) for i in range(1, 201)] + [(0, i) for i in range(201, 401)]
    pt, fdir = _write(tmp_path, TC.split(".decl tc")[0] + TC[TC.index(".decl two"):],
                      {"e": edges})
    with pytest.raises(TupleLimit, match=r"task two: more than 10,000 tuples .*40,\d{3} so far"):
        run_program(spark, pt, fdir, None, max_tuples=10_000)


@pytest.mark.parametrize("plan", ["auto", "local"])
def test_under_the_limit_the_run_is_unchanged(spark, tmp_path, plan):
    pt, fdir = _write(tmp_path, TC, {"e": _chain(30) + [(30, 15), (5, 31)]})
    limited = run_program(spark, pt, fdir, None, plan=plan, max_tuples=800)  # 607 pairs
    free = run_program(spark, pt, fdir, None, plan=plan, max_tuples=None)
    expected = naive_datalog.evaluate(pt, fdir)
    for name in ("tc", "reach", "two"):
        got = {tuple(r) for r in limited.relation(name).collect()}
        assert got == {tuple(r) for r in free.relation(name).collect()} == expected[name]
    assert limited.ran == free.ran


# -- epochs: update, serve and shell share IncrementalSession --------------------------------

def test_an_epoch_past_the_limit_fails_whole_and_changes_no_state(spark, tmp_path):
    from levelflow.engine.incremental.session import IncrementalSession
    from levelflow.engine.incremental.state.directory import StateDir

    pt, fdir = _write(tmp_path, CROSS + TC, {"a": [(i,) for i in range(20)],
                                             "b": [(i,) for i in range(20)], "e": _chain(20)})
    state = tmp_path / "state"
    s = IncrementalSession.bootstrap(spark, pt, fdir, state, max_tuples=1_000)
    try:
        assert (s.size("p"), s.size("tc")) == (400, 210)
        for i in range(20, 60):  # a product of 60 x 20 = 1,200 tuples
            s.insert("a", (i,))
        with pytest.raises(TupleLimit, match=r"p\.dl:6: task p: more than 1,000 tuples "
                                             r".*joins 60 x 20 = 1,200; stopped"):
            s.commit()
        s.discard()
        for i in range(20, 45):  # tc on a chain of 45 edges: 1,035 pairs
            s.insert("e", (i, i + 1))
        with pytest.raises(TupleLimit, match=r"task tc: more than 1,000 tuples"):
            s.commit()
        assert s.epoch == 0 and StateDir(state).current() == 0
        assert (s.size("p"), s.size("tc")) == (400, 210)
        assert s.relation("tc").count() == 210
        s.discard()
        s.insert("e", (20, 21))  # within the limit, the next epoch goes through
        assert s.commit().epoch == 1 and s.size("tc") == 231
    finally:
        s.close()


def test_a_bootstrap_past_the_limit_leaves_no_state(spark, tmp_path):
    from levelflow.engine.incremental.session import IncrementalSession
    from levelflow.engine.incremental.state.directory import StateDir

    pt, fdir = _write(tmp_path, CROSS, {"a": [(i,) for i in range(50)],
                                        "b": [(i,) for i in range(50)]})
    with pytest.raises(TupleLimit, match="joins 50 x 50 = 2,500; stopped"):
        IncrementalSession.bootstrap(spark, pt, fdir, tmp_path / "state", max_tuples=2_000)
    assert not StateDir(tmp_path / "state").exists()
