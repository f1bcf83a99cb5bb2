"""Sorted-column indexes over a frame that changes by a few rows an epoch
(plans/frame_index.py): each lookup against a filter of the frame it was made for."""

from __future__ import annotations

import threading

import numpy as np
import polars as pl
import pytest

from levelflow.engine.plans import frame_index
from levelflow.engine.plans.few_rows import without
from levelflow.engine.plans.frame_index import added, indexed, lookup


def _sorted(df: pl.DataFrame) -> list[tuple]:
    return sorted(df.rows())


def _found(df: pl.DataFrame, col: int, values: pl.Series) -> pl.DataFrame | None:
    """Return lookup's rows once the column's background sort is done (None: no index)."""
    lookup(df, col, values)  # the first lookup starts the sort
    index = frame_index._of(df)
    sorting = index.sorted.get(col) if index is not None else None
    if isinstance(sorting, threading.Thread):
        sorting.join(30)
    return lookup(df, col, values)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lookups_follow_the_frame_through_removals_and_additions(seed, monkeypatch):
    monkeypatch.setattr(frame_index, "INDEX_ROWS", 1_000)
    rng = np.random.default_rng(seed)

    def rows(n: int) -> pl.DataFrame:
        return pl.DataFrame({"c0": rng.integers(0, 400, n), "c1": rng.integers(0, 400, n)})

    df = indexed(rows(4_000).unique())
    for epoch in range(12):
        gone = pl.concat([df.sample(5, seed=epoch), rows(2)])  # two most likely absent
        if epoch % 4 == 3:  # rows added earlier go again; rows removed earlier come back
            gone = pl.concat([gone, df.tail(3)])
        df = without(df, gone)
        new = rows(6)
        if epoch % 3 == 2:
            new = pl.concat([new, gone.head(2)])
        df = added(df, new)
        for col in (0, 1):
            values = pl.Series(rng.integers(0, 400, 20))
            found = _found(df, col, values)
            assert found is not None, epoch
            expect = df.filter(pl.col(f"c{col}").is_in(values.implode()))
            assert _sorted(found) == _sorted(expect), (epoch, col)


def test_no_index_where_the_frame_is_small_or_the_probe_large(monkeypatch):
    monkeypatch.setattr(frame_index, "INDEX_ROWS", 1_000)
    small = indexed(pl.DataFrame({"c0": list(range(999))}))
    assert _found(small, 0, pl.Series([1, 2])) is None
    big = indexed(pl.DataFrame({"c0": list(range(2_000))}))
    assert _found(big, 0, pl.Series(list(range(100)))) is None  # past LOOKUP_SHARE
    assert _sorted(_found(big, 0, pl.Series([5, 5, None, 7_000]))) == [(5,)]
    text = indexed(pl.DataFrame({"c0": [str(i) for i in range(2_000)]}))
    assert _found(text, 0, pl.Series(["5"])) is None  # only integer columns sort
    nulls = indexed(pl.DataFrame({"c0": [None, *range(1_999)]}))
    assert _found(nulls, 0, pl.Series([3])) is None  # nor columns holding a null
