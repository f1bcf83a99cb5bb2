"""The base facts of input relations, also kept in the driver: an epoch's no-op check needs no job.

Which of an epoch's inserted and removed facts are base facts already is a lookup; over the
Spark copy it is a job per epoch (0.5 s and more under load). The driver loads a relation's
base facts once (one job), as a Polars frame, and applies each committed epoch's net change.
Relations over INDEX_ROWS facts (or the session's driver rows, where larger) stay on the
Spark side. A session that just opened loads them in
the background (`prefetch`), so its first epoch does not wait for that job.
"""

from __future__ import annotations

import threading

import polars as pl

from levelflow.engine.incremental.backends.driver_rows import (
    arrow_of,
    frame_of_table,
    polars_of,
    rows_of,
)
from levelflow.engine.plans.columnar import frame_schema
from levelflow.engine.plans.few_rows import without
from levelflow.tasks.ast import Decl

INDEX_ROWS = 2_000_000


class BaseIndex:
    """Per input relation its base facts as of one epoch, loaded on first use."""

    def __init__(self, most: int = INDEX_ROWS) -> None:
        self.most = most  # relations of up to this many facts are kept here
        self.epoch: int | None = None
        self.frames: dict[str, pl.DataFrame] = {}
        self._loader: threading.Thread | None = None
        self._loaded: tuple[int, dict[str, pl.DataFrame]] | None = None

    def seed(self, epoch: int, frames: dict[str, pl.DataFrame]) -> None:
        """Take base facts already in the driver (a bootstrap's small inputs) as of `epoch`."""
        self.epoch, self.frames = epoch, dict(frames)

    def prefetch(self, snap, decls) -> None:
        """Start loading, in a background thread, the base facts of `snap`'s input relations
        not kept here yet."""
        names = [n for n in snap.base
                 if _kept(snap, n, decls[n], self.most) and n not in self.frames]
        if names:
            self._loader = threading.Thread(target=self._load_all, args=(snap, decls, names),
                                            daemon=True)
            self._loader.start()

    def _load_all(self, snap, decls, names: list[str]) -> None:
        try:
            frames = {n: _load(snap, n, decls[n]) for n in names}
        except Exception:  # noqa: BLE001 - an optimization only: present() loads on demand
            return
        self._loaded = (snap.epoch, frames)

    def wait(self) -> None:
        """Wait for the background load `prefetch` started, and take what it loaded."""
        self._take_prefetched()

    def _take_prefetched(self) -> None:
        if self._loader is None:
            return
        self._loader.join()
        self._loader = None
        if self._loaded is not None and self.epoch in (None, self._loaded[0]):
            self.epoch, frames = self._loaded[0], self._loaded[1]
            self.frames = {**frames, **self.frames}
        self._loaded = None

    def present(self, snap, name: str, decl: Decl, rows: list[tuple]) -> set[tuple] | None:
        """Return which rows are base facts of `name` in `snap`, or None if not kept here."""
        self._take_prefetched()
        if self.epoch != snap.epoch:
            self.frames, self.epoch = {}, snap.epoch
        if name not in self.frames:
            if not _kept(snap, name, decl, self.most):
                return None
            self.frames[name] = _load(snap, name, decl)
        probe = pl.DataFrame(rows, schema=frame_schema(decl), orient="row")
        near = self.frames[name].filter(_first_in(probe))
        return set(near.join(probe, on=probe.columns, how="semi", nulls_equal=True).rows())

    def committed(self, epoch: int, changes: dict[str, tuple[Decl, list, list]]) -> None:
        """Apply an epoch's net change (per relation: plus rows, minus rows); it is `epoch` now."""
        self._take_prefetched()
        if self.epoch is None or self.epoch + 1 != epoch:
            self.frames, self.epoch = {}, None
            return
        for name, (decl, plus, minus) in changes.items():
            df = self.frames.get(name)
            if df is None:
                continue
            schema = frame_schema(decl)
            if minus:
                df = without(df, pl.DataFrame(minus, schema=schema, orient="row"))
            if plus:
                df = pl.concat([df, pl.DataFrame(plus, schema=schema, orient="row")])
            self.frames[name] = df
        self.epoch = epoch


def _first_in(rows: pl.DataFrame) -> pl.Expr:
    """Return "the first column's value is one of `rows`'": a few rows against up to
    INDEX_ROWS facts are found by this vectorized test first (2 ms on 1M facts, where a join
    hashed every fact: 23 ms), then joined."""
    first = rows.columns[0]
    return pl.col(first).is_in(rows[first].implode(), nulls_equal=True)


def _kept(snap, name: str, decl: Decl, most: int) -> bool:
    """Return whether relation `name`'s base facts are kept in the driver."""
    return 0 < snap.base_rows[name] <= most and decl.arity > 0


def _load(snap, name: str, decl: Decl) -> pl.DataFrame:
    """Return relation `name`'s base facts in `snap` as a Polars frame (held in the driver
    already, else one Spark job)."""
    table = rows_of(snap.base[name])
    return polars_of(table if table is not None else snap.base[name].toArrow(), decl)


def held_facts(spark, decl: Decl, table, schema) -> tuple[object, int, pl.DataFrame]:
    """Return facts the driver holds as an Arrow table: a frame over them, kept beside the
    driver's copy (no later job re-reads the file; a commit writes them from the driver), the
    row count, and the copy as a Polars frame."""
    return frame_of_table(spark, table, schema), table.num_rows, polars_of(table, decl)


# Fact files a bootstrap keeps in the driver (read there, no job; they seed the driver's index
# of base facts) rather than into a cut frame on the executors: up to this many bytes, or the
# rows the session runs in the driver (its driver_rows; the file's lines estimated).
DRIVER_FACT_BYTES = 4 << 20


def read_base(spark, decl, io, factdir, driver_rows: int | None
              ) -> tuple[object, int, object]:
    """Return an input's base facts at a bootstrap (or a new input's at a program change):
    (frame, rows, its copy in the driver or None). A fact file the driver holds is read there
    with no Spark job, which also seeds the driver's index of base facts; the rest is cut on
    the executors."""
    from levelflow.engine.evaluate import cut
    from levelflow.engine.facts import fact_table, input_path, io_delimiter, io_headers
    from levelflow.engine.memory import estimated_lines
    from levelflow.engine.spark_io import frame_kind, ordinal_rows, read_input
    from levelflow.engine.types import relation_schema

    if frame_kind(io) == "ordinals":  # `ord`'s table: made in the driver from its sources
        table = arrow_of(pl.DataFrame(ordinal_rows(spark, io, factdir),
                                      schema=frame_schema(decl), orient="row"))
        return held_facts(spark, decl, table, relation_schema(decl))
    path = input_path(io, factdir) if frame_kind(io) is None else None
    if path and path.is_file() and (path.stat().st_size <= DRIVER_FACT_BYTES
                                    or estimated_lines(path) <= (driver_rows or 0)):
        table = fact_table(path, decl, io_delimiter(io), io_headers(io))
        frame, rows, copy = held_facts(spark, decl, table, relation_schema(decl))
        return frame, rows, copy if decl.arity else None  # the index keeps no nullary facts
    return (*cut(read_input(spark, decl, io, factdir)), None)
