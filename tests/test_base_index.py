"""The driver's copy of input base facts (state/base_index.py) against Python sets: which
probed facts are present, and the copy after committed epochs' net changes."""

from __future__ import annotations

import random
from types import SimpleNamespace

import polars as pl
import pytest

from levelflow.engine.incremental.state.base_index import BaseIndex
from levelflow.engine.plans.columnar import frame_schema
from levelflow.tasks.ast import Decl

DECL = Decl("r", ("a", "b"), ("number", "symbol"))


def _frame(rows) -> pl.DataFrame:
    return pl.DataFrame(sorted(rows), schema=frame_schema(DECL), orient="row")


@pytest.mark.parametrize("seed", [1, 2])
def test_present_and_committed_follow_the_facts(seed):
    rng = random.Random(seed)

    def fact():  # few first-column values: many facts share one, few share both columns
        return (rng.randrange(20), rng.choice("abcdefgh"))

    facts = {fact() for _ in range(60)}
    index = BaseIndex()
    index.seed(0, {"r": _frame(facts)})
    for epoch in range(1, 8):
        snap = SimpleNamespace(epoch=epoch - 1)
        probe = [fact() for _ in range(15)]
        assert index.present(snap, "r", DECL, probe) == facts & set(probe), epoch
        gone = set(rng.sample(sorted(facts), 5))
        added = {fact() for _ in range(6)} - facts
        index.committed(epoch, {"r": (DECL, sorted(added), sorted(gone))})
        facts = (facts - gone) | added
        assert set(index.frames["r"].rows()) == facts, epoch
        assert index.frames["r"].height == len(facts), epoch  # no fact kept twice
