"""The SparkConf levelflow starts Spark with (session.spark_conf): no JVM is started here."""

from __future__ import annotations

import pytest

from levelflow.engine.session import POLARS_THREADS, spark_conf


@pytest.mark.parametrize("master, extra, threads", [
    ("spark://10.0.0.5:7077", {}, "1"),  # a task's cores: spark.task.cpus, 1 by default
    ("yarn", {"spark.task.cpus": 4}, "4"),
    ("k8s://https://api:6443", {POLARS_THREADS: 8}, "8"),  # the user's own setting stays
    ("local[*]", {}, None),  # the driver's machine: Polars takes every core
    ("local[2]", {}, None),
])
def test_polars_threads_on_an_executor_follow_the_task_cores(master, extra, threads):
    assert spark_conf(master, extra=extra).get(POLARS_THREADS) == threads
