"""Shared fixtures: one SparkSession for the whole test run, started only if a test asks."""

from __future__ import annotations

import pytest


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
