"""The driver plan: a task whose inputs are small, or fit the machine, runs in the driver.

As Spark runs a local relation in the driver, a task of a few thousand rows is evaluated where
its inputs already are, on the Polars evaluator a Python worker runs (worker.evaluate_encoded):
no Spark job, no Python worker. Under the other plans a job's floor (70-200 ms, and a Python
worker's start) is most of a small task's time. The task's relations come back as Polars frames
and stay in the driver; a task on Spark that reads one gets it as a DataFrame then
(engine/held.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl
import pyarrow as pa

from levelflow.engine.memory import BY_MASTER, DRIVER_ROWS, memory_rows
from levelflow.engine.plans.columnar import frame_schema
from levelflow.tasks.ast import Decl, Program
from levelflow.tasks.tasks import Task


def rows_on(spark) -> int:
    """Return auto's driver threshold on `spark`: memory_rows() on a local master (or one not
    known yet), where the executors share the driver's machine, else DRIVER_ROWS."""
    from levelflow.engine.session import on_local_master

    return memory_rows() if on_local_master(spark) else DRIVER_ROWS


def resolved_rows(driver_rows: int | None, spark) -> int | None:
    """Return `driver_rows` with BY_MASTER resolved on `spark` (rows_on)."""
    return rows_on(spark) if driver_rows == BY_MASTER else driver_rows


def polars_input(df, decl: Decl) -> pl.DataFrame:
    """Return a relation as a Polars frame of its columns (c0..): itself if it is one, an
    Arrow table's rows, the rows the driver holds behind a DataFrame, else the DataFrame's
    rows (one Spark job)."""
    from levelflow.engine.incremental.backends.driver_rows import arrow_rows, polars_of

    if isinstance(df, pl.DataFrame):
        return df
    return polars_of(df if isinstance(df, pa.Table) else arrow_rows(df), decl)


def driver_facts(spark, program: Program, task: Task, factdir: str | Path | None
                 ) -> dict[str, list[pl.DataFrame]]:
    """Return per relation of the task the tuples of its `.input` (repeats kept), read in the
    driver (a Parquet input by pyarrow where it can, engine/parquet_reader.py; `ord`'s table
    from its sources; else Spark reads a DataFrame, Parquet or table input, and the driver
    takes its rows)."""
    from levelflow.engine.facts import fact_frame, input_path, io_delimiter, io_headers
    from levelflow.engine.parquet_reader import read_parquet
    from levelflow.engine.session import session_of
    from levelflow.engine.spark_io import frame_kind, ordinal_rows, read_frame_input
    from levelflow.engine.sqlite_io import read_sqlite

    facts = {}
    for name in task.relations:
        io = program.inputs.get(name)
        if io is None or factdir is None:
            continue
        decl = program.decls[name]
        kind = frame_kind(io)
        if kind is None:
            facts[name] = [fact_frame(input_path(io, factdir), decl, io_delimiter(io),
                                      io_headers(io))]
            continue
        if kind == "ordinals":  # `ord`'s table: made here from its sources' facts
            facts[name] = [pl.DataFrame(ordinal_rows(spark, io, factdir),
                                        schema=frame_schema(decl), orient="row")]
            continue
        rows = read_parquet(decl, io, factdir) if kind == "parquet" else \
            read_sqlite(decl, io, factdir) if kind == "sqlite" else None
        if rows is None:
            rows = read_frame_input(session_of(spark), decl, io, factdir, distinct=False)
        # As they come: the evaluator makes a relation's base tuples distinct
        # (fixpoint.base_tuples), which a distinct here would only repeat (0.5 s for 3M rows).
        facts[name] = [polars_input(rows, decl)]
    return facts


def evaluate_in_driver(layout, lower: Mapping[str, pl.DataFrame],
                       facts: Mapping[str, list[pl.DataFrame]]) -> tuple[dict, int]:
    """Return (each relation of the task as a Polars frame, `_it` its round where the layout
    is ranked; the rounds) evaluated in this process, as one share of the local plan (left in
    this process's memory under `layout.keep`, as a share on an executor)."""
    from levelflow.engine.plans import resident
    from levelflow.engine.plans.encode import decode
    from levelflow.engine.plans.worker import evaluate_encoded, keep_share, with_program_facts

    lower = {n: df.select([pl.col(c).cast(t) for c, t in frame_schema(layout.decls[n]).items()])
             for n, df in lower.items()}
    outcome, symbols, coded = evaluate_encoded(layout, lower, with_program_facts(layout, facts))
    if layout.keep is not None:  # the task's epochs run in the driver too (dred_job.py)
        with resident.held_here():
            keep_share(layout, 0, outcome, symbols, coded)
    out = {}
    for name in layout.names:
        df = decode(outcome.relation(name, ranked=layout.ranked), layout.decls[name], symbols)
        out[name] = df.rechunk()
    return out, outcome.iterations
