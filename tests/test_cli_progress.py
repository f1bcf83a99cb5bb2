"""What the commands show while they work, and what their summaries say the time went on.

`run --state`, `update`, `state check|repair` and `simulate` say what is being done and how far
(issue 32, item 5); `run` and `update` report the wall time and its parts (item 6). The CLI
runs in process on the test session's SparkSession, the live line replaced by a recorder.
"""

from __future__ import annotations

import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from levelflow.cli import main as cli_main
from levelflow.engine import progress as progress_mod
from levelflow.engine.incremental import IncrementalSession, StateDir

PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.output path
.printsize path
"""
# 'ran k of N tasks in W s (part s, ...)': the wall time, then each part.
SUMMARY = re.compile(r"ran (\d+) of (\d+) tasks in ([\d.]+) s \(([^)]*)\)")


class Recorder(progress_mod.Progress):
    """A progress display that keeps what it was told."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.started_tasks: list[int] = []
        self.finished_tasks: list[int] = []
        self.watched = False

    def phase(self, text: str) -> None:
        self.phases.append(text)

    def started(self, task: int) -> None:
        self.started_tasks.append(task)

    def finished(self, task: int, seconds: float) -> None:
        self.finished_tasks.append(task)

    def watch(self, spark) -> None:
        self.watched = True


@pytest.fixture
def recorded(spark, monkeypatch):
    """Return the Recorder the CLI's commands get; their Spark is the test session."""
    from levelflow.cli import spark as cli_spark

    recorder = Recorder()

    @contextmanager
    def test_spark(master, driver_memory, log, clock=None, eager=True):
        if clock is not None:
            clock.add("Spark start", 0.0)
        yield spark

    monkeypatch.setattr(progress_mod, "make_progress", lambda quiet=False: recorder)
    monkeypatch.setattr(cli_spark, "spark_session", test_spark)
    return recorder


def _cli(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        cli_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return e.value.code, out, err


def _parts(line: str) -> tuple[float, dict[str, float]]:
    """Return (wall seconds, {part: seconds}) of a summary line; the parts add up to the wall."""
    m = SUMMARY.search(line)
    assert m, line
    parts = {}
    for item in m[4].split(", "):
        name, seconds, unit = item.rsplit(" ", 2)
        assert unit == "s", line
        parts[name] = float(seconds)
    wall = float(m[3])
    assert abs(sum(parts.values()) - wall) <= 0.01 * len(parts) + 0.01, line
    return wall, parts


def _program(tmp: Path) -> tuple[Path, Path]:
    (tmp / "facts").mkdir(parents=True)
    (tmp / "p.dl").write_text(PROGRAM)
    (tmp / "facts" / "edge.facts").write_text("1\t2\n2\t3\n3\t4\n")
    return tmp / "p.dl", tmp / "facts"


def test_run_state_shows_its_phases_and_reports_the_time_parts(recorded, tmp_path, capsys):
    prog, facts = _program(tmp_path)
    code, out, err = _cli(["run", prog, "-F", facts, "-D", tmp_path / "out", "--state",
                           tmp_path / "st", "--trace-out", tmp_path / "t" / "e0.json",
                           "--schedule", tmp_path / "t" / "e0.csv"], capsys)
    assert code == 0, err
    assert recorded.watched
    # Spark starts in the background (cli/spark.py): the run's first phase is its own.
    assert recorded.phases[0] == "reading facts of edge (1 of 1)"
    assert "evaluating epoch 0" in recorded.phases
    assert "writing epoch 0 to the state" in recorded.phases
    assert recorded.phases[-1] == "writing outputs"
    assert sorted(recorded.started_tasks) == sorted(recorded.finished_tasks) == [0, 1]
    lines = out.splitlines()
    wall, parts = _parts(lines[0])
    assert list(parts)[:6] == ["Spark start", "reading", "shipping", "evaluating", "state",
                               "writing"]
    assert lines[0].startswith("ran 2 of 2 tasks in ") and "path.csv (6)" in lines[0]
    # --state now combines with --trace-out and --schedule: epoch 0's trace and schedule.
    from levelflow.traces import check_schedule, load_trace, read_schedule

    trace = load_trace(tmp_path / "t" / "e0.json")
    assert check_schedule(trace, read_schedule(tmp_path / "t" / "e0.csv", trace)) == []
    assert f"trace written to {tmp_path / 't' / 'e0.json'}" in lines
    assert f"schedule written to {tmp_path / 't' / 'e0.csv'}" in lines
    assert lines[-1] == "path\t6"
    assert StateDir(tmp_path / "st").current() == 0


def test_run_reports_the_wall_time_and_its_parts(recorded, tmp_path, capsys):
    prog, facts = _program(tmp_path)
    # A chain of 300 edges (45,150 paths, 300 rounds): evaluating takes tens of milliseconds,
    # where 3 edges took under the summary's 0.01 s and printed 0.00 now and then.
    (facts / "edge.facts").write_text("".join(f"{i}\t{i + 1}\n" for i in range(300)))
    code, out, err = _cli(["run", prog, "-F", facts, "-D", tmp_path / "out"], capsys)
    assert code == 0, err
    wall, parts = _parts(out.splitlines()[0])
    assert list(parts)[:5] == ["Spark start", "reading", "shipping", "evaluating", "writing"]
    assert parts["evaluating"] > 0 and wall >= parts["evaluating"]


def test_run_counts_reading_and_shipping_apart_from_evaluating(recorded, tmp_path, capsys,
                                                              monkeypatch):
    """A slow read and a slow ship land in their own parts, not in evaluating."""
    import levelflow.engine.fact_reader as fact_reader
    import levelflow.engine.spark_ship as spark_ship

    slow_read, slow_ship = fact_reader._read, spark_ship.io_meter.timed
    calls = {"read": 0, "ship": 0}

    def read(*args):
        calls["read"] += 1
        time.sleep(0.6)
        return slow_read(*args)

    @contextmanager
    def timed(part):
        with slow_ship(part):
            yield
            if part == "shipping":
                calls["ship"] += 1
                time.sleep(0.4)

    monkeypatch.setattr(fact_reader, "_read", read)
    monkeypatch.setattr(spark_ship.io_meter, "timed", timed)
    prog, facts = _program(tmp_path)
    # On Spark: a task small enough for the driver ships nothing.
    code, out, err = _cli(["run", prog, "-F", facts, "-D", tmp_path / "out", "--plan", "local"],
                          capsys)
    assert code == 0, err
    # _parts checks the parts add up to the wall time: nothing is counted twice.
    wall, parts = _parts(out.splitlines()[0])
    # Read once (checked before Spark, its rows kept for the task), shipped once; each slow
    # step's time is in its own part (the parts' upper ends depend on the machine's load).
    assert calls == {"read": 1, "ship": 1}
    assert parts["reading"] >= 0.6 and parts["shipping"] >= 0.4, parts


def test_update_shows_its_phases_and_reports_the_time_parts(spark, recorded, tmp_path, capsys):
    prog, facts = _program(tmp_path)
    IncrementalSession.bootstrap(spark, prog, facts, tmp_path / "st").close()
    diff = tmp_path / "d.diff"
    diff.write_text("+edge(4,5)\n")
    code, out, err = _cli(["update", tmp_path / "st", "--insert", diff, "-D", tmp_path / "o"],
                          capsys)
    assert code == 0, err
    assert recorded.phases[:2] == ["opening the state", "applying 1 change(s) as one epoch"]
    assert "writing epoch 1 to the state" in recorded.phases
    assert recorded.phases[-1] == "writing outputs"
    assert recorded.finished_tasks  # the tasks, as run shows them
    summary = [ln for ln in out.splitlines() if ln.startswith("ran ")]
    wall, parts = _parts(summary[0])
    assert list(parts)[:5] == ["Spark start", "opening the state", "tasks", "state", "outputs"]
    assert "path\t+4\t-0" in out.splitlines()


def test_state_check_and_repair_say_how_far_they_got(spark, recorded, tmp_path, capsys):
    prog, facts = _program(tmp_path)
    session = IncrementalSession.bootstrap(spark, prog, facts, tmp_path / "st")
    session.insert("edge", (4, 5))
    session.commit()
    session.close()
    code, out, err = _cli(["state", "check", tmp_path / "st"], capsys)
    assert code == 0, err
    assert not recorded.watched  # the check starts no Spark
    assert "verifying epoch 1 (the current one, of 2 on disk)" in recorded.phases
    assert "verifying epoch 0 (2 of 2 on disk)" in recorded.phases
    recorded.phases.clear()
    code, out, err = _cli(["state", "repair", tmp_path / "st", "--rebuild"], capsys)
    assert code == 0, err
    assert "verifying the base facts of epoch 1" in recorded.phases
    assert "re-evaluating the program on the base facts of epoch 1" in recorded.phases
    assert sorted(recorded.finished_tasks) == [0, 1]  # the rebuild's tasks, as run shows them
    assert "rebuilt from the base facts of epoch 1" in out


def test_the_live_line_counts_the_running_spark_tasks(spark):
    tracker = spark.sparkContext.statusTracker()
    assert progress_mod.spark_stages(tracker) == ""  # nothing running
    job = threading.Thread(target=lambda: spark.sparkContext.parallelize(range(2), 2)
                           .map(lambda x: time.sleep(1.5) or x).collect())
    job.start()
    seen = ""
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        seen = progress_mod.spark_stages(tracker)
        time.sleep(0.05)
    job.join()
    assert re.fullmatch(r"[01] of 2 tasks done in 1 stage\(s\)", seen), seen
    assert progress_mod.spark_stages(None) == ""


def test_simulate_says_what_it_reads_and_prepares(tmp_path):
    import json

    from levelflow.cli.simulate_cmd import _load

    trace = {"format": "jobtrace/1", "name": "two", "processors": 1,
             "nodes": [{"id": "a", "duration": 1.0}, {"id": "b", "duration": 2.0}],
             "edges": [["a", "b"]], "initial": ["a"]}
    path = tmp_path / "two.json"
    path.write_text(json.dumps(trace))
    said: list[str] = []
    loaded, built = _load(path, ["levelbased", "hybrid"], said.append)
    assert len(loaded.graph) == 2 and len(built) == 2
    assert said == [f"reading {path}", "preparing scheduler levelbased (1 of 2) for 2 tasks",
                    "preparing scheduler hybrid (2 of 2) for 2 tasks"]
