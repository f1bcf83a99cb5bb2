"""Epochs of counted tasks run where their counts are kept: a Python worker or the driver
(counting_*.py).

The share's update against counts from scratch over random epochs (negation with wildcards,
deletions crossing zero, own base and program facts), in process; then through Spark: a counted
view over a recursive task, whose counts the driver keeps (no job per epoch), and a missing
copy shipped again, each against the naive reference.
"""

from __future__ import annotations

import random
import sys
import uuid
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.incremental.backends.driver_rows import arrow_of, frame_of_table
from levelflow.engine.incremental.backends.worker import counting_share
from levelflow.engine.incremental.backends.worker.dred_share import MISS_REL, Spec
from levelflow.engine.incremental.backends.worker.share_job import Held, driver_input, next_token
from levelflow.engine.plans import resident
from levelflow.tasks import build_tasks, parse_program

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402
from test_incremental_properties import rows_of, write_facts  # noqa: E402

RULES = """.decl f(x:number, t:symbol)
.input f
.decl r(x:number, y:number)
.input r
r(x, z) :- e(x, y), e(y, z), !f(z, _).
r(x, x) :- f(x, "a"), !e(x, _).
r(x, y) :- e(x, y), !e(y, x).
r(1, 2).
"""
VIEW = ".decl e(x:number, y:number)\n.input e\n" + RULES
# The same view over a recursive task's relation (kept on the executors: dred_job.py).
TC_VIEW = """.decl edge(x:number, y:number)
.input edge
.decl e(x:number, y:number)
e(x, y) :- edge(x, y).
e(x, z) :- e(x, y), edge(y, z).
""" + RULES


def _reference(e: set, f: set, r: set) -> Counter:
    """Return VIEW's derivation counts of r computed directly in Python."""
    out = Counter()
    flagged = {x for x, _ in f}
    sources = {x for x, _ in e}
    for x, y in e:
        for y2, z in e:
            if y2 == y and z not in flagged:
                out[(x, z)] += 1
        if (y, x) not in e:
            out[(x, y)] += 1
    for x, t in f:
        if t == "a" and x not in sources:
            out[(x, x)] += 1
    for t in r:  # a base fact and the program fact r(1, 2) count one each
        out[t] += 1
    out[(1, 2)] += 1
    return out


def _held(rows: set, schema: dict):
    return frame_of_table(None, arrow_of(pl.DataFrame(sorted(rows), schema=schema,
                                                      orient="row")), None)


E, F = {"c0": pl.Int64, "c1": pl.Int64}, {"c0": pl.Int64, "c1": pl.String}


def _changed(rng: random.Random, now: set, fresh) -> tuple[set, set]:
    """Return (removed, added) of a random epoch of a relation."""
    gone = set(rng.sample(sorted(now), min(rng.choice([0, 1, 3]), len(now))))
    return gone, {fresh() for _ in range(rng.choice([0, 1, 3]))} - now


def _epoch(spec_frames: tuple) -> pl.DataFrame:
    """Return the share's output of an epoch run in the driver, from (spec, frames)."""
    spec, frames = spec_frames
    return counting_share.driver_share(spec, driver_input(None, spec, frames))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_worker_update_matches_counts_from_scratch(seed):
    rng = random.Random(seed)
    program = parse_program(VIEW)
    task = next(t for t in build_tasks(program).tasks if t.relations == ("r",))
    nodes = 8
    state = {"e": {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(12)},
             "f": {(rng.randrange(nodes), rng.choice("ab")) for _ in range(3)},
             "r": {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(2)}}
    fresh = {"e": lambda: (rng.randrange(nodes), rng.randrange(nodes)),
             "f": lambda: (rng.randrange(nodes), rng.choice("ab")),
             "r": lambda: (rng.randrange(nodes), rng.randrange(nodes))}
    schemas = {"e": E, "f": F, "r": E}
    lineage, token = uuid.uuid4().hex[:16], None
    crossed = 0
    for k in range(25):
        before = _reference(state["e"], state["f"], state["r"])
        ship = k == 0 or k % 7 == 0  # the first epoch, and now and then a miss
        pairs = []  # ((relation, kind), frame) of every source of the epoch
        for n in ("e", "f", "r"):
            gone, added = _changed(rng, state[n], fresh[n])
            kinds = ("fold", "fplus", "fminus") if n == "r" else ("old", "plus", "minus")
            for kind, rows in zip(kinds, (state[n], added, gone), strict=True):
                if rows or kind in counting_share.SHIPPED:
                    pairs.append(((n, kind), _held(rows, schemas[n])))
            state[n] = (state[n] - gone) | added
        change = [p for p in pairs if p[0][1] not in counting_share.SHIPPED]
        if ship and k:  # a token no worker has: MISS, nothing kept
            missed = _epoch(_spec(task, program, change, lineage, "9999999999-none"))
            assert missed["_rel"].to_list() == [MISS_REL]
        spec = _spec(task, program, pairs if ship else change, lineage, token)
        out = _epoch(spec)
        after = _reference(state["e"], state["f"], state["r"])
        touched = {(a, b): (o, nw) for a, b, o, nw in
                   out.select("o0_c0", "o0_c1", "_old", "_new").rows()}
        changed = {t for t in before.keys() | after.keys() if before[t] != after[t]}
        assert set(touched) == changed, k
        assert all(touched[t] == (before[t], after[t]) for t in changed), k
        crossed += sum((before[t] > 0) != (after[t] > 0) for t in changed)
        kept = resident.lookup(lineage, 0, spec[0].new_token)
        assert dict(zip(kept.counts["r"].select("c0", "c1").rows(),
                        kept.counts["r"]["_cnt"], strict=True)) == {
            t: c for t, c in after.items() if c > 0}, k
        assert set(kept.lower) == {"e", "f"}  # both read whole: a join, a wildcard negated
        token = spec[0].new_token
    assert crossed >= 5  # tuples appeared and vanished, not only counts moved


def test_a_relation_read_only_by_its_change_is_not_kept():
    """s(x) :- e(x, x) sums its change from e's Δ alone: the share keeps no copy of e, and
    its counts still follow e's epochs (a tuple and its self loop, removed and added again)."""
    program = parse_program(".decl e(x:number, y:number)\n.input e\n.decl s(x:number)\n"
                            "s(x) :- e(x, x).\ns(x) :- e(x, y), e(y, x), x != y.\n"
                            ".decl t(x:number)\nt(x) :- e(x, x).\n")
    task = next(t for t in build_tasks(program).tasks if t.relations == ("t",))
    rng = random.Random(5)
    now = {(rng.randrange(5), rng.randrange(5)) for _ in range(10)}
    lineage, token = uuid.uuid4().hex[:16], None
    for k in range(12):
        gone, added = _changed(rng, now, lambda: (rng.randrange(5), rng.randrange(5)))
        kinds = [("old", now, True), ("plus", added, False), ("minus", gone, False)]
        pairs = [(("e", kind), _held(rows, E)) for kind, rows, shipped in kinds
                 if rows or (shipped and k == 0)]
        now = (now - gone) | added
        spec = Spec(rules=task.rules, names=task.relations, decls=dict(program.decls),
                    sources=tuple(p for p, _ in pairs), facts={}, key=None, parts=1,
                    lineage=lineage, old_token=token, new_token=next_token(token))
        counting_share.driver_share(spec, driver_input(None, spec, [f for _, f in pairs]))
        kept = resident.lookup(lineage, 0, spec.new_token)
        assert kept.lower == {}, k
        assert sorted(kept.counts["t"]["c0"]) == sorted(x for x, y in now if x == y), k
        assert set(kept.counts["t"]["_cnt"]) <= {1}, k
        token = spec.new_token


def _spec(task, program, pairs, lineage, token) -> tuple[Spec, list]:
    """Return the Spec of an epoch over the ((relation, kind), frame) sources, and the frames."""
    spec = Spec(rules=tuple(r for r in task.rules if r.body), names=task.relations,
                decls=dict(program.decls), sources=tuple(s for s, _ in pairs),
                facts={"r": [(1, 2)]}, key=None, parts=1, lineage=lineage, old_token=token,
                new_token=next_token(token))
    return spec, [f for _, f in pairs]


def _session(spark, tmp_path, facts, text: str = TC_VIEW, **options):
    (tmp_path / "v.dl").write_text(text)
    write_facts(tmp_path / "f0", facts)
    return IncrementalSession.bootstrap(spark, tmp_path / "v.dl", tmp_path / "f0",
                                        mode="incremental", **options)


def _mixed(rng: random.Random, facts: dict, epochs: int):
    """Yield random mixed epochs as (removed, added) per relation; `facts` follows them."""
    fresh = {"edge": lambda: (rng.randrange(15), rng.randrange(15)),
             "f": lambda: (rng.randrange(15), rng.choice("ab")),
             "r": lambda: (rng.randrange(15), rng.randrange(15))}
    for _ in range(epochs):
        ops = {}
        for n, make in fresh.items():
            gone, added = _changed(rng, facts[n], make)
            if n == "edge" and not gone | added:
                added = {make()} - facts[n]
            ops[n] = (gone, added)
            facts[n] = (facts[n] - gone) | added
        yield ops


def _commit(session, ops):
    for n, (gone, added) in ops.items():
        for t in gone:
            session.remove(n, t)
        for t in added:
            session.insert(n, t)
    return session.commit()


def _check(session, facts, tmp: Path) -> None:
    write_facts(tmp, facts)
    ref = naive_datalog.evaluate(session.pt, tmp)
    for name in ("e", "r"):
        assert rows_of(session.relation(name)) == ref[name], name
        assert session.size(name) == len(ref[name]), name


def _facts(rng: random.Random) -> dict:
    return {"edge": {(rng.randrange(15), rng.randrange(15)) for _ in range(25)},
            "f": {(rng.randrange(15), rng.choice("ab")) for _ in range(4)},
            "r": {(1, 1), (1, 2)}}


@pytest.mark.parametrize("where", ["spark", "driver"])
def test_a_counted_view_runs_no_job_per_epoch_and_a_missing_copy_is_shipped_again(
        spark, tmp_path, where):
    """No job per epoch (the counts are in the driver); at epoch 3 the driver's copy goes
    missing (a version nobody has: MISS), the old versions are brought over, in a job where
    the tasks below ran on Spark (none where they ran in the driver, which holds them), and
    epoch 4 finds that copy: no job."""
    rng = random.Random(7)
    facts = _facts(rng)
    session = _session(spark, tmp_path, facts, **({"driver_rows": None} if where == "spark"
                                                  else {}))
    jobs = []
    for k, ops in enumerate(_mixed(rng, facts, 4), 1):
        if k == 3:
            held = session.snap.arranged["r"]
            session.snap.arranged["r"] = Held(held.lineage, "9999999999-none", 1)
        result = _commit(session, ops)
        _check(session, facts, tmp_path / f"ref{k}")
        assert result.strategies.get("r") == "counting", k
        assert session.snap.arranged["r"].in_driver, k  # its counts live in the driver
        jobs.append(result.spark_jobs["r"])
    # With program facts the bootstrap counts on the Spark side, then counts again in the
    # driver (backends/warm.py): the first epoch finds them as every later one does; the miss
    # takes the job that brings the old versions over.
    assert jobs[:2] == [0, 0] and jobs[3] == 0, jobs
    assert jobs[2] >= 1 if where == "spark" else jobs[2] == 0, jobs


def test_a_bootstrap_leaves_the_counts_in_the_driver(spark, tmp_path):
    """Without program facts (which the share counts as old ones), the bootstrap counts in
    the driver, where every epoch then finds them: no job, the first epoch as the next."""
    rng = random.Random(9)
    facts = _facts(rng)
    session = _session(spark, tmp_path, facts, TC_VIEW.replace("r(1, 2).\n", ""))
    assert session.snap.arranged["r"].in_driver
    _check(session, facts, tmp_path / "ref0")
    for k, ops in enumerate(_mixed(rng, facts, 2), 1):
        result = _commit(session, ops)
        _check(session, facts, tmp_path / f"ref{k}")
        assert result.spark_jobs["r"] == 0, k
