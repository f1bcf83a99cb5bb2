"""Start and end Spark for a CLI command: Java checked first, master bounded, Ctrl-C ends the JVM.

Constant: the checks run before any JVM starts. Changing: the JVM's Popen, known from the moment
it is launched, so that an abort at any point ends it (and everything in its process group).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from levelflow.errors import LevelflowError, UsageError

JAVA_MIN = 17
CONNECT_TIMEOUT = 5.0  # seconds to open a TCP connection to a remote master
# The master URLs Spark takes (SparkContext.createTaskScheduler); anything else would fail
# only once the JVM is up, as a Java exception.
_MASTER_FORMS = re.compile(
    r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?"
    r"|local-cluster\[\s*[1-9]\d*\s*,\s*[1-9]\d*\s*,\s*[1-9]\d*\s*\]"
    r"|spark://[^\s,:/]+(:\d+)?(,[^\s,:/]+(:\d+)?)*"
    r"|yarn|k8s://\S+")
MASTER_FORMS = "local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn or k8s://URL"
# Seconds a remote master gets to accept the application once the JVM is up; Spark itself
# retries for 60 s and then fails with a stopped context (LEVELFLOW_MASTER_TIMEOUT overrides).
REGISTER_TIMEOUT = 30.0
# Seconds a command waits for a JVM nothing used to end on SIGTERM.
JVM_GRACE = 0.1
# Seconds a JVM gets to end on SIGTERM after Ctrl-C before it is killed.
KILL_GRACE = 3.0
# Inputs of up to this many rows (or the driver's memory rows, where more) run in the driver,
# most likely: their command starts Spark only when a task needs it. Starting it anyway, in the
# background, cost a run of examples/tc 0.3-0.5 s of its 1.5-2 s (the JVM and PySpark's import
# compete with the driver's work for 2 cores and the GIL). Past it, the inputs may not fit the
# driver (engine/memory.py; a file's rows estimated from its size and first lines), or are
# many files.
EAGER_ROWS = 1 << 18
_MOST_ENTRIES = 10_000  # a folder with more is taken as large without reading it all


class SparkStartError(LevelflowError):
    """Spark could not start: no suitable Java, or the master could not be reached."""


class Interrupted:
    """Whether the user pressed Ctrl-C during this command (main() then says `aborted`), and the
    JVM to end at once when they do."""

    seen = False
    jvm: subprocess.Popen | None = None


def on_sigint(signum, frame) -> None:
    """SIGINT handler of the CLI: end the JVM now, remember the interrupt, raise
    KeyboardInterrupt."""
    Interrupted.seen = True
    silence_py4j()
    # At once, not when the exception gets there: unwinding waits on worker threads (a thread
    # pool's exit) that wait on Spark jobs, which only end when the JVM does.
    jvm = Interrupted.jvm
    if jvm is not None and jvm.poll() is None:
        try:
            os.killpg(jvm.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        # A JVM running jobs may take a minute of shutdown hooks on a loaded machine, and the
        # threads unwinding wait on its calls: past a grace it is killed (a handler must not
        # wait, so a thread does).
        threading.Thread(target=end_jvm, args=(jvm, KILL_GRACE), daemon=True,
                         name="levelflow-end-jvm").start()
    raise KeyboardInterrupt


def silence_py4j() -> None:
    """Mute Python-side logs and warnings for good: the JVM is being ended on purpose."""
    import warnings

    # py4j logs the interrupted call (and every call after the JVM is gone) with a traceback,
    # and PySpark warns that the JVM it can no longer reach did not shut down cleanly.
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    # The accumulator server (Python tasks report to it) prints a traceback when the JVM's
    # connection drops mid-report; the JVM is going away on purpose, so it has nothing to say.
    from pyspark import SparkContext

    server = getattr(SparkContext._active_spark_context, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, client_address: None


def java_command() -> tuple[str | None, str]:
    """Return (the java Spark's scripts will run or None, where it was looked for)."""
    home = os.environ.get("JAVA_HOME")
    if home:  # spark-class prefers $JAVA_HOME/bin/java over PATH
        java = Path(home) / "bin" / "java"
        return (str(java) if os.access(java, os.X_OK) else None), f"JAVA_HOME={home}"
    return shutil.which("java"), "PATH"


def check_java() -> None:
    """Return None if Java 17+ is there for Spark; else raise one line naming JAVA_HOME."""
    java, where = java_command()
    hint = f"set JAVA_HOME to a Java {JAVA_MIN}+ installation"
    if java is None:
        raise SparkStartError(f"levelflow: error: Spark needs Java {JAVA_MIN} or newer; no java "
                              f"found on {where} ({hint})")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30,
                             errors="replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SparkStartError(f"levelflow: error: {java} -version failed ({e}); {hint}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        raise SparkStartError(f"levelflow: error: {java} did not report a Java version; {hint}")
    major = int(m[2]) if m[1] == "1" else int(m[1])  # "1.8.0_x" is Java 8
    if major < JAVA_MIN:
        raise SparkStartError(f"levelflow: error: Spark needs Java {JAVA_MIN} or newer; {java} "
                              f"is Java {major} ({hint})")


def master_addresses(master: str) -> list[tuple[str, int]]:
    """Return the (host, port) pairs a remote master URL names; [] for local, yarn and the like."""
    if master.startswith("spark://"):  # spark://h1:7077,h2:7077 (standby masters)
        hosts = master[len("spark://"):].split(",")
        return [(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1]) if ":" in h else 7077)
                for h in hosts]
    if master.startswith("k8s://"):
        url = urlsplit(master[len("k8s://"):] if "://" in master[6:] else
                       "https://" + master[len("k8s://"):])
        return [(url.hostname or "", url.port or (443 if url.scheme == "https" else 80))]
    return []


def check_master_url(master: str) -> None:
    """Return None if `master` has the form of a Spark master URL; else raise a usage error."""
    if _MASTER_FORMS.fullmatch(master) is None:
        raise UsageError(f"--master: not a Spark master URL: {master!r} (use "
                         f"{MASTER_FORMS})")


def check_master(master: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Return None if `master` is a URL and some address of a remote one accepts a connection;
    else one line."""
    check_master_url(master)
    try:
        addresses = master_addresses(master)
    except ValueError:
        raise SparkStartError(f"levelflow: error: --master {master}: not a valid URL") from None
    why = ""
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except TimeoutError:
            why = f"no answer within {timeout:g} s"
        except OSError as e:
            why = e.strerror or str(e)
    if addresses:
        raise SparkStartError(f"levelflow: error: could not reach the Spark master {master} "
                              f"({why})")


@contextmanager
def deferred_sigint():
    """Hold Ctrl-C while the JVM is being launched (its Popen is not ours yet); yield a flag."""
    pending: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:  # e.g. under nohup: the user asked not to be interrupted
        yield pending
        return

    def hold(signum, frame):
        Interrupted.seen = True
        pending.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        yield pending
    finally:
        signal.signal(signal.SIGINT, previous)


def end_jvm(proc, grace: float = 3.0) -> None:
    """End the JVM `proc` and its process group: TERM (Spark removes its temp files), then KILL."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def quiet_pyspark_loggers() -> None:
    """Silence PySpark's and py4j's Python-side loggers: a failed run is reported in one line."""
    import warnings

    from pyspark.logger import PySparkLogger

    # PySpark warns about the installed pandas at start-up; levelflow does not use pandas.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True
    # py4j logs every broken connection once the JVM is gone (after Ctrl-C or a timeout).
    logging.getLogger("py4j").addHandler(logging.NullHandler())
    logging.getLogger("py4j").propagate = False
    # ... and a failed send on the root logger itself (`logging.exception`), which sets up a
    # stderr handler for it: a traceback above the one line when the JVM is ended mid-call.
    logging.getLogger().addFilter(_not_py4j)


def _not_py4j(record: logging.LogRecord) -> bool:
    return f"{os.sep}py4j{os.sep}" not in record.pathname


def register_timeout() -> float:
    """Return the seconds a remote master gets to accept the application (env may override)."""
    try:
        return float(os.environ.get("LEVELFLOW_MASTER_TIMEOUT", REGISTER_TIMEOUT))
    except ValueError:
        return REGISTER_TIMEOUT


def _log_tail(log: Path) -> str:
    """Return the last line of the JVM's log that says something (why it failed to start)."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    # The JVM's generic last words and start-up notes say nothing about the cause.
    generic = ("at ", "...", "Error: Could not create the Java", "Error: A fatal exception",
               "WARNING: Using incubator modules", "Setting default log level",
               "To adjust logging level", "Picked up JAVA_TOOL_OPTIONS",
               "Picked up _JAVA_OPTIONS")
    lines = [ln for ln in lines if ln and not ln.startswith(generic)]
    return lines[-1][:200] if lines else ""


def _launch(conf, log: Path, launched=None):
    """Return the JVM's gateway, launched with Ctrl-C held; a JVM that dies is one line.
    `launched(proc)` is told the JVM's Popen as soon as it exists."""
    from levelflow.engine.session import launch_jvm

    with deferred_sigint() as pending:
        try:
            gateway = launch_jvm(conf, log, launched)
        except Exception:  # JAVA_GATEWAY_EXITED: the JVM refused its options, or crashed
            raise SparkStartError(f"levelflow: error: Spark's JVM did not start: "
                                  f"{_log_tail(log) or 'no reason given'}") from None
    if pending:
        end_jvm(gateway.proc)
        raise KeyboardInterrupt
    return gateway


def _start(conf, master: str, log: Path, launched=None):
    """Return (SparkSession, JVM Popen); a remote master gets register_timeout() to answer.

    The SparkContext is made on a helper thread: PySpark then leaves SIGINT alone (its own
    handler calls into py4j from inside a py4j call), and the wait for it is ours to bound.
    """
    from levelflow.engine.session import session_on

    proc = (gateway := _launch(conf, log, launched)).proc
    Interrupted.jvm = proc
    made: dict = {}

    def make():
        try:
            made["spark"] = session_on(gateway, conf)
        except BaseException as e:  # handed to the main thread
            made["error"] = e

    worker = threading.Thread(target=make, name="levelflow-spark-context", daemon=True)
    worker.start()
    try:
        worker.join(register_timeout() if master_addresses(master) else None)
    except KeyboardInterrupt:
        end_jvm(proc)
        raise
    if worker.is_alive():
        end_jvm(proc, 0.0)
        raise SparkStartError(f"levelflow: error: the Spark master {master} did not accept "
                              f"the application within {register_timeout():g} s")
    if "error" in made:
        end_jvm(proc)
        why = _log_tail(log) or (str(made["error"]).strip().splitlines() or ["no reason given"])[0]
        raise SparkStartError(f"levelflow: error: Spark did not start on {master}: {why[:200]}")
    return made["spark"], proc


class _Launch:
    """A command's JVM as its background start launches it, so that the command can end it at
    any point: before the launch (it never happens), during it, or once it is up."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.proc: subprocess.Popen | None = None
        self.launching = self.ended = False

    def begin(self) -> None:
        """Say the launch starts now; raise SparkStartError if the command has ended."""
        with self.cond:
            if self.ended or Interrupted.seen:  # Ctrl-C: no JVM to launch
                raise SparkStartError("levelflow: error: the command ended before Spark started")
            self.launching = True

    def told(self, proc: subprocess.Popen) -> None:
        """Take the JVM's Popen the moment it exists: from now on Ctrl-C ends it."""
        with self.cond:
            self.proc = Interrupted.jvm = proc
            self.cond.notify_all()
        if self.ended or Interrupted.seen:  # the command is over, or Ctrl-C came meanwhile
            _terminate(proc)

    def end(self, wait: bool = True) -> None:
        """End the JVM: launched or about to be (its Popen is a few calls away), or never."""
        with self.cond:
            self.ended = True
            if self.launching:
                self.cond.wait_for(lambda: self.proc is not None, timeout=10.0)
            proc = self.proc
        if proc is None:
            return
        silence_py4j()
        if wait:
            end_jvm(proc)
        else:
            _terminate(proc)


def _terminate(proc: subprocess.Popen) -> None:
    """Send the JVM's process group SIGTERM and wait a moment: a JVM ends on it, and Spark's
    hooks remove its temp files (SIGKILL would leave them); this process need not wait for
    that, and the JVM is not left behind (its start, if not over, ends too)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=JVM_GRACE)
    except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
        pass


def inputs_are_large(paths, recursive: bool = False) -> bool:
    """Return whether the files at `paths` (files, or folders' files; their subfolders' too
    if `recursive`) pass what the driver holds: a command over them likely needs Spark."""
    from levelflow.engine.memory import estimated_lines, memory_rows

    most = max(EAGER_ROWS, memory_rows())
    total = entries = 0
    folders = []
    for p in paths:
        try:
            if os.path.isdir(p):
                folders.append(p)
            else:
                total += estimated_lines(p)
        except OSError:  # missing: the command says so itself
            continue
    while folders and total <= most and entries <= _MOST_ENTRIES:
        try:
            with os.scandir(folders.pop()) as listing:
                for entry in listing:
                    entries += 1
                    if entry.is_file():
                        total += estimated_lines(entry.path)
                    elif recursive and entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
        except OSError:
            continue
    return total > most or entries > _MOST_ENTRIES


@contextmanager
def spark_session(master: str, driver_memory: str, log: Path, clock=None, eager: bool = True):
    """Yield a session.DeferredSession for a CLI command: Spark starts at once on a background
    thread if `eager` (else when first needed), and whatever first needs it waits for it; work
    that needs none (the driver plan) never waits. Ctrl-C or an error ends its JVM; a session
    in use is stopped at the end, and a JVM nothing used is ended without waiting for it to
    come up.

    Java and a remote master are checked (on that thread) before the JVM starts; a failure is
    raised, as one line, where Spark is first needed. The JVM writes to `log`. The time the
    command waited for Spark counts as `clock`'s part "Spark start" (cli.timing.WallClock).
    """
    from levelflow.engine.session import DeferredSession, spark_conf

    jvm, external = _Launch(), "PYSPARK_GATEWAY_PORT" in os.environ

    def make():
        check_java()
        check_master(master)
        quiet_pyspark_loggers()
        conf = spark_conf(master, driver_memory=driver_memory)
        if not external:  # PySpark launches none for a gateway already there
            jvm.begin()
        return _start(conf, master, log, jvm.told)[0]

    # A JVM this command does not own (PYSPARK_GATEWAY_PORT, as under spark-submit) gets a
    # SparkContext only if something needs one: one the command left behind would refuse the
    # next command's.
    deferred = DeferredSession(make, clock, start=eager and not external, master=master)
    try:
        try:
            yield deferred
        except BaseException:
            jvm.end()  # spark.stop() could wait on jobs still running
            raise
        spark = deferred.made()
        if spark is not None and (deferred.in_use or jvm.proc is None):
            spark.stop()  # the JVM itself exits when this process does (its stdin closes)
        else:  # nothing needed Spark: not worth waiting for
            jvm.end(wait=False)
    finally:
        Interrupted.jvm = None
