"""levelflow.gcpause.paused_gc: the collector is paused inside, restored after, and what was
built inside starts in the oldest generation (no young collection walks it again)."""

from __future__ import annotations

import gc

from levelflow.gcpause import paused_gc


class _Node:
    __slots__ = ("next",)

    def __init__(self, nxt) -> None:
        self.next = nxt


def test_objects_built_while_paused_go_to_the_oldest_generation():
    assert gc.isenabled()
    thresholds = gc.get_threshold()
    gc.set_threshold(10**9)  # no collection of its own moves them while the test looks
    try:
        with paused_gc():
            assert not gc.isenabled()
            built = [_Node(None) for _ in range(1000)]
        assert gc.isenabled()
        young = {id(o) for g in (0, 1) for o in gc.get_objects(generation=g)}
        oldest = {id(o) for o in gc.get_objects(generation=2)}
    finally:
        gc.set_threshold(*thresholds)
    assert not any(id(o) in young for o in built)
    assert all(id(o) in oldest for o in built)
    assert gc.get_freeze_count() == 0


def test_cyclic_garbage_made_while_paused_is_still_collected():
    with paused_gc():
        a = _Node(None)
        a.next = _Node(a)
    watched = id(a)
    del a
    gc.collect()
    assert watched not in {id(o) for o in gc.get_objects()}


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
