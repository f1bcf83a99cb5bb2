"""Build a SparkSession tuned for iterative fixpoints (see shared notes on local Spark)."""

from __future__ import annotations

import builtins
import contextlib
import os
import sys
import tempfile
import threading
import weakref
from pathlib import Path

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _log4j_file() -> Path:
    """Return a log4j2 properties file that keeps Spark at ERROR (written once per user)."""
    path = Path(tempfile.gettempdir()) / f"levelflow-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        path.write_text(_LOG4J)
    return path


def _loopback_master(master: str) -> bool:
    """Return True for a standalone master URL on the loopback interface (spark://127.0.0.1:P)."""
    if not master.startswith("spark://"):
        return False
    hosts = [h.rsplit(":", 1)[0] for h in master[len("spark://"):].split(",")]
    return all(h in ("127.0.0.1", "localhost") for h in hosts)


POLARS_THREADS = "spark.executorEnv.POLARS_MAX_THREADS"


def spark_conf(master: str = "local[*]", shuffle_partitions: int = 2, driver_memory: str = "2g",
               app_name: str = "levelflow", java_options: str = "", extra: dict | None = None):
    """Return the SparkConf make_session starts Spark with: quiet logs, no UI, few partitions."""
    from pyspark import SparkConf

    # Python workers run PYSPARK_PYTHON, "python3" on PATH by default: outside an activated
    # virtual environment that interpreter lacks levelflow, pyarrow and polars.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    java_opts = f"-Dlog4j2.configurationFile=file:{_log4j_file()} {java_options}".strip()
    conf = (
        SparkConf().setMaster(master).setAppName(app_name)
        .set("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .set("spark.default.parallelism", str(max(shuffle_partitions, 1)))
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.driver.memory", driver_memory)
        .set("spark.scheduler.mode", "FAIR")
        .set("spark.sql.adaptive.enabled", "true")
        # A union of one-partition inputs must stay one partition each: the partitioned plan's
        # shares are such a union, and Spark 4 otherwise zips them into a single partition
        # (one Python worker running every share in turn).
        .set("spark.sql.unionOutputPartitioning", "false")
        # The executor talks to its Python workers over a Unix socket, not TCP: on TCP a task's
        # command and its input arrive in small writes that Nagle's algorithm holds until the
        # worker's delayed ACK (40 ms), which doubled every Python job (79 -> 37 ms idle).
        .set("spark.python.unix.domain.socket.enabled", "true")
        # Python workers are pooled per environment, and Spark adds this variable to SQL's
        # (mapInArrow: a from-scratch run) but not to an RDD job's (an arranged epoch): the
        # first epoch after a bootstrap started a second pool, its interpreters importing
        # everything anew (1-3 s of a 0.3 s epoch). The same variable on both: one pool.
        .set("spark.executorEnv.SPARK_SIMPLIFIED_TRACEBACK", "1")
        # A task's result above this goes through the block manager, an extra fetch: an
        # epoch's change of 30k-300k tuples (1-10 MB) came back 30-50% slower that way.
        .set("spark.task.maxDirectResultSize", "32m")
        .set("spark.driver.extraJavaOptions", java_opts)
        .set("spark.executor.extraJavaOptions", java_opts)
    )
    if master.startswith("local") or _loopback_master(master):
        # Local runs bind to loopback; so does a standalone master on this host (its executors
        # connect back to 127.0.0.1). A remote master must reach the driver: leave it alone.
        conf.set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
    for key, value in (extra or {}).items():
        conf.set(key, str(value))
    if not master.startswith("local") and not conf.contains(POLARS_THREADS):
        # A task on a cluster owns spark.task.cpus cores (Spark sets OMP_NUM_THREADS so for its
        # Python workers, SPARK-42613); Polars' pool would take every core of the host, so one
        # executor's evaluation already ran on the cores meant for the others (a standalone
        # 10M-edge reachability: 2 one-core workers no faster than 1).
        conf.set(POLARS_THREADS, conf.get("spark.task.cpus", "1"))
    return conf


def default_jvm_log() -> Path:
    """Return where the JVM's own output goes unless asked otherwise (one file per user)."""
    return Path(tempfile.gettempdir()) / f"levelflow-spark-{os.getuid()}.log"


def launch_jvm(conf, jvm_log: str | Path | None = None, launched=None):
    """Start Spark's JVM for `conf`; return its py4j gateway (`.proc` is the JVM's Popen).

    The JVM writes its start-up noise ("Using incubator modules", log lines) to `jvm_log`, not to
    the terminal; it gets a session of its own so that it can be ended with its whole group.
    `launched(proc)` is told the JVM's Popen as soon as it exists (PySpark hands it over only
    once the JVM answers, seconds later): a command that ends first can end the JVM.
    """
    from pyspark import java_gateway

    path = Path(jvm_log) if jvm_log is not None else default_jvm_log()
    popen = java_gateway.Popen
    if launched is not None:
        class Told(popen):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                launched(self)

        java_gateway.Popen = Told  # one JVM per process: nothing else launches meanwhile
    try:
        with open(path, "wb") as log:  # Popen duplicates the descriptor: ours can close now
            return java_gateway.launch_gateway(
                conf, popen_kwargs={"stderr": log, "stdout": log, "start_new_session": True})
    finally:
        java_gateway.Popen = popen


def session_on(gateway, conf):
    """Return a SparkSession whose SparkContext runs on an already launched `gateway`."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    SparkContext(conf=conf, gateway=gateway)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def make_session(master: str = "local[*]", shuffle_partitions: int = 2,
                 driver_memory: str = "2g", app_name: str = "levelflow", java_options: str = "",
                 extra: dict | None = None, jvm_log: str | Path | None = None):
    """Return a SparkSession for `master` with quiet logs, no UI and few shuffle partitions.

    Spark's JVM writes its own output to `jvm_log` (default: `default_jvm_log()`); pass
    "/dev/stderr" to see it. An already running SparkContext is reused as it is.
    """
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    conf = spark_conf(master, shuffle_partitions, driver_memory, app_name, java_options, extra)
    if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        return session_on(launch_jvm(conf, jvm_log), conf)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


_SCHEDULERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # SparkContext -> its


def jobs_started(spark) -> int:
    """Return how many Spark jobs the session has started, in every job group."""
    try:  # the scheduler's job id counter: jobs of every thread and group
        sc = spark.sparkContext
        if sc not in _SCHEDULERS:  # kept: then one py4j call a read, not three
            _SCHEDULERS[sc] = sc._jsc.sc().dagScheduler()
        return int(_SCHEDULERS[sc].nextJobId())
    except Exception:  # noqa: BLE001 - no JVM gateway (Spark Connect): jobs outside groups
        ids = spark.sparkContext.statusTracker().getJobIdsForGroup()
        return max(ids) + 1 if ids else 0


class _PysparkGate:
    """While one thread imports PySpark, hold other threads' `import pyspark...` until it is
    done. Many modules import PySpark lazily, on whichever thread first needs it, and two
    threads importing it at once break its circular imports ("cannot import name 'SQLContext'
    from partially initialized module", or a _DeadlockError). Import locks are taken before
    any meta-path finder runs, so the wait wraps `__import__` itself, only for that while."""

    def __init__(self, owner: threading.Thread) -> None:
        self.owner = owner
        self.done = threading.Event()
        self._import = builtins.__import__
        builtins.__import__ = self._held  # now, before the owner can start importing

    def _held(self, name, *args, **kwargs):
        if (name.partition(".")[0] == "pyspark" and not self.done.is_set()
                and threading.current_thread() is not self.owner):
            self.done.wait()
        return self._import(name, *args, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        if builtins.__import__ is self._held:
            builtins.__import__ = self._import


class DeferredSession:
    """A SparkSession that `make()` builds on a background thread, started at once; any
    attribute waits for it. Work that needs no Spark (the driver plan) never waits, and
    `in_use` says whether anything asked for the session; `waited` is how long callers waited
    for it (also counted as `clock`'s part "Spark start", cli.timing.WallClock)."""

    def __init__(self, make, clock=None, start: bool = True, master: str | None = None) -> None:
        self.master = master  # the URL it will start on, known before it starts (master_of)
        self._made = threading.Event()
        self._session = self._error = None
        self._clock = clock
        self.in_use = False
        self.waited = 0.0
        self._thread = threading.Thread(target=self._build, args=(make,),
                                        name="levelflow-spark-start", daemon=True)
        self._start_lock = threading.Lock()
        _deferred[0] = weakref.ref(self)  # columns_ready() makes it
        if start:  # else on first use
            self._start()

    def _start(self) -> None:
        self._gate = _PysparkGate(self._thread) if "pyspark" not in sys.modules else None
        self._thread.start()

    def _build(self, make) -> None:
        try:
            if self._gate is not None:
                with self._gate:
                    import pyspark.sql  # noqa: F401 - first, while other threads' imports wait
            self._session = make()
        except BaseException as e:  # noqa: BLE001 - handed to whoever asks for the session
            self._error = e
        finally:
            self._made.set()

    def get(self):
        """Return the SparkSession once started; raise what stopped it from starting."""
        self.in_use = True
        with self._start_lock:
            if self._thread.ident is None:
                self._start()
        if not self._made.is_set():
            import time

            t0 = time.perf_counter()
            self._made.wait()
            self.waited += time.perf_counter() - t0
            if self._clock is not None:
                self._clock.add("Spark start", time.perf_counter() - t0)
        if self._error is not None:
            raise self._error
        hook = getattr(_first_use, "hook", None)
        if hook is not None:  # this thread's first use: it sets its Spark properties now
            _first_use.hook = None
            hook(self._session)
        return self._session

    def made(self):
        """Return the SparkSession if it has started (without waiting), else None."""
        return self._session if self._made.is_set() else None

    def __getattr__(self, name: str):
        return getattr(self.get(), name)


def master_of(spark) -> str | None:
    """Return the session's master URL, without starting a deferred session (None: unknown)."""
    if isinstance(spark, DeferredSession):  # known before it starts
        return spark.master
    from pyspark.sql import SparkSession

    return spark.sparkContext.master if isinstance(spark, SparkSession) else None


def on_local_master(spark) -> bool:
    """Return whether `spark` runs, or will run, on a local master (an unknown one is taken
    for the embedded local master)."""
    master = master_of(spark)
    return master is None or master.startswith("local")


_deferred: list = [lambda: None]  # the newest DeferredSession (a weak reference)


def columns_ready() -> None:
    """Make the command's DeferredSession now if no SparkContext is active yet: PySpark's
    column functions (F.col, F.lit, F.expr) need one, and Spark work may build its columns
    before it first touches the session or a frame."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None:
        deferred = _deferred[0]()
        if deferred is not None:
            deferred.get()


_first_use = threading.local()  # per thread: what to do when it first uses a DeferredSession


@contextlib.contextmanager
def on_first_use(spark, hook):
    """Run `hook(session)` when this thread first uses `spark` in the block, or now if it is in
    use already: a worker thread tells its JVM thread its job group only once there is one."""
    if spark_in_use(spark):
        hook(session_of(spark))
        yield
        return
    _first_use.hook = hook
    try:
        yield
    finally:
        _first_use.hook = None


def spark_in_use(spark) -> bool:
    """Return whether a session (or a DeferredSession) has been asked for: Spark is running."""
    return not isinstance(spark, DeferredSession) or spark.in_use


def session_of(spark):
    """Return the SparkSession itself (a DeferredSession's, once started)."""
    return spark.get() if isinstance(spark, DeferredSession) else spark
