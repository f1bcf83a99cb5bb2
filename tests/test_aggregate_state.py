"""Aggregate tasks whose state the driver keeps (strategies/aggregate_state.py): every epoch
equals the naive reference from scratch, at most one Spark job per aggregate task per epoch
once the state is kept, through deletions of a group's minimum and maximum, groups appearing and
vanishing, global aggregates, an aggregate above recursion and a durable restart.
"""

from __future__ import annotations

import random

from test_incremental_properties import check_against_reference, random_epochs, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.incremental.strategies.aggregate_state import AggHeld, body_projection
from levelflow.engine.incremental.strategies.aggregates import aggregate_limits
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.aggregates import is_aggregate_rule

PROGRAM = """
.decl a(g:number, v:number)
.input a
.decl e(x:number, y:number)
.input e
.decl lo(g:number, m:number)
lo(g, min v : a(g, v)) :- a(g, _).
.decl hi(g:number, m:number)
hi(g, max v : a(g, v)) :- a(g, _).
.decl stats(g:number, c:number, s:number, m:float)
stats(g, c, s, m) :- a(g, _), c = count : a(g, _), s = sum v : a(g, v), m = mean v : a(g, v).
.decl whole(c:number, s:number, m:number)
whole(c, s, m) :- c = count : a(_, _), s = sum v : a(_, v), m = min v : a(_, v).
.decl hops(x:number, d:number)
hops(y, 1) :- e(0, y).
hops(z, d + 1) :- hops(y, d), e(y, z), d < 5.
.decl dist(x:number, d:number)
dist(x, min d : hops(x, d)) :- hops(x, _).
.decl joined(g:number, c:number)
joined(g, c) :- a(g, _), c = count : { a(g, v), e(v, _) }.
"""

GENS = {"a": lambda r: (r.randint(0, 3), r.randint(-4, 6)),
        "e": lambda r: (r.randint(0, 6), r.randint(0, 6))}


def _aggregate_jobs(result) -> dict[str, int]:
    return {t: result.spark_jobs.get(t, 0) for t in result.strategies if t.startswith("@agg")}


def _apply(session, ops) -> None:
    for sign, name, row in ops:
        (session.insert if sign > 0 else session.remove)(name, row)


def test_deleting_extremes_and_whole_groups(spark, tmp_path):
    """The minimum and maximum of a group deleted (the next kept binding takes over), a group
    emptied (its tuples go), a new group, and a global aggregate's every row replaced."""
    facts = {"a": {(0, 1), (0, 5), (0, 3), (1, 2), (1, 2 + 7)}, "e": {(0, 1)}}
    pt = build_tasks(parse_program(PROGRAM, "s.dl"))
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    epochs = [
        [(1, "a", (0, 4))],
        [(-1, "a", (0, 1)), (-1, "a", (0, 5))],  # group 0 loses its min and its max
        [(-1, "a", (1, 2)), (-1, "a", (1, 9)), (1, "a", (2, -3))],  # group 1 gone, 2 new
        [(-1, "a", r) for r in [(0, 3), (0, 4), (2, -3)]] + [(1, "a", (3, 0))],
        [(-1, "a", (3, 0))],  # a empty: the global aggregates' tuples go too
        [(1, "a", (1, 1)), (1, "e", (0, 2)), (1, "e", (2, 3))],
    ]
    for k, ops in enumerate(epochs, 1):
        for sign, name, row in ops:
            (facts[name].add if sign > 0 else facts[name].discard)(row)
        _apply(session, ops)
        result = session.commit()
        assert max(_aggregate_jobs(result).values(), default=0) <= 1
        check_against_reference(session, pt, facts, tmp_path / f"ref{k}")


def test_random_epochs_with_kept_state_and_a_durable_restart_equal_from_scratch(spark,
                                                                             tmp_path):
    """Random epochs on kept states (at most one Spark job per aggregate task each), then the
    driver's states go with the session: built again by the first epoch after a cold `open`,
    or by a warm `open` itself (backends/warm.py)."""
    rng = random.Random(11)
    facts = {name: {gen(rng) for _ in range(10)} for name, gen in GENS.items()}
    pt = build_tasks(parse_program(PROGRAM, "s.dl"))
    write_facts(tmp_path / "f0", facts)
    state = tmp_path / "state"
    aggregates = sum(1 for t in pt.tasks if any(is_aggregate_rule(r) for r in t.rules))
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", statedir=state,
                                           mode="incremental")
    # The bootstrap's recompute of an aggregate task built its state: the first epoch updates.
    assert sum(isinstance(h, AggHeld) for h in session.snap.arranged.values()) == aggregates
    jobs = []
    for k, ops in enumerate(random_epochs(rng, GENS, facts, 3), 1):
        if k > 1:  # 2: a cold open, 3: a warm one
            session.close()
            session = IncrementalSession.open(spark, state, mode="incremental", warm=k == 3)
            kept = sum(isinstance(h, AggHeld) for h in session.snap.arranged.values())
            assert kept == (aggregates if k == 3 else 0)
        _apply(session, ops)
        result = session.commit()
        assert {s for t, s in result.strategies.items() if t.startswith("@agg")} <= \
            {"aggregate"}
        if k != 2:  # on kept states
            jobs += list(_aggregate_jobs(result).values())
        check_against_reference(session, pt, facts, tmp_path / f"ref{k}")
    kept = [n for n, h in session.snap.arranged.items() if isinstance(h, AggHeld)]
    assert len(kept) == aggregates
    assert jobs and max(jobs) <= 1
    session.close()


def test_elastic_budget_of_aggregate_tasks(spark, tmp_path):
    """A kept state's update is stopped only past the recompute's cost (5x the session's
    fraction) and no change is large for it; building a state has no budget; a gated task
    keeps the session's rules."""
    from levelflow.engine.incremental.backends.warm import _context

    pt = build_tasks(parse_program(PROGRAM, "s.dl"))
    write_facts(tmp_path / "f0", {"a": {(0, 1)}, "e": {(0, 1)}})
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0")
    ctx = _context(session)
    task = next(t for t in pt.tasks if t.name.startswith("@agg"))
    (rule,) = [r for r in task.rules if is_aggregate_rule(r)]
    assert body_projection(rule) is not None
    held = AggHeld("agg-x", "", 0)
    assert aggregate_limits(ctx, task, held, 0.05, 0.2, True) == (None, 0.2 * 5)
    assert aggregate_limits(ctx, task, None, 0.05, 0.2, True) == (0.05, None)
    assert aggregate_limits(ctx, task, held, 0.05, 0.2, False) == (0.05, 0.2)  # gated
