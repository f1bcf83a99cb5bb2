"""Pausing Python's cyclic garbage collector while many small objects are built."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector (restoring its state after)."""
    # Loading a trace or a program's facts builds millions of small objects and no cycles;
    # each generation-2 collection would walk them all again (about a third of a trace's load).
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
