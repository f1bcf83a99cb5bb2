"""`levelflow run --state` and `levelflow update`: end to end, and bad updates refused whole.

Bad update files (unknown relation, not an input, wrong arity, a value of the wrong type) are
refused before Spark starts with one line `file:line: error: ...`, exit 1, state untouched.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from levelflow.cli import main as cli_main
from levelflow.engine.incremental import IncrementalSession, StateDir
from levelflow.engine.incremental.updates import UpdateError, read_update_file
from levelflow.tasks import build_tasks, parse_program
from levelflow.traces import check_schedule, load_trace, read_schedule

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """
.decl edge(x:number, y:number)
.input edge
.decl label(x:number, l:symbol)
.input label
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl named(x:number, l:symbol)
named(y, l) :- path(x, y), label(x, l).
.output path
.output named
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def state(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("upd")
    prog = write(tmp / "p.dl", PROGRAM)
    write(tmp / "facts" / "edge.facts", "1\t2\n2\t3\n")
    write(tmp / "facts" / "label.facts", "1\tone\n")
    IncrementalSession.bootstrap(spark, prog, tmp / "facts", tmp / "state")
    return tmp


def test_update_with_no_change_starts_nothing_and_writes_no_epoch(state, capsys, monkeypatch):
    from levelflow.cli import spark as cli_spark
    from levelflow.engine.incremental.state.directory import StateDir

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started for nothing")

    monkeypatch.setattr(cli_spark, "spark_session", no_spark)
    before = StateDir(state / "state").current()
    empty = write(state / "empty.diff", "")
    for argv in ([], ["--insert", str(empty)]):
        with pytest.raises(SystemExit) as e:
            cli_main(["update", str(state / "state"), *argv])
        assert e.value.code == 0
        assert capsys.readouterr().out.startswith("nothing to do")
    assert StateDir(state / "state").current() == before


def test_update_shows_live_phases_like_run(state, capsys, monkeypatch):
    from contextlib import contextmanager

    from levelflow.cli import spark as cli_spark
    from levelflow.cli import update_cmd
    from levelflow.engine import progress as progress_mod

    seen: list[str] = []

    class Recording(progress_mod.Progress):
        def phase(self, text):
            seen.append(text)

    @contextmanager
    def fake_spark(master, driver_memory, log, clock=None, eager=True):
        seen.append("<spark up>")
        yield None

    monkeypatch.setattr(progress_mod, "make_progress", lambda quiet=False: Recording())
    monkeypatch.setattr(cli_spark, "spark_session", fake_spark)
    monkeypatch.setattr(update_cmd, "_apply", lambda *a: seen.append("<applied>"))
    diff = write(state / "one.diff", "+edge(8,9)\n")
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(state / "state"), "--insert", str(diff)])
    assert e.value.code == 0
    # Spark starts in the background: the first phase is the state's.
    assert seen == ["<spark up>", "opening the state",
                    "<applied>"]  # _apply says the rest: tests/test_cli_progress.py


@pytest.mark.parametrize("name,text,fragment", [
    ("d.diff", "+edge(1,2)\n+nope(1)\n", ":2: error: unknown relation nope"),
    ("d.diff", "+path(1,2)\n", ":1: error: path is not an .input relation"),
    ("d.diff", "\n-edge(1)\n", ":2: error: edge has arity 2, got 1 arguments"),
    ("d.diff", "+edge(1,x)\n", ":1: error: argument 2 'x' is not a number"),
    ("d.diff", "edge(1,2)\n", ":1: error: a diff line starts with + or -"),
    ("edge.facts", "1\t2\n3\tq\n", ":2:3: error: field 2 'q' is not a number"),
    ("path.facts", "1\t2\n", ":1: error: path is not an .input relation"),
])
def test_bad_update_is_one_line_and_changes_nothing(state, capsys, name, text, fragment):
    bad = write(state / "bad" / name, text)
    good = write(state / "good.diff", "+edge(3,4)\n")
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(state / "state"), "--insert", str(good), "--insert", str(bad)])
    assert e.value.code == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(str(bad)) and fragment in err
    assert StateDir(state / "state").current() == 0


def test_missing_state_dir_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(tmp_path / "none")])
    assert e.value.code == 1
    assert "not a levelflow state directory" in capsys.readouterr().err


def test_diff_and_fact_files_parse_with_signs(state):
    pt = build_tasks(parse_program(PROGRAM, "p.dl"))
    diff = write(state / "x.diff", '+label(3, "a b")\n// comment\n-edge(1,2)\n')
    ops = read_update_file(pt.program, diff, +1)
    assert [(o.sign, o.relation, o.row) for o in ops] == [(1, "label", (3, "a b")),
                                                          (-1, "edge", (1, 2))]
    flipped = read_update_file(pt.program, diff, -1)
    assert [o.sign for o in flipped] == [-1, 1]
    facts = write(state / "f" / "edge.facts", "7\t8\n")
    assert [(o.sign, o.row) for o in read_update_file(pt.program, facts, -1)] == [(-1, (7, 8))]
    with pytest.raises(UpdateError, match="no such file"):
        read_update_file(pt.program, state / "missing.diff", 1)


def _reference(program_text, edges, labels, tmp: Path):
    pt = build_tasks(parse_program(program_text, "p.dl"))
    write(tmp / "edge.facts", "".join(f"{a}\t{b}\n" for a, b in sorted(edges)))
    write(tmp / "label.facts", "".join(f"{a}\t{b}\n" for a, b in sorted(labels)))
    return naive_datalog.evaluate(pt, tmp)


def _lines(path: Path) -> set[str]:
    return set(path.read_text().splitlines())


def test_run_state_then_update_end_to_end(tmp_path, cli, cli_spark):
    prog = write(tmp_path / "p.dl", PROGRAM)
    write(tmp_path / "facts" / "edge.facts", "1\t2\n2\t3\n3\t4\n")
    write(tmp_path / "facts" / "label.facts", "1\tone\n")
    code, out, err = cli(["run", prog, "-F", tmp_path / "facts", "-D", tmp_path / "out0",
                          "--state", tmp_path / "st", "-q"])
    assert code == 0, err
    assert "ran 4 of 4 tasks" in out
    ins = write(tmp_path / "upd" / "label.facts", "4\tfour\n")
    diff = write(tmp_path / "upd" / "change.diff", "+edge(4,5)\n-edge(1,2)\n+edge(2,3)\n")
    code, upd_out, err = cli(["update", tmp_path / "st", "--insert", ins, "--insert", diff,
                              "-D", tmp_path / "out1",
                              "--trace-out", tmp_path / "traces" / "epoch1.json",
                              "--schedule", tmp_path / "traces" / "epoch1.csv"])
    assert code == 0, err
    edges = {(2, 3), (3, 4), (4, 5)}
    labels = {(1, "one"), (4, "four")}
    ref = _reference(PROGRAM, edges, labels, tmp_path / "ref")
    assert _lines(tmp_path / "out1" / "path.csv") == {f"{a}\t{b}" for a, b in ref["path"]}
    assert _lines(tmp_path / "out1" / "named.csv") == {f"{a}\t{b}" for a, b in ref["named"]}
    # path lost (1,2) (1,3) (1,4), gained (4,5) (2,5) (3,5); named lost all of label 1's.
    out = upd_out.splitlines()
    assert "path\t+3\t-3" in out
    assert "named\t+1\t-3" in out
    assert any("inserted fact(s) of edge already present" in line for line in out)
    assert "ran 4 of 4 tasks" in upd_out
    assert StateDir(tmp_path / "st").current() == 1
    trace = load_trace(tmp_path / "traces" / "epoch1.json")  # its directory made by update
    assert all(trace.active_set()) and len(trace.initial) == 2  # edge and label changed
    rows = read_schedule(tmp_path / "traces" / "epoch1.csv", trace)
    assert len(rows) == 4 and check_schedule(trace, rows) == []


@pytest.mark.parametrize("flags,named", [
    (["--checkpoint", "reliable"], "--checkpoint reliable"),
    (["--plan", "local"], "--plan local"),
])
def test_run_state_refuses_flags_it_cannot_honour(tmp_path, capsys, flags, named):
    prog = write(tmp_path / "p.dl", PROGRAM)
    write(tmp_path / "facts" / "edge.facts", "1\t2\n")
    write(tmp_path / "facts" / "label.facts", "1\tone\n")
    with pytest.raises(SystemExit) as e:
        cli_main(["run", str(prog), "-F", str(tmp_path / "facts"), "-D", str(tmp_path / "out"),
                  "--state", str(tmp_path / "st"), *flags])
    assert e.value.code == 2  # a usage error: the flags do not combine
    assert capsys.readouterr().err.strip() == (
        f"--state: cannot be combined with {named} (a state's epochs choose each task's plan "
        f"as its updates need)")
    assert not (tmp_path / "st").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags,message", [
    (["--switch", "-1"], "--switch: must be a fraction >= 0, got -1.0"),
    (["--large-change", "0"], "--large-change: must be a fraction > 0, got 0.0"),
    (["--strategy", "eager"], "--strategy: must be one of elastic, incremental, scratch, "
                              "got 'eager'"),
])
def test_bad_elastic_flags_are_one_line(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(tmp_path / "none"), *flags])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == message


def test_update_refuses_an_unknown_scheduler_before_spark(state, capsys):
    current = StateDir(state / "state").current()
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(state / "state"), "--scheduler", "nope"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("--scheduler: unknown scheduler 'nope'") and "\n" not in err
    assert StateDir(state / "state").current() == current


@pytest.mark.parametrize("command", ["run", "shell"])
def test_state_path_that_is_a_file_is_one_line(tmp_path, capsys, command):
    prog = write(tmp_path / "p.dl", PROGRAM)
    write(tmp_path / "facts" / "edge.facts", "1\t2\n")
    write(tmp_path / "facts" / "label.facts", "1\tone\n")
    not_a_dir = write(tmp_path / "notes.txt", "keep me\n")
    args = ["-D", str(tmp_path / "out")] if command == "run" else []
    with pytest.raises(SystemExit) as e:
        cli_main([command, str(prog), "-F", str(tmp_path / "facts"), *args,
                  "--state", str(not_a_dir)])
    assert e.value.code == 1
    assert capsys.readouterr().err.strip() == f"{not_a_dir}: error: not a directory"
    assert not_a_dir.read_text() == "keep me\n"


def test_shell_refuses_a_negative_switch(tmp_path, capsys):
    prog = write(tmp_path / "p.dl", PROGRAM)
    with pytest.raises(SystemExit) as e:
        cli_main(["shell", str(prog), "-F", str(tmp_path), "--switch", "-1"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == "--switch: must be a fraction >= 0, got -1.0"


@pytest.mark.parametrize("command", ["run", "update"])
def test_output_dir_that_cannot_be_made_is_one_line_before_anything_runs(state, capsys, command):
    blocker = write(state / "afile", "keep me\n")
    outdir = blocker / "sub"  # under a file: it cannot be created
    good = write(state / "good.diff", "+edge(3,4)\n")
    write(state / "facts0" / "edge.facts", "1\t2\n")
    write(state / "facts0" / "label.facts", "")
    args = (["update", str(state / "state"), "--insert", str(good)] if command == "update"
            else ["run", str(state / "p.dl"), "-F", str(state / "facts0")])
    current = StateDir(state / "state").current()
    with pytest.raises(SystemExit) as e:
        cli_main([*args, "-D", str(outdir)])
    assert e.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err == f"{outdir}: error: cannot create the output directory (Not a directory)"
    assert StateDir(state / "state").current() == current  # refused before the epoch ran
    assert blocker.read_text() == "keep me\n"


def test_spark_errors_are_not_logged_to_stderr_by_the_cli(spark, capfd):
    from pyspark.errors import AnalysisException

    from levelflow.cli.spark import quiet_pyspark_loggers

    quiet_pyspark_loggers()  # what run, update and shell do before Spark starts
    with pytest.raises(AnalysisException):
        spark.range(1).select("no_such_column")
    assert "QueryContextLogger" not in capfd.readouterr().err
