"""The command line's rules (issue 32, items 7 and 8): Ctrl-C at the shell's prompt cancels the
line, a failed run leaves no folder it made, the Python API takes run's options, the shell takes
update's, commands that write a file say so, and help describes each command's own flags."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
from pathlib import Path

import pytest

import levelflow
from levelflow.cli import main as cli_main
from levelflow.cli.shell_cmd import Shell
from levelflow.cli.spark import Interrupted, on_sigint
from levelflow.engine.incremental import IncrementalSession
from levelflow.errors import LevelflowError

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "tc"


def _cli(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        cli_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return e.value.code, out, err


class Keyboard:
    """Lines typed at a prompt; "^C" is Ctrl-C pressed while the prompt waits (a real SIGINT)."""

    def __init__(self, *lines: str) -> None:
        self.lines = list(lines)

    def readline(self) -> str:
        if not self.lines:
            return ""  # Ctrl-D
        line = self.lines.pop(0)
        if line == "^C":
            os.kill(os.getpid(), signal.SIGINT)  # handled as this call returns
        return line + "\n"


@pytest.fixture(scope="module")
def tc_session(spark):
    """One bootstrapped session of examples/tc for the shell's Ctrl-C tests (neither commits)."""
    session = IncrementalSession.bootstrap(spark, TC / "program.dl", TC / "facts")
    yield session
    session.close()


def test_ctrl_c_at_the_prompt_cancels_the_line_and_keeps_the_session(tc_session):
    session = tc_session
    size = session.size("path")
    previous = signal.signal(signal.SIGINT, on_sigint)  # as cli.main installs it
    Interrupted.seen = False
    out, err = io.StringIO(), io.StringIO()
    try:
        Shell(session, out, err, prompt=True).loop(Keyboard("^C", "size path", "^C", "exit",
                                                            "size path"))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert out.getvalue().count("KeyboardInterrupt") == 2
    assert out.getvalue().split("levelflow> ").count(f"{size}\n") == 1  # `exit` ended it
    assert not Interrupted.seen  # the JVM was not ended: the CLI would not say `aborted`
    assert session.size("path") == size and session.relation("path").count() == size


def test_ctrl_c_in_a_piped_script_still_ends_the_shell(tc_session):
    class Interrupting:
        def readline(self):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Shell(tc_session, io.StringIO(), io.StringIO(), source="<stdin>").loop(Interrupting())


def test_a_failed_run_removes_the_output_folder_it_made(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    code, out, err = _cli(["run", TC / "program.dl", "-F", TC / "facts", "-D",
                           tmp_path / "new" / "out", "--trace-out", tmp_path / "t" / "x.json",
                           "--master", f"spark://127.0.0.1:{port}"], capsys)
    assert code == 1 and "could not reach the Spark master" in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # neither new/out nor t/
    kept = tmp_path / "kept"
    kept.mkdir()
    code, _, _ = _cli(["run", TC / "program.dl", "-F", TC / "facts", "-D", kept,
                       "--master", f"spark://127.0.0.1:{port}"], capsys)
    assert code == 1 and kept.is_dir()  # a folder that was there stays


def test_the_python_api_takes_runs_options(spark, tmp_path):
    # A 3-cycle: the global plan runs a Spark job per round, few rounds on a short graph.
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "edge.facts").write_text("1\t2\n2\t3\n3\t1\n")
    forced = levelflow.run(TC / "program.dl", tmp_path / "f", tmp_path / "g", spark=spark,
                           plan="global", local_rows=10)
    auto = levelflow.run(TC / "program.dl", tmp_path / "f", spark=spark)
    path_task = [t.id for t in levelflow.load(TC / "program.dl").tasks if t.recursive][0]
    assert forced.task_stats[path_task].plan == "global"
    assert auto.task_stats[path_task].plan == "driver"  # 3 edges: in the driver
    assert forced.relation("path").count() == auto.relation("path").count() == 9
    with pytest.raises(LevelflowError, match="local_rows: must be a number of rows >= 0"):
        levelflow.run(TC / "program.dl", TC / "facts", spark=spark, local_rows=-5)
    with pytest.raises(LevelflowError, match="plan: must be one of"):
        levelflow.run(TC / "program.dl", TC / "facts", spark=spark, plan="fast")


@pytest.mark.parametrize("flags,fragment", [
    (["--jobs", "0"], "--jobs: must be a positive integer, got 0"),
    (["--keep-epochs", "0"], "--keep-epochs: must be a positive integer, got 0"),
    (["--strategy", "eager"], "--strategy: must be one of elastic, incremental, scratch"),
    (["--scheduler", "nope"], "--scheduler: unknown scheduler 'nope'"),
    (["--master", "local[x]"], "--master: not a Spark master URL: 'local[x]'"),
])
def test_shell_takes_updates_flags_and_refuses_bad_values_with_exit_2(tmp_path, capsys, flags,
                                                                      fragment):
    code, out, err = _cli(["shell", TC / "program.dl", "-F", TC / "facts", *flags], capsys)
    assert code == 2 and err.startswith(fragment) and err.count("\n") == 1, err


def test_help_names_only_the_flags_a_command_has(capsys):
    def help_of(command):
        code, out, _ = _cli([command, "--help"], capsys)
        assert code == 0
        return " ".join(out.replace("│", " ").split())

    update, shell = help_of("update"), help_of("shell")
    assert "Refuse an .output file outside -D" in update and "outside -F" not in update
    assert "Refuse an .input file outside -F" in shell and "outside -D" not in shell
    for flag in ("--strategy", "--scheduler", "--jobs", "--keep-epochs", "--switch"):
        assert flag in shell, flag
    run = help_of("run")
    assert "--plan distributed (its recursive tasks kept partitioned" in run
    assert "not another --plan or --checkpoint reliable" in run


def test_graph_dot_says_what_it_wrote(tmp_path, capsys):
    dot = tmp_path / "g.dot"
    code, out, err = _cli(["graph", TC / "program.dl", "--dot", dot], capsys)
    assert code == 0 and dot.read_text().startswith("digraph")
    assert f"DOT written to {dot} (3 tasks, 2 edges;" in out
    code, out, err = _cli(["graph", TC / "program.dl", "--json", "--dot", dot], capsys)
    assert code == 0 and json.loads(out)  # stdout is the JSON alone
    assert f"DOT written to {dot}" in err


def test_simulate_says_what_it_wrote(tmp_path, capsys):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({
        "format": "jobtrace/1", "name": "two", "processors": 1,
        "nodes": [{"id": "a", "duration": 1.0}, {"id": "b", "duration": 2.0}],
        "edges": [["a", "b"]], "initial": ["a"]}))
    code, out, err = _cli(["simulate", trace, "--schedule", tmp_path / "s.csv", "--gantt",
                           tmp_path / "g.png"], capsys)
    assert code == 0, err
    assert f"schedule written to {tmp_path / 's.csv'} (2 rows, levelbased)" in out
    assert f"Gantt chart written to {tmp_path / 'g.png'} (levelbased, 1 processors)" in out
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
