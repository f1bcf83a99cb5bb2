"""The elastic switch: an update over its budget is stopped and the task recomputed from scratch.

A budget of zero switches every task that has a from-scratch time, but a counted task updated
in one job by the worker keeping its counts (it has no budget); a generous one never switches.
A change to a large share of what a DRed task reads recomputes it at once ("bootstrap").
Either way the results equal a from-scratch evaluation, and each task reports its strategy.
"""

from __future__ import annotations

import sys
from pathlib import Path

from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402

PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl far(x:number, y:number)
far(x, y) :- path(x, y), !edge(x, y).
.output far
"""


def check(session, edges, tmp: Path) -> None:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(edges)))
    ref = naive_datalog.evaluate(session.pt, tmp)
    for name in ("path", "far"):
        assert {tuple(r) for r in session.relation(name).collect()} == ref[name], name


def bootstrap(spark, tmp: Path, edges, **options):
    (tmp / "f").mkdir(parents=True)
    (tmp / "f" / "edge.facts").write_text("".join(f"{a}\t{b}\n" for a, b in sorted(edges)))
    pt = build_tasks(parse_program(PROGRAM, "far.dl"))
    return IncrementalSession.bootstrap(spark, pt, tmp / "f", **options)


def test_zero_budget_switches_every_task_and_stays_correct(spark, tmp_path):
    edges = {(1, 2), (2, 3), (3, 4)}
    session = bootstrap(spark, tmp_path, edges, mode="elastic", switch=0.0, switch_floor=0.0,
                        large_change=None)
    assert set(session.last.strategies.values()) == {"scratch"}
    assert {"path", "far"} <= set(session.snap.scratch_seconds)
    session.remove("edge", (2, 3))
    session.insert("edge", (4, 1))
    result = session.commit()
    # edge has no rules (its change is its base facts' change); path was stopped. far, whose
    # counts the driver keeps, is one job at most: stopping it saves nothing, no budget.
    assert result.strategies == {"edge": "counting", "path": "switched", "far": "counting"}
    check(session, edges - {(2, 3)} | {(4, 1)}, tmp_path / "ref")


def test_generous_budget_never_switches(spark, tmp_path):
    edges = {(1, 2), (2, 3), (3, 4)}
    session = bootstrap(spark, tmp_path, edges, mode="elastic", switch=1000.0,
                        large_change=None)
    session.remove("edge", (1, 2))
    result = session.commit()
    assert result.strategies == {"edge": "counting", "path": "dred", "far": "counting"}
    check(session, edges - {(1, 2)}, tmp_path / "ref1")


def test_scratch_mode_recomputes_and_diffs(spark, tmp_path):
    edges = {(1, 2), (2, 3)}
    session = bootstrap(spark, tmp_path, edges, mode="scratch")
    session.insert("edge", (3, 1))
    result = session.commit()
    assert result.strategies == {"edge": "scratch", "path": "scratch", "far": "scratch"}
    assert result.deltas["path"].added_rows == 9 - 3
    assert result.deltas["path"].removed_rows == 0
    check(session, edges | {(3, 1)}, tmp_path / "ref")


def test_large_change_recomputes_at_once_small_one_updates(spark, tmp_path):
    edges = {(i, i + 1) for i in range(40)}
    session = bootstrap(spark, tmp_path, edges, mode="elastic", switch=1000.0,
                        large_change=0.05)
    session.remove("edge", (3, 4))  # 5 of 40 edges: 12.5%, not large for path (25%)
    session.remove("edge", (20, 21))
    session.remove("edge", (30, 31))
    session.remove("edge", (35, 36))
    session.remove("edge", (36, 37))
    result = session.commit()
    assert result.strategies["path"] == "dred"
    edges -= {(3, 4), (20, 21), (30, 31), (35, 36), (36, 37)}
    check(session, edges, tmp_path / "ref1")
    # path runs arranged (backends/worker/dred_job.py), whose threshold is 5x the setting: 25%.
    new = {(40, 0), (7, 3)} | {(i, i + 2) for i in range(10, 19)}  # 11 of 35 edges: 31%
    for e in new:
        session.insert("edge", e)
    result = session.commit()
    assert result.strategies == {"edge": "counting", "path": "bootstrap", "far": "counting"}
    assert result.deltas["path"].removed_rows == 0 and result.deltas["path"].added_rows > 0
    check(session, edges | new, tmp_path / "ref2")
