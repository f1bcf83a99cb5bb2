"""Frames of Python tuples are built inside the JVM (a JSON literal) and keep every value."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from levelflow.engine import types
from levelflow.engine.types import relation_schema, rows_frame
from levelflow.tasks.ast import Decl

DECL = Decl("r", ("n", "s", "f", "u"), ("number", "symbol", "float", "unsigned"))
ROW = st.tuples(st.integers(-2**63, 2**63 - 1), st.text(max_size=8),
                st.floats(allow_nan=True, allow_infinity=True), st.integers(0, 2**63 - 1))


def same(a: tuple, b: tuple) -> bool:
    """Return whether two rows are equal, NaN equal to NaN."""
    return all(x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
               for x, y in zip(a, b, strict=True))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, max_size=20))
def test_rows_round_trip_with_the_declared_schema(spark, rows):
    df = rows_frame(spark, DECL, rows)
    assert df.schema == relation_schema(DECL)
    got = [tuple(r) for r in df.collect()]
    assert len(got) == len(rows)
    assert all(same(g, w) for g, w in zip(got, rows, strict=True))


def test_literal_and_python_paths_agree(spark, monkeypatch):
    rows = [(1, 'a\t"b"\\', 0.5, 3), (-7, "é ü", float("-inf"), 0), (0, "", 1e300, 2**63 - 1)]
    literal = [tuple(r) for r in rows_frame(spark, DECL, rows).collect()]
    monkeypatch.setattr(types, "LITERAL_ROWS", 1)  # past the limit: createDataFrame
    python = [tuple(r) for r in rows_frame(spark, DECL, rows).collect()]
    assert literal == python == rows


def test_nullary_and_empty(spark):
    unit = Decl("u", (), ())
    assert [tuple(r) for r in rows_frame(spark, unit, [()]).collect()] == [(True,)]
    assert rows_frame(spark, unit, []).collect() == []
    empty = rows_frame(spark, DECL, [])
    assert empty.collect() == [] and empty.schema == relation_schema(DECL)
