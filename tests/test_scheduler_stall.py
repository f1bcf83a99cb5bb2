"""A broken plugin scheduler fails the same way under every driver: one line, exit 3.

`simulate` is covered in test_simulate_cli.py; here `run` and `update`, end to end (in this
process on the tests' session, the plugin named by its import path), and the engine's "handed
out too many" check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.driver import SchedulerStall
from levelflow.engine.api import load
from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.runner import run_program

PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.output path
.decl node(x:number)
.input node
"""

STUCK = "plug.stuckmod:Stuck"  # a plugin named by its import path

PLUGIN = '''
from levelflow.scheduler import LevelBased, Scheduler


class Stuck(Scheduler):
    """Claims work is left but never hands anything out."""

    def activate(self, tasks):
        pass

    def get_ready(self, k):
        return []

    def done(self, task, activated=()):
        pass

    def is_active(self):
        return True


class Greedy(LevelBased):
    """Hands out one task more than asked for."""

    def get_ready(self, k):
        return super().get_ready(k + 1)
'''


@pytest.fixture
def project(tmp_path) -> Path:
    """Return a directory holding the program, its facts and the plugin module."""
    (tmp_path / "p.dl").write_text(PROGRAM)
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / "edge.facts").write_text("1\t2\n2\t3\n")
    (tmp_path / "facts" / "node.facts").write_text("1\n")
    (tmp_path / "add").mkdir()
    (tmp_path / "add" / "edge.facts").write_text("3\t4\n")
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "__init__.py").write_text("")
    (tmp_path / "plug" / "stuckmod.py").write_text(PLUGIN)
    return tmp_path


def _one_stall_line(code: int, err: str) -> None:
    lines = err.strip().splitlines()
    assert code == 3, err
    assert len(lines) == 1, err
    assert "Stuck" in lines[0] and "stalled" in lines[0] and "Traceback" not in err


@pytest.fixture
def levelflow(project, cli, cli_spark, monkeypatch):
    """Return a function running `levelflow ARGV` in this process with the plugin importable
    (as from the project folder): (exit code, out, err)."""
    monkeypatch.syspath_prepend(str(project))
    return cli


def test_run_with_a_stalling_scheduler_is_one_line(project, levelflow):
    code, _, err = levelflow(["run", project / "p.dl", "-F", project / "facts",
                              "-D", project / "out", "-s", STUCK])
    _one_stall_line(code, err)
    assert not (project / "out" / "path.csv").exists()


def test_update_with_a_stalling_scheduler_is_one_line(spark, project, levelflow):
    IncrementalSession.bootstrap(spark, project / "p.dl", project / "facts", project / "st")
    code, _, err = levelflow(["update", project / "st", "--insert",
                              project / "add" / "edge.facts", "-s", STUCK])
    _one_stall_line(code, err)
    session = IncrementalSession.open(spark, project / "st")
    assert session.epoch == 0  # the failed epoch changed nothing


def test_engine_refuses_a_scheduler_that_hands_out_too_many(spark, project, monkeypatch):
    monkeypatch.syspath_prepend(str(project))
    from plug.stuckmod import Greedy

    pt = load(project / "p.dl")
    with pytest.raises(SchedulerStall, match=r"handed out 2 tasks from get_ready\(1\)"):
        run_program(spark, pt, project / "facts", scheduler=Greedy(pt.graph), jobs=1)
