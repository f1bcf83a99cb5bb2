"""An input's base facts between epochs: a cut frame plus the facts added and removed since,
kept as sets in the driver until they are many enough to cut into a new frame."""

from __future__ import annotations

from dataclasses import dataclass

from levelflow.engine.evaluate import cut
from levelflow.engine.incremental.backends.driver_rows import (
    LazyFrame,
    arrow_of,
    frame_of_rows,
    rows_like,
    rows_of,
)
from levelflow.engine.plans.few_rows import without
from levelflow.engine.types import column_names, relation_rows

# Facts an input's base may differ by from its last cut frame, kept as sets in the driver,
# before one cut (a job): the base is the cut frame minus and plus those, one anti join and one
# union whatever the epochs (a plan stacked per epoch ran one broadcast job per epoch when cut).
BASE_PENDING_ROWS = 20_000


@dataclass(frozen=True)
class BaseDelta:
    """An input's base facts: a cut frame, the facts since added (not in it) and removed (in
    it), and the frame they make, as the snapshot holds it."""

    saved: object  # DataFrame, cut
    plus: frozenset
    minus: frozenset
    frame: object  # DataFrame: saved - minus + plus

    def then(self, spark, decl, plus: list, minus: list, plus_df, minus_df) -> BaseDelta:
        """Return the base after an epoch's net change (plus absent before, minus present;
        plus_df and minus_df: their frames)."""
        import pyspark.sql.functions as F

        held = _held_then(self.saved, decl, plus, minus)
        if held is not None:  # the driver holds the base: the new one is built here, now
            return BaseDelta(held, frozenset(), frozenset(), held)
        if self.plus or self.minus:  # else the sets are the epoch's, and so are their frames
            added, removed = set(self.plus), set(self.minus)
            for row in plus:
                (removed.discard if row in removed else added.add)(row)
            for row in minus:
                (added.discard if row in added else removed.add)(row)
            plus_df = frame_of_rows(spark, decl, list(added)) if added else None
            minus_df = frame_of_rows(spark, decl, list(removed)) if removed else None
        else:
            added, removed = set(plus), set(minus)

        def build():
            new = self.saved
            if minus_df is not None:
                new = new.join(F.broadcast(minus_df), column_names(decl.arity), "left_anti")
            return new if plus_df is None else new.unionByName(plus_df)

        if len(added) + len(removed) > BASE_PENDING_ROWS:
            new, _ = cut(build())
            return BaseDelta(new, frozenset(), frozenset(), new)
        return BaseDelta(self.saved, frozenset(added), frozenset(removed), LazyFrame(build))


def _held_then(saved, decl, plus: list, minus: list):
    """Return the base after the change as a frame over rows the driver holds, when it holds
    the base's (else None)."""
    import polars as pl

    from levelflow.engine.plans.columnar import frame_schema

    table = rows_of(saved)
    if table is None:
        return None
    plus, minus = relation_rows(decl, plus), relation_rows(decl, minus)
    schema = frame_schema(decl)
    new = pl.from_arrow(table).select(list(schema))
    if minus:
        gone = pl.DataFrame(minus, schema=schema, orient="row")
        new = without(new, gone)
    if plus:
        new = pl.concat([new, pl.DataFrame(plus, schema=schema, orient="row")])
    return rows_like(saved, arrow_of(new))
