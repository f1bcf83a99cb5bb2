"""Shared fixtures: one SparkSession for the whole test run, started only if a test asks."""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

# Off a terminal a command says what it does once a phase passes 5 s (engine/progress.py); on
# a loaded machine that would add lines to the stderr the tests read. Their commands, in this
# process or in subprocesses, wait an hour; tests/test_progress_lines.py tests the lines.
os.environ.setdefault("LEVELFLOW_PHASE_SECONDS", "3600")

# Every JVM the tests start (the shared session, each command run as a subprocess, the
# standalone cluster's) runs tiny jobs: C1-only JIT and the serial GC cut the CPU a JVM start
# costs (test_cli_spark, test_spark_smoke, test_run and test_cluster: 248 s -> 148 s on 2
# cores). A user's own JAVA_TOOL_OPTIONS is kept.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# Python keeps the bytecode it compiles, even where the environment says not to: every command
# a test runs as a subprocess otherwise compiled levelflow's modules anew (1-1.7 s a process on
# a loaded 2-core machine). The files go to __pycache__ folders, which .gitignore names.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Under pytest-xdist each worker gets its own temporary folder: what levelflow keeps per user
# there (resident shares, Spark's log, the log4j settings) is then per test process.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _tmp = Path(tempfile.gettempdir()) / f"levelflow-tests-{os.getpid()}"
    _tmp.mkdir(mode=0o700, exist_ok=True)
    os.environ["TMPDIR"] = str(_tmp)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


@pytest.fixture(scope="session")
def spark():
    """Return the one SparkSession the tests share (local[2], one shuffle partition)."""
    from levelflow.engine.session import make_session

    # C1-only JIT and the serial GC start the JVM faster; tests run tiny jobs.
    session = make_session(master="local[2]", shuffle_partitions=1, driver_memory="1g",
                           app_name="levelflow-tests",
                           java_options="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    yield session
    session.stop()


@pytest.fixture
def cli_spark(spark, monkeypatch):
    """Make the CLI's commands run on the tests' session in this process; return it.

    A command in a subprocess starts a JVM of its own (5-10 s each); a test of what a command
    does needs none. The JVM's own start (Java checks, the master, Ctrl-C) is tested in
    subprocesses in tests/test_cli_spark.py.
    """
    from pyspark import SparkContext

    import levelflow.cli.spark as cli_spark_module
    from levelflow.engine.session import DeferredSession

    @contextmanager
    def tests_session(master, driver_memory, log, clock=None, eager=True):
        # As a command's own session is until it is made (cli.spark.spark_session): a column
        # function called before anything asked for the session fails as it would there.
        active = SparkContext._active_spark_context
        SparkContext._active_spark_context = None

        def make():
            SparkContext._active_spark_context = active
            return spark

        try:
            yield DeferredSession(make, clock, start=False)  # and not stopped: tests share it
        finally:
            SparkContext._active_spark_context = active

    monkeypatch.setattr(cli_spark_module, "spark_session", tests_session)
    return spark


@pytest.fixture
def cli(capsys):
    """Return a function that runs `levelflow ARGV` in this process: (exit code, out, err)."""
    from levelflow.cli import main

    def run(argv) -> tuple[int, str, str]:
        capsys.readouterr()  # what came before is not this command's
        with pytest.raises(SystemExit) as e:
            main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return e.value.code, out, err

    return run


@pytest.fixture
def no_spark(monkeypatch):
    """Make the CLI's commands run with a Spark that cannot start: asking for it fails the test."""
    import levelflow.cli.spark as cli_spark_module
    from levelflow.engine.session import DeferredSession

    def broken():
        raise AssertionError("Spark was asked for")

    @contextmanager
    def never(master, driver_memory, log, clock=None, eager=True):
        yield DeferredSession(broken)

    monkeypatch.setattr(cli_spark_module, "spark_session", never)
