"""The one driver loop: `drive` over hand-made workers, and `Metered` with a fake clock.

    a          a diamond: b and c wait for a, d for both
   / \\
  b   c
   \\ /
    d
"""

from __future__ import annotations

import itertools

import pytest

from levelflow.driver import SchedulerStall, drive
from levelflow.scheduler import LevelBased
from levelflow.scheduler.metered import Metered
from levelflow.tasks.graph import TaskGraph


class Slots:
    """Workers with `k` slots whose tasks finish in start order, one per wait."""

    def __init__(self, graph: TaskGraph, k: int) -> None:
        self.graph, self.k = graph, k
        self.running: list[int] = []
        self.log: list[tuple[str, int]] = []

    def idle(self) -> int:
        return self.k - len(self.running)

    def start(self, ready: list[int]) -> None:
        self.running += ready
        self.log += [("start", v) for v in ready]

    def busy(self) -> bool:
        return bool(self.running)

    def finished(self):
        v = self.running.pop(0)
        self.log.append(("done", v))
        yield v, self.graph.children[v]


def diamond(names=("a", "b", "c", "d")) -> TaskGraph:
    a, b, c, d = names
    return TaskGraph.from_named_edges(list(names), [(a, b), (a, c), (b, d), (c, d)])


@pytest.mark.parametrize("names", [("a", "b", "c", "d"), ("w", "x", "y", "z")])
def test_drive_runs_every_task_after_its_parents(names):
    g = diamond(names)
    sched = LevelBased(g)
    sched.activate([0])
    workers = Slots(g, 2)
    assert drive(sched, workers) == 4
    order = [v for what, v in workers.log if what == "start"]
    done_at = {v: i for i, (what, v) in enumerate(workers.log) if what == "done"}
    start_at = {v: i for i, (what, v) in enumerate(workers.log) if what == "start"}
    assert sorted(order) == [0, 1, 2, 3] and order[0] == 0 and order[-1] == 3
    for u, v in [(0, 1), (0, 2), (1, 3), (2, 3)]:
        assert done_at[u] < start_at[v]
    assert not sched.is_active()


def test_drive_names_a_scheduler_that_hands_out_too_many():
    class Greedy(LevelBased):
        def get_ready(self, k):
            return super().get_ready(k + 1)

    g = TaskGraph(["p", "q", "r"], [])
    sched = Greedy(g)
    sched.activate([0, 1, 2])
    with pytest.raises(SchedulerStall, match=r"'Greedy' handed out 2 tasks from get_ready\(1\)"):
        drive(sched, Slots(g, 1))


def test_metered_sums_each_call_and_tells_the_charge_hook():
    g = diamond()
    ticks = itertools.count()  # every clock read is one second later
    charged: list[float] = []
    sched = Metered(LevelBased(g), lambda: float(next(ticks)), charged.append)
    sched.activate([0])
    assert drive(sched, Slots(g, 4), name="levelbased") == 4
    calls = sched.seconds
    assert set(calls) == {"activate", "get_ready", "done", "is_active"}
    assert calls["activate"] == 1.0 and calls["done"] == 4.0
    assert len(charged) == sum(calls.values()) and sched.total() == sum(charged)
