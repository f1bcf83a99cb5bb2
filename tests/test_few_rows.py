"""A few rows taken out of a large frame, and a large frame cut to what a join of a few rows
can match (plans/few_rows.py), against Python sets and Polars' plain joins."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from levelflow.engine.plans.few_rows import FEW_ROWS_FROM, NEAR_ROWS, near, without


def _frame(rng, n: int, hi: int, nulls: bool = False) -> pl.DataFrame:
    a = pl.Series("c0", rng.integers(0, hi, n))
    if nulls:  # a null first value: equal to null where rows are removed
        a = pl.Series("c0", [None if i % 97 == 0 else v for i, v in enumerate(a.to_list())],
                      pl.Int64)
    return pl.DataFrame([a, pl.Series("c1", rng.integers(0, 5, n))])


def _rows(df: pl.DataFrame) -> list[tuple]:
    return df.rows()


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("rows", [5_000, FEW_ROWS_FROM])  # a plain anti join; the column test
def test_without_drops_exactly_the_rows_gone(seed, nulls, rows):
    rng = np.random.default_rng(seed)
    df = _frame(rng, rows, 300, nulls)
    present = df.sample(8, seed=seed)
    absent = pl.DataFrame({"c0": [10_000, 10_001], "c1": [0, 1]})  # no such row
    for gone in (present, absent, pl.concat([present, absent]), df.head(0),
                 df.sample(rows // 10, seed=seed)):  # past the few rows' share: an anti join
        got = without(df, gone)
        drop = set(_rows(gone))
        assert _rows(got) == [r for r in _rows(df) if r not in drop]


def test_without_keeps_the_frame_when_nothing_goes():
    rng = np.random.default_rng(4)
    df = _frame(rng, 2_000, 50)
    assert without(df, pl.DataFrame({"c0": [7], "c1": [99]})) is df


@pytest.mark.parametrize("few_rows", [0, 1, 30, 1_000, 50_000])
def test_near_keeps_every_row_a_join_matches(few_rows):
    rng = np.random.default_rng(few_rows)
    big = _frame(rng, NEAR_ROWS + 1_000, 1_000_000)
    few = _frame(rng, few_rows, 1_000_000)
    few = pl.concat([few, big.head(few_rows // 2)]).with_columns(pl.col("c1").alias("c2"))
    cut = near(big, few, ["c0"])
    assert cut.height <= big.height
    for how in ("inner", "anti", "semi"):
        plain = few.join(big, on=["c0"], how=how).sort(pl.all())
        assert plain.equals(few.join(cut, on=["c0"], how=how).sort(pl.all())), how
