"""Sorted-column indexes over a large frame that changes by a few rows an epoch.

A share's lower relations (3M edges) are joined each epoch with a few rows: DRed's support
checks and suspects' heads, the resumed fixpoint's rounds. A hash join hashes every row of
the large frame each time; a binary search over the column sorted once costs what it finds.
The frame an epoch makes (a few rows removed, a few added) keeps its parent's sorted
columns: it is indexed as (base - minus) + plus, and sorted anew (on its first lookup) once
the rows since are more than REBUILD_SHARE of the base. Frames are indexed by `indexed` and
followed by `removed` / `added`; a frame of no index is joined as before.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

import numpy as np
import polars as pl

INDEX_ROWS = 100_000  # smaller frames are hashed whole, as before
REBUILD_SHARE = 1 / 64  # rows changed since the sort, past which a frame is sorted anew
LOOKUP_SHARE = 1 / 64  # probe values past this share of the rows: a hash join instead


@dataclass
class _Index:
    base: pl.DataFrame  # the frame the columns were sorted on
    plus: pl.DataFrame  # rows added since (not in base - minus)
    minus: pl.DataFrame  # rows of base removed since
    # per column: (its values sorted, their rows in base), None where it cannot sort, or
    # the thread sorting it; shared by every frame derived from one base
    sorted: dict[int, object] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def column(self, col: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Return the column sorted, or None while it is sorted in the background (started
        by the first ask: a 3M-row sort costs more than the joins of the epoch that asks,
        which hash as before) or where it cannot be."""
        with self.lock:
            start = col not in self.sorted
            if start:
                self.sorted[col] = threading.Thread(target=self._sort, args=(col,), daemon=True)
        if start:
            self.sorted[col].start()
        found = self.sorted.get(col)
        return found if isinstance(found, tuple) else None

    def _sort(self, col: int) -> None:
        s = self.base.to_series(col)
        done = None
        if s.dtype.is_integer() and not s.null_count():
            order = s.arg_sort()
            done = (s.gather(order).to_numpy(), order.to_numpy())
        with self.lock:
            self.sorted[col] = done


_INDEXES: dict[int, tuple[weakref.ref, _Index]] = {}


def _of(df: pl.DataFrame) -> _Index | None:
    found = _INDEXES.get(id(df))
    return found[1] if found is not None and found[0]() is df else None


def _register(df: pl.DataFrame, index: _Index) -> pl.DataFrame:
    key = id(df)
    _INDEXES[key] = (weakref.ref(df, lambda _: _INDEXES.pop(key, None)), index)
    return df


def indexed(df: pl.DataFrame) -> pl.DataFrame:
    """Return df, indexed (sorted on first lookup) if large and not indexed yet."""
    if df.height >= INDEX_ROWS and _of(df) is None:
        _register(df, _Index(df, df.clear(), df.clear()))
    return df


def _follow(parent: _Index, df: pl.DataFrame, plus: pl.DataFrame, minus: pl.DataFrame
            ) -> pl.DataFrame:
    if plus.height + minus.height > REBUILD_SHARE * parent.base.height:
        return indexed(df)
    return _register(df, _Index(parent.base, plus, minus, parent.sorted, parent.lock))


def removed(old: pl.DataFrame, new: pl.DataFrame, gone: pl.DataFrame) -> pl.DataFrame:
    """Return `new`, old without the rows `gone` (each one of old's), indexed as old is."""
    parent = _of(old)
    if parent is None or new is old:
        return new
    cols = parent.base.columns
    gone = gone.select(cols)
    plus = parent.plus.join(gone, on=cols, how="anti", nulls_equal=True) \
        if parent.plus.height else parent.plus
    return _follow(parent, new, plus, pl.concat([parent.minus, gone]).unique())


def added(old: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Return old with `rows` appended, indexed as old is."""
    new = pl.concat([old, rows])
    parent = _of(old)
    if parent is None:
        return new
    return _follow(parent, new, pl.concat([parent.plus, rows.select(parent.base.columns)]),
                   parent.minus)


def lookup(df: pl.DataFrame, col: int, values: pl.Series) -> pl.DataFrame | None:
    """Return the rows of an indexed df whose column `col` is among `values`, in no order;
    None where df has no index or the values are too many for one to pay."""
    index = _of(df)
    if index is None:
        return None
    values = values.drop_nulls().unique()
    if values.len() > LOOKUP_SHARE * df.height or not values.dtype.is_integer():
        return None
    column = index.column(col)
    if column is None:
        return None
    ordered, order = column
    v = values.to_numpy().astype(ordered.dtype, copy=False)
    lo, hi = np.searchsorted(ordered, v, "left"), np.searchsorted(ordered, v, "right")
    counts = hi - lo
    total = int(counts.sum())
    # Each value's run of sorted positions, expanded without a loop: lo[k] + 0..counts[k]-1.
    at = np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(total)
    rows = index.base[order[at]]
    cols = index.base.columns
    if index.minus.height and rows.height:
        rows = rows.join(index.minus, on=cols, how="anti", nulls_equal=True)
    if index.plus.height:
        name = cols[col]
        rows = pl.concat([rows, index.plus.filter(pl.col(name).is_in(values.implode()))])
    return rows
