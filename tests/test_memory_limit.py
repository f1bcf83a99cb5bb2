"""Issue 45, "Bad input and limits": a task whose inputs need more memory than its plan has is
refused in one line naming the task and the estimate, before its job; nothing stored changes.

The estimate is a lower bound, 150 B an input row (engine/memory.LEAST_BYTES_PER_ROW, measured
on the driver plan over tasks that derive nothing): the expected figures below are the rows
counted by hand times that. Memory is made small by patching what the driver plan and a local
master's Python workers have (plans/room.available_memory), or by a cluster's Spark conf.
Auto takes the global plan, which spills, where the plan it would pick cannot fit; a task just
within the limit runs. Answers are checked against a breadth-first search written here.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest
from test_driver_memory import _reached

from levelflow.engine.incremental.state.directory import StateDir
from levelflow.engine.plans import room
from levelflow.engine.plans.planner import worker_rows
from levelflow.engine.plans.room import MemoryLimit, fitting_plan
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, load_program, parse_program

REACH = """.decl edge(x:number, y:number)
.input edge
.decl src(x:number)
src(0).
.decl reach(y:number)
.output reach
reach(y) :- src(x), edge(x, y).
reach(y) :- reach(x), edge(x, y).
"""
EDGES = 100_000
ROWS = EDGES + 1  # what task reach reads: edge's rows and src's one tuple
NEED = ROWS * 150  # 15,000,150 B = 14.3 MiB

# Shortest distances from node 1 (Soufflé's subsumption page), pruned in one process.
DIST = """.decl edge(x:number, y:number, w:number)
.input edge
.decl dist(x:number, d:number)
.output dist
dist(1, 0).
dist(y, d + w) :- dist(x, d), edge(x, y, w).
dist(x, d1) <= dist(x, d2) :- d2 <= d1.
"""
DIST_EDGES = "1\t2\t1\n2\t3\t1\n3\t1\t1\n1\t3\t5\n3\t4\t7\n4\t5\t2\n"


@pytest.fixture(scope="module")
def graph(tmp_path_factory) -> tuple[Path, set[int]]:
    """Return (a fact folder of EDGES distinct random edges over 2,000 nodes, the nodes reached
    from 0)."""
    rng = random.Random(45)
    edges: set[tuple[int, int]] = set()
    while len(edges) < EDGES:  # distinct: a task reads a relation's tuples, not its lines
        edges.add((rng.randrange(2000), rng.randrange(2000)))
    facts = tmp_path_factory.mktemp("graph")
    (facts / "edge.facts").write_text("".join(f"{x}\t{y}\n" for x, y in edges))
    return facts, {y for (y,) in _reached(edges)}


def memory(monkeypatch, available: int) -> None:
    """Give the driver (and a local master's Python workers) `available` bytes."""
    monkeypatch.setattr(room, "available_memory", lambda: available)


def run(cli, tmp_path: Path, facts: Path, *flags) -> tuple[int, str, str]:
    prog = tmp_path / "reach.dl"
    prog.write_text(REACH)
    return cli(["run", prog, "-F", facts, "-D", tmp_path / "out", "-q", *flags])


def tree(path: Path) -> dict[str, str]:
    """Return each file under `path` by its relative name, with its contents' digest."""
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file()}


@pytest.mark.parametrize("plan,has", [
    ("driver", "the driver has 14.3 MiB available"),
    ("local", "the Python worker has 14.3 MiB available"),  # a local master's: its machine's
])
def test_a_forced_plan_one_byte_short_is_one_line_and_writes_nothing(
        tmp_path, cli, cli_spark, graph, monkeypatch, plan, has):
    memory(monkeypatch, NEED - 1)
    code, out, err = run(cli, tmp_path, graph[0], "--plan", plan)
    assert (code, out) == (1, "")
    assert err == (f"{tmp_path}/reach.dl: task reach: needs about 14.3 MiB for 100,001 input "
                   f"rows under the {plan} plan; {has} (--plan global spills to disk)\n")
    assert not (tmp_path / "out" / "reach.csv").exists()


def test_a_task_just_within_the_memory_runs(tmp_path, cli, cli_spark, graph, monkeypatch):
    memory(monkeypatch, NEED)
    code, _, err = run(cli, tmp_path, graph[0], "--plan", "driver")
    assert code == 0, err
    got = {int(line) for line in (tmp_path / "out" / "reach.csv").read_text().split()}
    assert got == graph[1]


def test_auto_takes_the_global_plan_where_the_driver_and_a_worker_are_too_small(
        spark, tmp_path, graph, monkeypatch):
    memory(monkeypatch, NEED - 1)
    prog = tmp_path / "reach.dl"
    prog.write_text(REACH)
    pt = build_tasks(load_program(prog))
    result = run_program(spark, pt, graph[0])
    reach = pt.graph.names.index("reach")
    assert result.task_stats[reach].plan == "global"
    assert {r[0] for r in result.relations["reach"].collect()} == graph[1]


def _dist(tmp_path: Path, edges: str) -> tuple[Path, Path]:
    (tmp_path / "facts").mkdir(exist_ok=True)
    (tmp_path / "facts" / "edge.facts").write_text(edges)
    prog = tmp_path / "dist.dl"
    prog.write_text(DIST)
    return prog, tmp_path / "facts"


def _distances(tmp_path: Path) -> set[tuple[int, int]]:
    return {tuple(map(int, line.split("\t")))
            for line in (tmp_path / "out" / "dist.csv").read_text().splitlines()}


def test_run_state_refused_leaves_no_state(tmp_path, cli, cli_spark, monkeypatch):
    # dist reads edge's 6 rows: 900 B; subsumptive, it has no plan that spills.
    prog, facts = _dist(tmp_path, DIST_EDGES)
    memory(monkeypatch, 899)
    state = tmp_path / "state"
    code, out, err = cli(["run", prog, "-F", facts, "-D", tmp_path / "out", "-q",
                          "--state", state])
    assert (code, out) == (1, "")
    assert err == (f"{prog}: task dist: needs about 900 B for 6 input rows under the driver "
                   f"plan; the driver has 899 B available (a task with subsumptive rules runs "
                   f"in one process)\n")
    assert not (tmp_path / "out" / "dist.csv").exists()
    assert not state.exists()  # the directory the refused run made is gone, locks and all
    memory(monkeypatch, 900)  # just enough: the same command makes the state
    code, _, err = cli(["run", prog, "-F", facts, "-D", tmp_path / "out", "-q", "--state", state])
    assert code == 0, err
    assert StateDir(state).current() == 0
    # 1->2 (1), 2->3 (1), 3->4 (7), 4->5 (2)
    assert _distances(tmp_path) == {(1, 0), (2, 1), (3, 2), (4, 9), (5, 11)}


def test_update_refused_leaves_the_state_as_it_was(tmp_path, cli, cli_spark, monkeypatch):
    prog, facts = _dist(tmp_path, DIST_EDGES)
    state = tmp_path / "state"
    assert cli(["run", prog, "-F", facts, "-D", tmp_path / "out", "-q", "--state", state])[0] == 0
    before = tree(state)
    diff = tmp_path / "d.diff"
    diff.write_text("+edge(2, 4, 1)\n+edge(5, 6, 1)\n")
    # The epoch holds edge's 8 rows and dist's 5 old tuples in the driver: 13 rows, 1,950 B.
    memory(monkeypatch, 1949)
    code, out, err = cli(["update", state, "--insert", diff, "-D", tmp_path / "out"])
    assert (code, out) == (1, "")
    assert err.splitlines()[-1] == (
        f"{prog}: task dist: needs about 1.9 KiB for 13 input rows under the driver plan; the "
        f"driver has 1.9 KiB available (a task with subsumptive rules runs in one process)")
    assert tree(state) == before
    code, out, err = cli(["state", "check", state])
    assert code == 0 and "epoch 0" in out, out + err
    memory(monkeypatch, 1950)  # just enough: the same epoch runs
    code, _, err = cli(["update", state, "--insert", diff, "-D", tmp_path / "out"])
    assert code == 0, err
    # 1->2 (1), 2->4 (1), 4->5 (2), 5->6 (1); 3 by 2->3 (1)
    assert _distances(tmp_path) == {(1, 0), (2, 1), (3, 2), (4, 2), (5, 4), (6, 5)}


class _Conf(dict):
    def get(self, key, default=None):
        return super().get(key, default)


class _Context:
    defaultParallelism = 3  # noqa: N815 - PySpark's name; no JVM: task_slots falls back to it
    master = "spark://cluster:7077"

    def __init__(self, conf):
        self.conf = conf

    def getConf(self):  # noqa: N802 - PySpark's name
        return self.conf


class _Cluster:
    """A session on a cluster master whose executors have 4 GiB and 2 cores each."""

    def __init__(self):
        self.sparkContext = _Context(_Conf({"spark.executor.memory": "4g",
                                            "spark.executor.cores": "2"}))


def test_the_distributed_plan_has_its_workers_memory_together(monkeypatch):
    from levelflow.engine import session

    monkeypatch.setattr(session, "on_local_master", lambda spark: False)
    cluster = _Cluster()
    pt = build_tasks(parse_program(REACH))
    task = pt.tasks[pt.graph.names.index("reach")]
    decls = pt.program.decls
    one = 2 << 30  # 4 GiB over 2 cores
    within = 3 * one // 150  # the rows 3 workers hold at 150 B a row
    assert fitting_plan(cluster, "p.dl", task, decls, within, "distributed").kind == \
        "distributed"
    with pytest.raises(MemoryLimit) as e:
        fitting_plan(cluster, "p.dl", task, decls, within + 1, "distributed")
    assert str(e.value) == (f"p.dl: task reach: needs about 6.0 GiB for {within + 1:,} input "
                            f"rows under the distributed plan; its 3 Python workers have 6.0 "
                            f"GiB together (--plan global spills to disk)")
    with pytest.raises(MemoryLimit, match="under the local plan; one Python worker has 2.0 GiB"):
        fitting_plan(cluster, "p.dl", task, decls, one // 150 + 1, "local")
    # Auto spreads a task past one worker's rows, and spills one past all three.
    spread = worker_rows(cluster.sparkContext.getConf())
    assert fitting_plan(cluster, "p.dl", task, decls, within, spread_rows=spread).kind == \
        "distributed"
    assert fitting_plan(cluster, "p.dl", task, decls, within + 1, spread_rows=spread).kind == \
        "global"
