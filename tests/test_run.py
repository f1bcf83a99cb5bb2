"""The dispatch loop (run_program), the `levelflow run` command and the Python API.

The branch program below, drawn as its task graph (input tasks on top):

      a         b   (b's fact file is empty)      k :- !d(5).   m :- x = 3.
     / \\        |                                  \\          /
    c ─ g       d                                     \\        /
    |    \\      |                                       z ───
    f <───────  e  (f also reads d negatively)

A from-scratch run starts a, b, k, m (input, or rules without a positive atom); b comes out
empty, so d and then e are never activated: 8 of the 10 tasks run.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from levelflow.cli import main as cli_main
from levelflow.engine.api import load
from levelflow.engine.runner import RunError, run_program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

BRANCH = """
.decl a(x:number)
.decl b(x:number)
.input a
.input b
.decl c(x:number)
c(x) :- a(x), x > 1.
.decl d(x:number)
d(x) :- b(x).
.decl e(x:number)
e(x) :- d(x), d(y), x < y.
.decl f(x:number)
f(x) :- c(x), !d(x).
.decl g(x:number)
g(x) :- a(x), !c(x).
.decl k(x:number)
k(1) :- !d(5).
.decl m(x:number)
m(x) :- x = 3.
.decl z(x:number)
z(x) :- k(x), m(x).
.output c, d, e, f, g, k, m, z
.printsize f
.printsize e
"""
# Computed by hand from a = {1, 2, 3}, b = {}.
BRANCH_EXPECTED = {"c": {2, 3}, "d": set(), "e": set(), "f": {2, 3}, "g": {1}, "k": {1},
                   "m": {3}, "z": set()}


def _program(tmp_path: Path, text: str, facts: dict[str, str]) -> tuple[Path, Path]:
    """Return (program path, fact dir) of a program written into tmp_path."""
    path = tmp_path / "program.dl"
    path.write_text(text)
    factdir = tmp_path / "facts"
    factdir.mkdir()
    for name, body in facts.items():
        (factdir / f"{name}.facts").write_text(body)
    return path, factdir


@pytest.fixture
def branch(tmp_path):
    """Return (ProgramTasks, fact dir) of the branch program with a = {1,2,3}, b = {}."""
    path, factdir = _program(tmp_path, BRANCH, {"a": "1\n2\n3\n", "b": ""})
    return load(path), factdir


def _rows(df) -> set:
    return {tuple(r) if len(r) > 1 else r[0] for r in df.collect()}


class BranchRuns:
    """The branch program run once on one worker and once on two (outputs, trace, schedule)."""

    def __init__(self, spark, tmp: Path):
        path, factdir = _program(tmp, BRANCH, {"a": "1\n2\n3\n", "b": ""})
        self.pt, self.out = load(path), tmp / "out"
        self.trace_path, self.schedule_path = tmp / "run.json", tmp / "run.csv"
        self.one = run_program(spark, self.pt, factdir, scheduler="levelbased", jobs=1)
        self.two = run_program(spark, self.pt, factdir, self.out, scheduler="levelbased",
                               jobs=2, trace_out=self.trace_path,
                               schedule_out=self.schedule_path)
        # Read now: tests of this module that run in between start other runs.
        self.rows_one = {n: _rows(self.one.relation(n)) for n in self.pt.program.decls}
        self.rows_two = {n: _rows(self.two.relation(n)) for n in self.pt.program.decls}


@pytest.fixture(scope="module")
def branch_runs(spark, tmp_path_factory) -> BranchRuns:
    """Return the branch program's two runs, which several read-only tests below share."""
    return BranchRuns(spark, tmp_path_factory.mktemp("branch"))


def _sorted_lines(directory: Path) -> dict[str, list[str]]:
    return {p.name: sorted(p.read_text().splitlines()) for p in sorted(directory.glob("*.csv"))}


# ---------------------------------------------------------------------------------------------
# Which tasks run


def test_initial_tasks_are_input_facts_and_atom_free_rules(branch):
    pt, _ = branch
    names = [pt.tasks[v].name for v in pt.initial]
    assert sorted(names) == ["a", "b", "k", "m"]


def test_branch_with_empty_input_is_not_run(branch_runs):
    result = branch_runs.two
    assert (result.ran, result.total) == (8, 10)
    assert sorted(result.ran_tasks) == ["a", "b", "c", "f", "g", "k", "m", "z"]
    assert result.summary().startswith("ran 8 of 10 tasks in ")
    for name, expected in BRANCH_EXPECTED.items():
        assert branch_runs.rows_two[name] == expected, name
    # Tasks that did not run still have (empty) relations and output files.
    assert (branch_runs.out / "e.csv").read_text() == ""
    assert result.printsize == {"f": 2, "e": 0}
    names = result.task_names
    seconds = dict(zip(names, result.task_seconds, strict=True))
    assert seconds["d"] == seconds["e"] == 0.0
    assert all(seconds[n] > 0 for n in result.ran_tasks)


@pytest.mark.parametrize("jobs", [1, 2])
def test_activations_follow_nonempty_relations(branch_runs, jobs):
    result = branch_runs.one if jobs == 1 else branch_runs.two
    names = result.task_names
    acts = {names[v]: sorted(names[c] for c in cs) for v, cs in result.trace.activations.items()}
    # b is empty: it activates nothing; z is empty: nothing to activate anyway.
    assert acts == {"a": ["c", "g"], "b": [], "c": ["f", "g"], "f": [], "g": [], "k": ["z"],
                    "m": ["z"], "z": []}


# ---------------------------------------------------------------------------------------------
# Concurrency


def test_one_and_two_workers_give_the_same_relations(branch_runs):
    one, two = branch_runs.one, branch_runs.two
    assert branch_runs.rows_one == branch_runs.rows_two
    assert (one.ran, one.total) == (two.ran, two.total) == (8, 10)

    def overlaps(schedule):
        rows = sorted(schedule, key=lambda r: r[2])
        return any(b[2] < a[3] for a, b in zip(rows, rows[1:], strict=False))

    # Four initial tasks are ready at once: two workers run two at a time, one runs them in turn.
    assert {slot for _, slot, _, _ in one.schedule} == {0}
    assert not overlaps(one.schedule)
    assert {slot for _, slot, _, _ in two.schedule} == {0, 1}
    assert overlaps(two.schedule)


def test_workers_submit_jobs_in_their_own_fair_pool_with_the_run_tag(spark, monkeypatch):
    from levelflow.engine import plans

    seen = []
    real = plans.evaluate_planned

    def spy(spark_, program, task, *args, **kwargs):
        sc = spark_.sparkContext
        seen.append((threading.current_thread().name, sc.getLocalProperty("spark.scheduler.pool"),
                     sc.getJobTags()))
        return real(spark_, program, task, *args, **kwargs)

    monkeypatch.setattr(plans, "evaluate_planned", spy)
    pt = load(EXAMPLES / "tc" / "program.dl")
    run_program(spark, pt, EXAMPLES / "tc" / "facts", scheduler="levelbased", jobs=2,
                driver_rows=None)  # tasks on Spark: in the driver, a task tells Spark nothing
    assert len(seen) == 3
    for thread, pool, tags in seen:
        assert thread.startswith("levelflow-worker")
        assert pool in ("levelflow-0", "levelflow-1")
        assert any(t.startswith("levelflow-") for t in tags)
    # The main thread is left as it was.
    assert spark.sparkContext.getLocalProperty("spark.scheduler.pool") is None
    assert not spark.sparkContext.getJobTags()


def test_a_failing_task_cancels_the_running_ones(spark, tmp_path, monkeypatch):
    from levelflow.engine import plans
    from levelflow.engine.facts import FactError

    path, factdir = _program(tmp_path, """
        .decl slow(x:number)
        .decl bad(x:number)
        .input slow
        .input bad
        .decl after(x:number)
        after(x) :- slow(x), bad(x).
        .output after
    """, {"slow": "1\n", "bad": "1\n"})
    started = threading.Event()
    outcome = {}

    def fake(spark_, program, task, relations, factdir=None, *, cancel=None, **kwargs):
        if task.name == "slow":
            started.set()
            try:  # a job that would run for hours unless cancelled
                spark_.range(0, 10**13, numPartitions=2).selectExpr("max(id)").collect()
            except Exception as e:  # noqa: BLE001 - recorded for the assertion below
                outcome["slow"] = e
                outcome["cancel_set"] = cancel.is_set()
                raise
            return {}
        started.wait(30)
        time.sleep(1.0)  # let the slow job get going
        raise FactError("bad.facts:1:1: error: broken on purpose")

    monkeypatch.setattr(plans, "evaluate_planned", fake)
    out = tmp_path / "out"
    t0 = time.monotonic()
    with pytest.raises(FactError, match="broken on purpose"):
        # On Spark: a task run in the driver starts no job to cancel.
        run_program(spark, load(path), factdir, out, scheduler="levelbased", jobs=2,
                    driver_rows=None)
    assert time.monotonic() - t0 < 60
    assert "cancel" in str(outcome["slow"]).lower()
    assert outcome["cancel_set"]
    assert not out.exists()


def test_a_spark_failure_is_one_line_naming_the_task(spark, branch, monkeypatch):
    from levelflow.engine import plans

    real = plans.evaluate_planned

    def failing(spark_, program, task, *args, **kwargs):
        if task.name == "c":
            spark_.range(1).selectExpr("raise_error('boom in c')").collect()
        return real(spark_, program, task, *args, **kwargs)

    monkeypatch.setattr(plans, "evaluate_planned", failing)
    pt, factdir = branch
    with pytest.raises(RunError) as exc:
        run_program(spark, pt, factdir, scheduler="levelbased", jobs=2, driver_rows=None)
    message = str(exc.value)
    assert "\n" not in message
    assert "task c failed in Spark" in message and "boom in c" in message


# ---------------------------------------------------------------------------------------------
# Trace and schedule


def test_trace_out_is_a_valid_jobtrace_of_the_run(branch_runs):
    from levelflow.traces import check_schedule, load_trace, read_schedule

    pt, result = branch_runs.pt, branch_runs.two
    trace_path, schedule_path = branch_runs.trace_path, branch_runs.schedule_path
    trace = load_trace(trace_path)
    names = trace.graph.names
    assert list(names) == [t.name for t in pt.tasks]  # ALL tasks, ids = task names
    assert sorted(trace.graph.children[v] for v in range(len(names))) == sorted(
        pt.graph.children[v] for v in range(len(names)))
    assert sorted(names[v] for v in trace.initial) == ["a", "b", "k", "m"]
    ran = {names[v] for v in trace.activations}
    assert ran == set(result.ran_tasks)
    assert {n for n, act in zip(names, trace.active_set(), strict=True) if act} == ran
    for v, name in enumerate(names):
        assert (trace.durations[v] > 0) == (name in ran), name
    assert trace.activations == result.trace.activations
    raw = json.loads(trace_path.read_text())
    assert raw["format"] == "jobtrace/1" and len(raw["nodes"]) == 10
    # The recorded schedule is valid for the trace (start rule, one task per slot at a time).
    assert check_schedule(trace, read_schedule(schedule_path, trace)) == []


def test_recorded_trace_replays_in_the_simulator(branch_runs):
    from levelflow.simulator import simulate

    for result in (branch_runs.one, branch_runs.two):
        sim = simulate(result.trace, "levelbased", processors=2)
        assert sim.tasks == result.ran


# ---------------------------------------------------------------------------------------------
# Progress


def test_progress_is_quiet_when_stdout_is_not_a_terminal():
    from rich.console import Console

    from levelflow.engine.progress import PhaseLines, Progress, RichProgress, make_progress

    # No live line: a phase past 5 s gets one line (tests/test_progress_lines.py).
    assert type(make_progress(console=Console(file=io.StringIO()))) is PhaseLines
    tty = Console(file=io.StringIO(), force_terminal=True)
    assert type(make_progress(quiet=True, console=tty)) is Progress
    assert isinstance(make_progress(console=tty), RichProgress)


def test_rich_progress_shows_done_activated_and_running():
    from rich.console import Console

    from levelflow.engine.progress import RichProgress

    p = RichProgress(Console(file=io.StringIO(), force_terminal=True, width=200))
    p.start(["edge", "path", "cyclic"])
    p.activated([0])
    p.started(0)
    p.finished(0, 0.5)
    p.activated([1])
    p.started(1)
    line = p.render().plain
    p.stop()
    assert "1 of 2 activated tasks done" in line and "3 in all" in line
    assert "running: path" in line and "edge" not in line.split("running:")[1]


# ---------------------------------------------------------------------------------------------
# Errors: one line, exit 1, the output directory untouched


def _cli(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        cli_main(argv)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_a_missing_fact_file_is_read_as_empty_with_one_warning(cli_spark, tmp_path, capsys):
    """Soufflé reads an .input whose file does not exist as empty and says so on stderr
    (`Error loading b data: Cannot open fact file b.facts`): one warning line naming the file
    and the relation, and the run goes on (b = {} gives BRANCH_EXPECTED)."""
    path, factdir = _program(tmp_path, BRANCH, {"a": "1\n2\n3\n"})  # b.facts missing
    out = tmp_path / "out"
    code, _, err = _cli(["run", str(path), "-F", str(factdir), "-D", str(out), "-q"], capsys)
    assert code == 0, err
    assert err == (f"{factdir / 'b.facts'}: warning: cannot open fact file for relation b (no "
                   f"such file); b is read as empty, as Soufflé reads it\n")
    for name, expected in BRANCH_EXPECTED.items():
        lines = (out / f"{name}.csv").read_text().splitlines()
        assert sorted(map(int, lines)) == sorted(expected), name


def test_a_fact_file_that_is_a_directory_is_one_line_and_leaves_outdir_alone(tmp_path, capsys):
    path, factdir = _program(tmp_path, BRANCH, {"a": "1\n"})
    (factdir / "b.facts").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "c.csv").write_text("old\n")
    code, stdout, err = _cli(["run", str(path), "-F", str(factdir), "-D", str(out)], capsys)
    assert code == 1
    assert err == (f"{factdir / 'b.facts'}:1:1: error: cannot read fact file for relation b "
                   f"(a directory)\n")
    assert stdout == ""
    assert [p.name for p in out.iterdir()] == ["c.csv"]
    assert (out / "c.csv").read_text() == "old\n"


@pytest.mark.parametrize("flags, fragment", [
    (["-j", "0"], "--jobs: must be a positive integer, got 0"),
    (["-j", "two"], "'--jobs'"),  # typer's own usage error: exit 2 as well
    (["--checkpoint", "disk"], "--checkpoint: must be one of local, reliable"),
    (["--scheduler", "no-such-scheduler"], "no-such-scheduler"),
    (["--local-rows", "-5"], "--local-rows: must be a number of rows >= 0, got -5"),
    (["--plan", "fast"],
     "--plan: must be one of auto, driver, local, partitioned, distributed, global"),
    (["--master", "foo"], "--master: not a Spark master URL: 'foo'"),
    (["--master", "local[x]"], "--master: not a Spark master URL: 'local[x]'"),
])
def test_bad_flag_values_are_one_line_exit_2(tmp_path, capsys, flags, fragment):
    path, factdir = _program(tmp_path, BRANCH, {"a": "1\n", "b": ""})
    out = tmp_path / "new" / "o"
    code, stdout, err = _cli(["run", str(path), "-F", str(factdir), "-D", str(out), *flags],
                             capsys)
    assert code == 2  # the rule: a wrong command line exits 2, as typer's usage errors do
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err
    assert stdout == "" and not (tmp_path / "new").exists()  # no folder left behind


def test_the_exit_status_rule_is_in_the_help(capsys):
    code, out, _ = _cli(["--help"], capsys)
    assert code == 0
    assert "Exit status" in out and "2 a wrong command line" in " ".join(out.split())


def test_bad_program_is_one_line_exit_1(tmp_path, capsys):
    path, factdir = _program(tmp_path, ".decl a(x:number)\nb(x) :- a(x).\n", {})
    code, _, err = _cli(["run", str(path), "-F", str(factdir), "-D", str(tmp_path)], capsys)
    assert code == 1
    assert err.count("\n") == 1 and f"{path}:2:" in err


def test_bad_fact_line_fails_the_run_and_writes_nothing(spark, tmp_path):
    from levelflow.engine.facts import FactError

    path, factdir = _program(tmp_path, BRANCH, {"a": "1\n2\nx3\n", "b": ""})
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FactError) as exc:
        run_program(spark, load(path), factdir, out, scheduler="levelbased", jobs=2)
    assert str(exc.value).startswith(f"{factdir / 'a.facts'}:3:")
    assert list(out.iterdir()) == []


def test_outputs_are_all_or_nothing(spark, branch, tmp_path, monkeypatch):
    from levelflow.engine import facts

    pt, factdir = branch
    out = tmp_path / "out"
    out.mkdir()
    (out / "f.csv").write_text("old\n")
    real = facts.write_relation

    def flaky(df, decl, path, delimiter="\t", **kw):
        if decl.name == "z":
            raise OSError("disk full")
        return real(df, decl, path, delimiter, **kw)

    monkeypatch.setattr(facts, "write_relation", flaky)
    with pytest.raises(OSError, match="disk full"):
        run_program(spark, pt, factdir, out, scheduler="levelbased", jobs=2)
    assert [p.name for p in out.iterdir()] == ["f.csv"]
    assert (out / "f.csv").read_text() == "old\n"


# ---------------------------------------------------------------------------------------------
# The Python API and the CLI end to end


def test_python_api_runs_a_program(spark):
    import levelflow

    prog = levelflow.load(EXAMPLES / "tc" / "program.dl")
    result = levelflow.run(prog, EXAMPLES / "tc" / "facts", spark=spark, scheduler="levelbased")
    expected = (EXAMPLES / "tc" / "expected" / "path.csv").read_text().splitlines()
    assert result.relation("path").count() == len(expected)
    assert (result.ran, result.total) == (3, 3)
    with pytest.raises(KeyError, match="nope"):
        result.relation("nope")
    with pytest.raises(RunError, match="checkpoint"):
        levelflow.run(prog, EXAMPLES / "tc" / "facts", spark=spark, checkpoint="reliable")


def test_cli_end_to_end_on_an_example(tmp_path):
    example = EXAMPLES / "negation"
    out = tmp_path / "out"
    trace = tmp_path / "trace.json"
    proc = subprocess.run(
        [sys.executable, "-m", "levelflow", "run", str(example / "program.dl"),
         "-F", str(example / "facts"), "-D", str(out), "--trace-out", str(trace),
         "--scheduler", "levelbased", "--driver-memory", "1g"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # Spark's own noise stays out of the way
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("ran 9 of 9 tasks in ")
    expected = _sorted_lines(example / "expected")
    where = lines[0].split(f"; outputs in {out}{os.sep}: ")[1].split(", ")  # where they went
    assert sorted(where) == sorted(f"{name} ({len(rows):,})" for name, rows in expected.items())
    assert lines[1:] == [f"trace written to {trace}",
                         f"unreachable\t{len(expected['unreachable.csv'])}"]
    assert "\x1b[" not in proc.stdout  # no progress display when stdout is not a terminal
    assert _sorted_lines(out) == expected
    assert json.loads(trace.read_text())["format"] == "jobtrace/1"


@pytest.mark.parametrize("flag", ["--trace-out", "--schedule"])
def test_unwritable_trace_or_schedule_path_fails_before_the_run(tmp_path, capsys, flag):
    path, factdir = _program(tmp_path, BRANCH, {"a": "1\n", "b": ""})
    (tmp_path / "afile").write_text("")
    code, stdout, err = _cli(["run", str(path), "-F", str(factdir), "-D", str(tmp_path / "o"),
                              flag, str(tmp_path / "afile" / "x.out")], capsys)
    assert code == 1
    assert err.count("\n") == 1 and flag in err and "Traceback" not in err
    assert stdout == "" and not (tmp_path / "o").exists()  # nothing ran, nothing written


def test_trace_and_schedule_directories_are_made_before_the_run(tmp_path):
    from levelflow.cli.run_cmd import make_parent
    from levelflow.engine.runner import RunError

    target = tmp_path / "new" / "sub" / "trace.json"
    make_parent(target, "--trace-out", RunError)
    assert target.parent.is_dir() and not target.exists()
    with pytest.raises(RunError, match="names a directory"):
        make_parent(tmp_path / "new", "--schedule", RunError)


def test_fact_paths_that_are_not_what_they_should_be_say_what_they_are(tmp_path, capsys):
    path, factdir = _program(tmp_path, BRANCH, {"a": "1\n"})
    (factdir / "b.facts").mkdir()
    code, _, err = _cli(["run", str(path), "-F", str(factdir), "-D", str(tmp_path / "o")], capsys)
    assert code == 1 and "b.facts" in err and "(a directory)" in err
    code, _, err = _cli(["run", str(path), "-F", str(path), "-D", str(tmp_path / "o")], capsys)
    assert code == 1 and "fact directory is not a directory" in err


def test_a_relation_nothing_reads_brings_back_its_counts_only(spark, tmp_path):
    """`.printsize` only: the task's one job returns counts, and reading the relation later
    runs the task again (a lazy plan), with the same tuples as a stored run."""
    from levelflow.engine.session import jobs_started
    from levelflow.tasks import build_tasks, parse_program

    (tmp_path / "e.facts").write_text("".join(f"{i}\t{(i * 7 + 3) % 40}\n" for i in range(60)))
    head = ".decl e(x:number, y:number)\n.input e\n.decl t(x:number, y:number)\n"
    rules = "t(x, y) :- [e+](x, y).\n"
    counted = build_tasks(parse_program(head + rules + ".printsize t\n", "c.dl"))
    stored = build_tasks(parse_program(head + rules + ".output t\n", "s.dl"))
    before = jobs_started(spark)
    res = run_program(spark, counted, tmp_path, None, jobs=1, plan="partitioned")
    # One job for t, none for its .printsize; every job of the run is one of its tasks'.
    assert res.trace.extra[counted.task_of("t").id]["spark_jobs"] == 1
    assert jobs_started(spark) - before == sum(x["spark_jobs"] for x in res.trace.extra.values())
    ref = run_program(spark, stored, tmp_path, None, jobs=1, plan="partitioned")

    def plan(df):
        return df._jdf.queryExecution().logical().toString()
    # The counted relation is the task's plan (its workers run again when read); the output's
    # is rooted on the stored rows.
    assert "MapInArrow" in plan(res.relation("t")) and "MapInArrow" not in plan(ref.relation("t"))
    want = {tuple(r) for r in ref.relation("t").collect()}
    assert res.printsize == {"t": len(want)} and len(want) > 60
    assert {tuple(r) for r in res.relation("t").collect()} == want
