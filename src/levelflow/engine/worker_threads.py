"""Worker threads kept between runs, and the Spark properties of the JVM thread behind each.

py4j pins each Python thread to a connection of its own and a JVM thread behind it, whose
local properties (fair pool, job group, tags) Spark reads when a job starts there. A new thread
per run opened a new connection every epoch (about 5 ms) and set and cleared every property
around every task (ten py4j calls): a 10-edge epoch is about 100 ms. So threads are lent to
each run and parked after it, and a thread sends only the properties that differ from what
its JVM thread already holds.

Constant: the most threads kept parked. Changes: the parked threads (under a lock; a forked
child starts with none) and, per thread, what its JVM thread was told.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

PARKED = 8  # threads kept for the next runs at most; more are let go

_parked: list[ThreadPoolExecutor] = []
_lock = threading.Lock()
_told = threading.local()  # this thread's: jsc (whose JVM thread), props, tags


def borrow(count: int) -> list[ThreadPoolExecutor]:
    """Return `count` one-thread executors, parked ones first: each runs one slot's tasks."""
    with _lock:
        lent = [_parked.pop() for _ in range(min(count, len(_parked)))]
    while len(lent) < count:
        lent.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="levelflow-worker"))
    return lent


def give_back(lent: list[ThreadPoolExecutor]) -> None:
    """Park executors whose work is all finished (a run's end); let go of those past PARKED."""
    with _lock:
        keep = max(PARKED - len(_parked), 0)
        _parked.extend(lent[:keep])
    for ex in lent[keep:]:
        ex.shutdown(wait=False)


def _forget() -> None:
    _parked.clear()  # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_forget)


def tell(sc, props: dict[str, str], tag: str) -> None:
    """Make this thread's JVM thread hold `props` as local properties and `tag` as its one job
    tag of ours, sending only what differs from what it was told last (by this function:
    callers that set any of them otherwise put back what they found)."""
    if getattr(_told, "jsc", None) is not sc._jsc:  # a new thread, or another SparkContext
        _told.jsc, _told.props, _told.tags = sc._jsc, {}, set()
    for key, value in props.items():
        if _told.props.get(key) != value:
            sc.setLocalProperty(key, value)
            _told.props[key] = value
    if tag not in _told.tags:
        for old in _told.tags:
            sc.removeJobTag(old)
        sc.addJobTag(tag)
        _told.tags = {tag}
