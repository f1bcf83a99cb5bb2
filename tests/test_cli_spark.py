"""The CLI's Spark start-up: Java checked first, a remote master bounded, Ctrl-C ends the JVM.

The commands that start (or would start) a JVM run in a subprocess: what is tested is the JVM's
start and end. Checks made before any JVM starts, and what main() says of a failure after
Ctrl-C, run in this process.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from levelflow.cli.spark import Interrupted, SparkStartError, check_java, master_addresses
from levelflow.errors import LevelflowError

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "tc"


def _env(**changes) -> dict:
    """Return this process's environment with `changes` (None removes a variable)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS="200")
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _levelflow(args, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "levelflow", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=ROOT)


def _run_args(tmp_path, *extra) -> list[str]:
    # A forced plan: examples/tc's tasks would run in the driver, never waiting for Spark.
    # Quiet: a phase line past 5 s (a slow JVM) would precede the error line.
    return ["run", str(TC / "program.dl"), "-F", str(TC / "facts"), "-D", str(tmp_path / "o"),
            "--driver-memory", "1g", "--plan", "local", "-q", *extra]


def _fake_java(tmp_path, version_line: str) -> Path:
    """Return a JAVA_HOME whose bin/java reports `version_line` as `java -version` does."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(0o755)
    return home


# ---------------------------------------------------------------------------------------------
# Java


def test_no_java_is_one_line_naming_java_home(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out, err = cli(_run_args(tmp_path))  # refused before a JVM would start
    assert code == 1
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "Java 17 or newer" in err and "JAVA_HOME" in err
    assert out == ""


def test_java_home_without_java_is_named(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojdk"))
    code, _, err = cli(_run_args(tmp_path))
    assert code == 1 and err.count("\n") == 1
    assert f"JAVA_HOME={tmp_path / 'nojdk'}" in err


@pytest.mark.parametrize("line, major", [('openjdk version "11.0.2" 2019-01-15', 11),
                                         ('java version "1.8.0_292"', 8)])
def test_old_java_is_refused_with_its_version(tmp_path, monkeypatch, line, major):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, line)))
    with pytest.raises(SparkStartError, match=f"is Java {major} .*JAVA_HOME"):
        check_java()


def test_java_17_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, 'openjdk version "17.0.15" x')))
    assert check_java() is None


def test_a_jvm_that_refuses_its_options_is_one_line_with_its_reason(tmp_path):
    proc = _levelflow(_run_args(tmp_path, "--driver-memory", "lots"), _env())
    assert proc.returncode == 1
    assert proc.stderr == ("levelflow: error: Spark's JVM did not start: Invalid maximum heap "
                           "size: -Xmxlots\n")


# ---------------------------------------------------------------------------------------------
# The master


def test_master_urls_name_their_addresses():
    assert master_addresses("local[*]") == [] and master_addresses("yarn") == []
    assert master_addresses("spark://a:7000,b") == [("a", 7000), ("b", 7077)]
    assert master_addresses("k8s://https://api.example:6443") == [("api.example", 6443)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_master_is_one_line_before_spark_starts(tmp_path):
    url = f"spark://127.0.0.1:{_free_port()}"  # nothing listens there
    t0 = time.monotonic()
    proc = _levelflow(_run_args(tmp_path, "--master", url), _env())
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"could not reach the Spark master {url}" in proc.stderr
    assert time.monotonic() - t0 < 30  # no JVM was started for it


def test_silent_master_gives_up_in_bounded_time(tmp_path):
    # A port that accepts connections but never answers: Spark alone retries for 60 s.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held = []
    threading.Thread(target=lambda: held.extend(server.accept() for _ in range(8)),
                     daemon=True).start()
    url = f"spark://127.0.0.1:{server.getsockname()[1]}"
    t0 = time.monotonic()
    try:
        proc = _levelflow(_run_args(tmp_path, "--master", url),
                          _env(LEVELFLOW_MASTER_TIMEOUT="2"), timeout=120)
    finally:
        server.close()
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"the Spark master {url} did not accept the application within 2 s" in proc.stderr
    assert time.monotonic() - t0 < 60


# ---------------------------------------------------------------------------------------------
# Ctrl-C


def _children(pid: int) -> list[int]:
    """Return the pids whose parent is `pid` (Linux /proc)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _long_facts(tmp_path) -> Path:
    """Return a fact directory for examples/tc on which the run takes minutes: a long chain."""
    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "edge.facts").write_text("".join(f"{i}\t{i + 1}\n" for i in range(3000)))
    return facts


def _tgkill(pid: int, tid: int, sig: int) -> None:
    """Send `sig` to thread `tid` of process `pid` (glibc's tgkill)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


def _interrupt(args: list[str], after: float, other_thread: bool = False, jvm: bool = True):
    """Run levelflow, send SIGINT `after` s past the JVM's start (past the process's start if
    not `jvm`; to a thread other than the main one if `other_thread`: the kernel may pick any);
    return (rc, out, err, JVM pids, seconds to react)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "levelflow", *args], cwd=ROOT, env=_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Background jobs start with SIGINT ignored; a terminal's foreground job does not.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    kids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while jvm and not (kids := _children(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert kids or not jvm, "the JVM never started"
        time.sleep(after)
        kids = kids or _children(proc.pid)
        t0 = time.monotonic()
        if other_thread:  # the newest thread: a worker, busy or waiting
            tid = max(int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir())
            _tgkill(proc.pid, tid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        reacted = time.monotonic() - t0
    finally:  # a failed test must not leave its JVM behind either
        proc.kill()
        for k in kids:
            if _alive(k) and b"spark" in Path(f"/proc/{k}/cmdline").read_bytes():
                os.kill(k, signal.SIGKILL)
    return proc.returncode, out, err, kids, reacted


def _assert_aborted(rc: int, err: str, kids: list[int], reacted: float) -> None:
    assert rc == 130, err
    assert err == "levelflow: aborted\n"
    deadline = time.monotonic() + 15
    while any(_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(k) for k in kids)
    assert reacted < 30


@pytest.mark.parametrize("after, state", [
    (0.0, False),   # the JVM is still being launched
    (5.0, True),    # Spark is starting or the program runs, under --state
])
def test_ctrl_c_ends_the_jvm_and_says_aborted(tmp_path, after, state):
    # --master: Spark starts with the command (tiny inputs alone would start it when needed).
    args = ["run", str(TC / "program.dl"), "-F", str(_long_facts(tmp_path)),
            "-D", str(tmp_path / "o"), "--driver-memory", "1g", "--master", "local[2]"]
    args += ["--state", str(tmp_path / "st")] if state else []
    rc, out, err, kids, reacted = _interrupt(args, after)
    _assert_aborted(rc, err, kids, reacted)
    assert "ran " not in out


def test_ctrl_c_during_an_update_in_the_driver_ends_it_and_leaves_the_state(spark, tmp_path):
    from levelflow.engine.incremental import IncrementalSession
    from levelflow.engine.incremental.state.directory import StateDir

    # The state `run --state` makes, made here: only the update needs a JVM of its own.
    IncrementalSession.bootstrap(spark, TC / "program.dl", TC / "facts", tmp_path / "st").close()
    diff = tmp_path / "chain.diff"
    diff.write_text("".join(f"+edge({i},{i + 1})\n" for i in range(100, 3100)))
    # The update runs in the driver for a minute while the main thread waits on it; the signal
    # goes to another thread, as the kernel may choose: the main thread must still see it. A
    # state this small starts no JVM unless a task needs Spark.
    rc, out, err, kids, reacted = _interrupt(
        ["update", str(tmp_path / "st"), "--insert", str(diff), "--driver-memory", "1g"], 8.0,
        other_thread=True, jvm=False)
    _assert_aborted(rc, err, kids, reacted)
    assert kids == []
    assert StateDir(tmp_path / "st").current() == 0  # no epoch half-written


class _Failing:
    """A command that fails with `error`, Ctrl-C having been seen (`seen`) or not."""

    def __init__(self, error: BaseException, seen: bool) -> None:
        self.error, self.seen = error, seen

    def main(self, **kwargs):
        Interrupted.seen = self.seen
        raise self.error


def _main_failing(monkeypatch, error: BaseException, seen: bool) -> None:
    """Run cli.main in this process with a command that fails; its os._exit raises SystemExit.

    No JVM is involved: what is checked is what main() says. That `aborted` really ends the
    process with 130 is checked above, on real processes.
    """
    import levelflow.cli as cli

    def exit_now(code):
        raise SystemExit(code)

    monkeypatch.setattr(Interrupted, "seen", False)  # restored after the test
    monkeypatch.setattr(cli, "humanize", lambda command: _Failing(error, seen))
    monkeypatch.setattr(cli.os, "_exit", exit_now)
    cli.main([])


@pytest.mark.parametrize("error", [
    RuntimeError("py4j.reflection does not exist in the JVM"),  # py4j converting an error
    OSError(111, "Connection refused"),
    LevelflowError("levelflow: error: read failed"),
], ids=["py4j", "oserror", "levelflow"])
def test_any_failure_after_ctrl_c_says_aborted_and_nothing_else(monkeypatch, capsys, error):
    with pytest.raises(SystemExit) as e:
        _main_failing(monkeypatch, error, seen=True)
    assert (e.value.code, capsys.readouterr().err) == (130, "levelflow: aborted\n")


def test_a_failure_without_ctrl_c_is_not_called_aborted(monkeypatch, capsys):
    with pytest.raises(RuntimeError, match="a bug"):  # the bug's traceback, exit 1
        _main_failing(monkeypatch, RuntimeError("a bug"), seen=False)
    assert "aborted" not in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# A run in the driver


def _writers_of(log: Path) -> list[int]:
    """Return the pids whose stdout is `log` (the JVM the CLI launched writes there)."""
    pids = []
    for fd in Path("/proc").glob("[0-9]*/fd/1"):
        try:
            if os.readlink(fd) == str(log):
                pids.append(int(fd.parent.parent.name))
        except OSError:
            continue
    return pids


def test_a_run_in_the_driver_ends_without_waiting_for_the_jvm_and_leaves_none(tmp_path):
    # Spark starts on a background thread as the command starts; every task of examples/tc
    # runs in the driver, so the command ends the JVM (launched or not yet) and exits.
    log = tmp_path / "jvm.log"
    proc = _levelflow(["run", str(TC / "program.dl"), "-F", str(TC / "facts"), "-D",
                       str(tmp_path / "o"), "--spark-log", str(log), "--trace-out",
                       str(tmp_path / "t.json")], _env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ran 3 of 3 tasks") and "Spark start" not in proc.stdout
    assert (tmp_path / "o" / "path.csv").read_text().count("\n") == 306
    import json

    nodes = json.loads((tmp_path / "t.json").read_text())["nodes"]
    assert {(n["plan"], n["spark_jobs"]) for n in nodes} == {("driver", 0)}
    deadline = time.monotonic() + 10
    while _writers_of(log) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _writers_of(log) == []


def test_spark_starts_with_the_command_only_for_inputs_past_what_the_driver_holds(
        tmp_path, monkeypatch):
    from levelflow.cli.spark import EAGER_ROWS, inputs_are_large
    from levelflow.engine import memory

    # A machine with little memory: the driver holds DRIVER_ROWS rows, below EAGER_ROWS.
    monkeypatch.setattr(memory, "available_memory", lambda: 1 << 20)
    facts = tmp_path / "facts"
    (facts / "deep").mkdir(parents=True)
    (facts / "edge.facts").write_bytes(b"1\t2\n" * 100)
    assert not inputs_are_large([facts]) and not inputs_are_large([tmp_path / "missing"])
    # Parquet is taken at 4 bytes a row at least
    (facts / "deep" / "big.parquet").write_bytes(b"x" * (EAGER_ROWS * memory.BYTES_PER_LINE + 4))
    assert not inputs_are_large([facts])  # a fact folder's own files only
    assert inputs_are_large([facts], recursive=True)  # a state's epochs are subfolders
    assert inputs_are_large([facts / "deep" / "big.parquet", facts / "edge.facts"])
    # A text file's rows are estimated from its lines: 4 MB of 40-byte lines is 100k rows,
    # where 4 bytes a line made it 1M and started a JVM for a task the driver runs.
    (facts / "wide.facts").write_bytes((b"%019d\t%019d\n" % (1, 2)) * 100_000)
    assert not inputs_are_large([facts / "wide.facts"])
    (facts / "wide.facts").write_bytes((b"%019d\t%019d\n" % (1, 2)) * (EAGER_ROWS + 1_000))
    assert inputs_are_large([facts / "wide.facts"])
    # With memory for 10M rows in the driver, those run there: Spark waits.
    monkeypatch.setattr(memory, "available_memory", lambda: 10_000_000 * 2 * memory.BYTES_PER_ROW)
    assert not inputs_are_large([facts], recursive=True)
    (facts / "deep" / "big.parquet").write_bytes(b"x" * (10_000_000 * memory.BYTES_PER_LINE + 4))
    assert inputs_are_large([facts], recursive=True)


def test_a_forced_global_plan_waits_for_the_session_before_its_first_column(tmp_path):
    # Spark starts on a background thread; the global plan builds inline facts with Column
    # functions (F.lit), which need the session made: it used to fail with an AssertionError
    # whenever the JVM was not up yet.
    prog = tmp_path / "p.dl"
    prog.write_text(".decl e(x:number, y:number)\ne(1, 2). e(2, 3).\n"
                    ".decl p(x:number, y:number)\n.output p\n"
                    "p(x, y) :- e(x, y).\np(x, z) :- p(x, y), e(y, z).\n")
    proc = _levelflow(["run", str(prog), "-D", str(tmp_path / "o"), "--plan", "global", "-q",
                       "--driver-memory", "1g"], _env())
    assert proc.returncode == 0, proc.stderr
    rows = sorted((tmp_path / "o" / "p.csv").read_text().splitlines())
    assert rows == ["1\t2", "1\t3", "2\t3"]
