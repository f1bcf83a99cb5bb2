"""The driver plan: a task with small inputs runs in the driver, with no Spark at all.

Under auto a task whose inputs are at most `driver_rows` rows is evaluated in the driver's own
process on the Polars evaluator the Python workers run (engine/plans/driver.py); what it makes
stays in the driver until a task on Spark reads it. Results must equal the naive reference's,
whichever side each task ran on.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_incremental_properties import rows_of, write_facts

from levelflow.engine.runner import run_program
from levelflow.engine.session import DeferredSession
from levelflow.tasks import build_tasks, parse_program

TC = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl cyclic(x:number)
cyclic(x) :- path(x, x).
.decl label(x:number, s:symbol, f:float)
label(x, to_string(x), to_float(x) / 4.0) :- cyclic(x).
.output path
.output label
.printsize cyclic
"""


class NoSpark:
    """A stand-in session: any use of it fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"Spark was used: {name}")


def _chain_with_cycle(n: int) -> set[tuple[int, int]]:
    return {(i, i + 1) for i in range(n)} | {(n, 0)}


def test_a_small_program_runs_in_the_driver_without_spark(tmp_path):
    write_facts(tmp_path / "f", {"edge": _chain_with_cycle(6) | {(10, 11)}})
    pt = build_tasks(parse_program(TC, "tc.dl"))
    expected = naive_evaluate(pt, tmp_path / "f")
    result = run_program(NoSpark(), pt, tmp_path / "f", tmp_path / "out")
    assert {s.plan for s in result.task_stats if s is not None} == {"driver"}
    assert all(e["spark_jobs"] == 0 and e["plan"] == "driver"
               for e in result.trace.extra.values())
    lines = (tmp_path / "out" / "path.csv").read_text().splitlines()
    assert lines == sorted(lines, key=lambda line: tuple(map(int, line.split("\t"))))
    assert {tuple(map(int, line.split("\t"))) for line in lines} == expected["path"]
    # A float as Soufflé prints it (%g), a symbol as it is.
    written = (tmp_path / "out" / "label.csv").read_text().splitlines()
    assert written == [f"{x}\t{x}\t{x / 4.0:g}" for x in range(7)]
    assert result.printsize == {"cyclic": len(expected["cyclic"])}


def test_tasks_hand_their_relations_across_the_driver_and_spark(spark, tmp_path):
    # With driver_rows 60: edge (30 rows, about 40 by its file's size) and path (reads 30) run
    # in the driver; big (200 rows of facts) and sel (reads 200) on Spark; closed (reads
    # path's 465 and sel) on Spark from a driver-held relation; tiny (reads sel's 15 rows) in
    # the driver from a DataFrame.
    text = TC.split(".decl cyclic")[0] + """
.decl big(x:number, y:number)
.input big
.decl sel(x:number, y:number)
sel(x, y) :- big(x, y), y < 3.
.decl closed(x:number, y:number)
closed(x, y) :- path(x, y), sel(x, _).
.decl tiny(x:number, y:number)
tiny(x, y) :- sel(x, y).
tiny(x, z) :- tiny(x, y), sel(y, z).
"""
    write_facts(tmp_path / "f", {"edge": {(i, i + 1) for i in range(30)},
                                 "big": {(i, i % 40) for i in range(200)}})
    pt = build_tasks(parse_program(text, "mixed.dl"))
    result = run_program(spark, pt, tmp_path / "f", None, driver_rows=60)
    plans = {name: result.task_stats[pt.task_of(name).id].plan
             for name in ("edge", "path", "big", "sel", "closed", "tiny")}
    assert plans == {"edge": "driver", "path": "driver", "big": "global", "sel": "global",
                     "closed": "global", "tiny": "driver"}
    expected = naive_evaluate(pt, tmp_path / "f")
    for name in pt.program.decls:
        assert rows_of(result.relation(name)) == expected[name], name


def test_a_run_in_the_driver_never_waits_for_spark(tmp_path):
    # The session never starts; only a task that needs Spark would see why.
    def broken():
        raise RuntimeError("no Spark here")

    write_facts(tmp_path / "f", {"edge": _chain_with_cycle(3)})
    pt = build_tasks(parse_program(TC, "tc.dl"))
    deferred = DeferredSession(broken)
    result = run_program(deferred, pt, tmp_path / "f", tmp_path / "out")
    assert result.printsize == {"cyclic": 4} and not deferred.in_use
    with pytest.raises(RuntimeError, match="no Spark here"):
        run_program(deferred, pt, tmp_path / "f", None, plan="local")


RACE = """
import sys, threading, time
from levelflow.engine.session import DeferredSession

started = threading.Event()


def make():  # as make_session does, less the JVM
    from pyspark.sql import SparkSession
    started.set()
    return SparkSession


deferred = DeferredSession(make)
time.sleep(float(sys.argv[1]))  # the start thread is part way through its import
from pyspark.sql.types import LongType  # on this thread, while the start thread imports PySpark
from pyspark.sql import SparkSession
deferred._made.wait()
assert deferred._error is None, repr(deferred._error)
assert started.is_set() and LongType and SparkSession
print("ok")
"""


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.1])
def test_pyspark_imported_on_two_threads_at_once_imports_once(delay):
    # A deferred session's start thread imports PySpark while the command's thread (serve's
    # state load) imports it too: unguarded, PySpark's circular imports failed 2 tries in 3.
    done = subprocess.run([sys.executable, "-c", RACE, str(delay)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
