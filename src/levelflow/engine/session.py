"""Build a SparkSession tuned for iterative fixpoints (see shared notes on local Spark)."""

from __future__ import annotations

import os
import sys
import tempfile
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


def make_session(master: str = "local[*]", shuffle_partitions: int = 2,
                 driver_memory: str = "2g", app_name: str = "levelflow", java_options: str = "",
                 extra: dict | None = None):
    """Return a SparkSession for `master` with quiet logs, no UI and few shuffle partitions."""
    from pyspark.sql import SparkSession

    # Python workers run PYSPARK_PYTHON, "python3" on PATH by default: outside an activated
    # virtual environment that interpreter lacks levelflow, pyarrow and polars.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    java_opts = f"-Dlog4j2.configurationFile=file:{_log4j_file()} {java_options}".strip()
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(max(shuffle_partitions, 1)))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
    )
    if master.startswith("local") or _loopback_master(master):
        # Local runs bind to loopback; so does a standalone master on this host (its executors
        # connect back to 127.0.0.1). A remote master must reach the driver: leave it alone.
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1")
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
