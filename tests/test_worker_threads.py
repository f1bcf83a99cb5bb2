"""Worker threads lent to each run and parked after it (engine/worker_threads.py): a run's
tasks see their own fair pool, job group and tag whatever an earlier run left on the thread."""

from __future__ import annotations

import threading
from pathlib import Path

from levelflow.engine import worker_threads
from levelflow.engine.api import load
from levelflow.engine.runner import run_program

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _seen_by_tasks(spark, monkeypatch, runs: int, jobs: int) -> list[list[tuple]]:
    """Return per run, per task: (thread, pool, job group, job tags, interrupt flag)."""
    from levelflow.engine import plans

    seen: list[tuple] = []
    real = plans.evaluate_planned

    def spy(spark_, program, task, *args, **kwargs):
        sc = spark_.sparkContext
        seen.append((threading.current_thread(), sc.getLocalProperty("spark.scheduler.pool"),
                     sc.getLocalProperty("spark.jobGroup.id"), sc.getJobTags(),
                     sc.getLocalProperty("spark.job.interruptOnCancel")))
        return real(spark_, program, task, *args, **kwargs)

    monkeypatch.setattr(plans, "evaluate_planned", spy)
    pt = load(EXAMPLES / "tc" / "program.dl")
    out = []
    for _ in range(runs):
        del seen[:]
        run_program(spark, pt, EXAMPLES / "tc" / "facts", scheduler="levelbased", jobs=jobs,
                    driver_rows=None)  # on Spark: a task in the driver tells Spark nothing
        out.append(list(seen))
    return out


def test_a_later_run_reuses_the_thread_with_its_own_group_and_tag(spark, monkeypatch):
    first, second = _seen_by_tasks(spark, monkeypatch, runs=2, jobs=1)
    # The same thread object (held here, so not a new one with a reused id): parked between.
    assert len({id(s[0]) for s in first + second}) == 1
    tags = []
    for run in (first, second):
        (tag,) = {t for s in run for t in s[3]}  # one tag of ours per run, the old one gone
        tags.append(tag)
        groups = [s[2] for s in run]
        assert len(set(groups)) == len(groups) == 3  # a group per task counts its jobs
        assert all(g.startswith(f"{tag}-task-") for g in groups)
        assert {s[1] for s in run} == {"levelflow-0"}
        assert {s[4] for s in run} == {"true"}  # a cancelled run interrupts its tasks
    assert tags[0] != tags[1]
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None  # main thread


def test_two_slots_get_two_threads_each_in_its_own_pool(spark, monkeypatch):
    (run,) = _seen_by_tasks(spark, monkeypatch, runs=1, jobs=2)
    by_thread = {}
    for thread, pool, *_ in run:
        by_thread.setdefault(id(thread), set()).add(pool)
    assert all(len(pools) == 1 for pools in by_thread.values())  # slot i on thread i
    assert {p for pools in by_thread.values() for p in pools} <= {"levelflow-0", "levelflow-1"}


def test_parked_threads_are_capped():
    lent = worker_threads.borrow(worker_threads.PARKED + 3)
    assert len({id(ex) for ex in lent}) == worker_threads.PARKED + 3
    worker_threads.give_back(lent)
    again = worker_threads.borrow(worker_threads.PARKED + 3)
    assert len({id(ex) for ex in again} & {id(ex) for ex in lent}) <= worker_threads.PARKED
    worker_threads.give_back(again)
