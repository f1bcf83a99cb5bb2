"""A from-scratch run's relations, where its tasks left them: in the driver or with Spark.

A task under the driver plan leaves Polars frames in the driver; any other task leaves
DataFrames. Each is made into the other kind once, when a task on the other side reads it: a
driver-held relation becomes a DataFrame only if a Spark task reads it (or the caller uses it),
a DataFrame comes to the driver (one job) only if a driver task reads it.
Changes: the two maps, written by the run's main thread (a finished task) and by worker threads
(a conversion, under a lock); each relation is put once, before any task reads it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import polars as pl

from levelflow.tasks.ast import Decl


class HeldRelations:
    """Each relation's tuples as a Polars frame in the driver, a DataFrame, or both."""

    def __init__(self, spark, decls: Mapping[str, Decl]) -> None:
        self.spark = spark
        self.decls = decls
        self.driver: dict[str, pl.DataFrame] = {}
        self.frames: dict = {}  # relation -> DataFrame
        self._lock = threading.Lock()

    def put(self, name: str, tuples) -> None:
        """Keep a finished task's relation where its task left it."""
        if isinstance(tuples, pl.DataFrame):
            self.driver[name] = tuples
        else:
            self.frames[name] = tuples

    def __contains__(self, name: str) -> bool:
        return name in self.driver or name in self.frames

    def polars(self, name: str) -> pl.DataFrame:
        """Return the relation as a Polars frame (empty if its task did not run)."""
        from levelflow.engine.plans.columnar import empty_frame
        from levelflow.engine.plans.driver import polars_input

        got = self.driver.get(name)
        if got is not None:
            return got
        df = self.frames.get(name)
        got = empty_frame(self.decls[name]) if df is None else polars_input(df, self.decls[name])
        with self._lock:
            return self.driver.setdefault(name, got)

    def frame(self, name: str):
        """Return the relation as a DataFrame (empty if its task did not run)."""
        from levelflow.engine.facts import empty_relation
        from levelflow.engine.session import session_of

        got = self.frames.get(name)
        if got is not None:
            return got
        spark = session_of(self.spark)
        rows = self.driver.get(name)
        got = empty_relation(spark, self.decls[name]) if rows is None else \
            _spark_frame(spark, rows, self.decls[name])
        with self._lock:
            return self.frames.setdefault(name, got)

    def result(self, name: str):
        """Return the relation for the caller: its DataFrame, or for a relation the driver holds
        (or an empty one) a DataFrame built on first use, its rows kept beside it
        (driver_rows.rows_of: outputs are written from them with no Spark)."""
        from levelflow.engine.incremental.backends.driver_rows import arrow_of, frame_of_held

        if name in self.frames:
            return self.frames[name]
        return frame_of_held(self.spark, arrow_of(self.polars(name)), self.decls[name])


def _spark_frame(spark, rows: pl.DataFrame, decl: Decl):
    """Return a DataFrame of the rows a driver task left (Arrow in, no Python worker)."""
    from levelflow.engine.incremental.backends.driver_rows import arrow_of, spark_frame
    from levelflow.engine.types import relation_schema

    return spark_frame(spark, arrow_of(rows), relation_schema(decl))
