"""Run a `levelflow` command in a subprocess on the tests' JVM instead of a JVM of its own.

A test of what happens to the process (SIGKILLed in the middle of an epoch) does not need the
process's own JVM start (5-10 s each; tests/test_cli_spark.py tests that start). A killed
process leaves its SparkContext unstopped, so it cannot make one of its own in a shared JVM:
PRELUDE gives the command a session of its own over the context running there.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Python a `python -c` script runs first: levelflow.cli's Spark sessions are then this one.
PRELUDE = """
import contextlib
from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession
import levelflow.cli.spark as cli_spark

gateway = launch_gateway()  # connects to PYSPARK_GATEWAY_PORT
jvm = gateway.jvm
running = jvm.org.apache.spark.SparkContext.getOrCreate()
jsc = jvm.org.apache.spark.api.java.JavaSparkContext(running)
sc = SparkContext(conf=SparkConf(_jconf=jsc.getConf()), gateway=gateway, jsc=jsc)
spark = SparkSession(sc, jsparkSession=jvm.org.apache.spark.sql.SparkSession.active().newSession())
cli_spark.spark_session = lambda *args, **kwargs: contextlib.nullcontext(spark)
"""


def env_on(spark) -> dict:
    """Return this environment, levelflow's code first, with the way to `spark`'s JVM."""
    gateway = spark.sparkContext._gateway.gateway_parameters
    return dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYSPARK_GATEWAY_PORT=str(gateway.port),
                PYSPARK_GATEWAY_SECRET=gateway.auth_token)
