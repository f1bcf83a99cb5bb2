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
            # What was built while paused is all in the youngest generation: the first
            # collection after would walk every object once more, and the next one again
            # (0.1 to 0.4 s for a program of 100,000 facts). Long-lived as it is, it goes to
            # the oldest generation at once (unfreeze puts frozen objects there), unless
            # something else froze objects on purpose.
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()
