"""Seconds this process spent reading inputs and shipping them to Spark, for `run`'s summary.

Changes: two running totals, added to from any thread (a task reads its fact files in its
worker thread); a command takes a snapshot before and after a stretch and prints the difference.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import NamedTuple


class IoSeconds(NamedTuple):
    """Running totals: reading (fact files, Parquet) and shipping (driver rows to Spark)."""

    reading: float = 0.0
    shipping: float = 0.0

    def since(self, before: IoSeconds) -> IoSeconds:
        """Return what was added after the snapshot `before`."""
        return IoSeconds(self.reading - before.reading, self.shipping - before.shipping)

    def total(self) -> float:
        """Return reading and shipping together."""
        return self.reading + self.shipping


_lock = threading.Lock()
_totals = IoSeconds()


def snapshot() -> IoSeconds:
    """Return the totals so far."""
    return _totals


@contextmanager
def timed(part: str):
    """Add the block's wall time to `part` ("reading" or "shipping")."""
    global _totals
    t0 = time.perf_counter()
    try:
        yield
    finally:
        seconds = time.perf_counter() - t0
        with _lock:
            _totals = _totals._replace(**{part: getattr(_totals, part) + seconds})
