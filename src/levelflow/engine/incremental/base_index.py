"""The base facts of input relations, also kept in the driver: an epoch's no-op check needs no job.

Which of an epoch's inserted and removed facts are base facts already is a lookup; over the
Spark copy it is a job per epoch (0.5 s and more under load). The driver loads a relation's
base facts once (one job), as a Polars frame, and applies each committed epoch's net change.
Relations over INDEX_ROWS facts stay on the Spark side.
"""

from __future__ import annotations

import polars as pl

from levelflow.engine.plans.columnar import frame_schema
from levelflow.tasks.ast import Decl

INDEX_ROWS = 2_000_000


class BaseIndex:
    """Per input relation its base facts as of one epoch, loaded on first use."""

    def __init__(self) -> None:
        self.epoch: int | None = None
        self.frames: dict[str, pl.DataFrame] = {}

    def present(self, snap, name: str, decl: Decl, rows: list[tuple]) -> set[tuple] | None:
        """Return which rows are base facts of `name` in `snap`, or None if not kept here."""
        if self.epoch != snap.epoch:
            self.frames, self.epoch = {}, snap.epoch
        if name not in self.frames:
            if snap.base_rows[name] > INDEX_ROWS or decl.arity == 0:
                return None
            self.frames[name] = pl.from_arrow(snap.base[name].toArrow()).cast(
                frame_schema(decl))
        probe = pl.DataFrame(rows, schema=frame_schema(decl), orient="row")
        hits = self.frames[name].join(probe, on=probe.columns, how="semi", nulls_equal=True)
        return set(hits.rows())

    def committed(self, epoch: int, changes: dict[str, tuple[Decl, list, list]]) -> None:
        """Apply an epoch's net change (per relation: plus rows, minus rows); it is `epoch` now."""
        if self.epoch is None or self.epoch + 1 != epoch:
            self.frames, self.epoch = {}, None
            return
        for name, (decl, plus, minus) in changes.items():
            df = self.frames.get(name)
            if df is None:
                continue
            schema = frame_schema(decl)
            if minus:
                gone = pl.DataFrame(minus, schema=schema, orient="row")
                df = df.join(gone, on=df.columns, how="anti", nulls_equal=True)
            if plus:
                df = pl.concat([df, pl.DataFrame(plus, schema=schema, orient="row")])
            self.frames[name] = df
        self.epoch = epoch
