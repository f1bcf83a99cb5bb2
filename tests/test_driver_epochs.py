"""A state whose epochs ran in the driver is the state Spark's epochs write.

The same program, facts and epochs, once with every task in the driver (the default for these
small inputs) and once on Spark (`driver_rows=None`): after each epoch both state directories
hold the same manifest fields and, per stored relation, the same rows with the same ranks or
derivation counts, read back from Parquet files of the same schemas. That the tuples are the
naive reference's is tests/test_incremental_properties.py's check, under both.
"""

from __future__ import annotations

import random

import polars as pl
import pyarrow.parquet as pq
import pytest
from test_incremental_properties import FAMILIES, SIZES, random_epochs, write_facts
from test_incremental_ranks import assert_ranks_valid

from levelflow.engine.evaluate import RANK
from levelflow.engine.incremental import IncrementalSession, StateDir
from levelflow.engine.incremental.state.local_base import local_base
from levelflow.engine.incremental.state.write import stored_schema
from levelflow.engine.types import column_names
from levelflow.tasks import build_tasks, parse_program


def _stored(state: StateDir, program) -> dict[str, pl.DataFrame]:
    """Return every stored relation and base (with its `_it` or `_cnt`) as a sorted frame,
    its base and segments read with pyarrow."""
    data = state.manifest()
    out = {}
    for kind, table in (("rel", data["relations"]), ("base", data["base"])):
        for name, info in table.items():
            if info["epoch"] is None:
                continue
            schema = stored_schema(program, name, kind, set(data["counted"]))
            rows = local_base(state.epochs, kind, name, info, None, schema,
                              column_names(program.decls[name].arity))
            out[f"{kind}/{name}"] = pl.from_arrow(rows).sort(pl.all())
    return out


def _schemas(state: StateDir) -> dict:
    """Return the Parquet schema of each stored directory, by kind and relation (a segment's
    under ("seg", kind, relation): its rows carry an op, a base's a rank)."""
    return {p.relative_to(state.epochs).parts[1:-1]: pq.read_schema(p).remove_metadata()
            for p in state.epochs.rglob("*.parquet")}


def _fields(state: StateDir) -> dict:
    data = state.manifest()
    return {k: data[k] for k in ("format", "epoch", "counted", "max_rank", "labelled")} | {
        kind: {n: info["rows"] for n, info in data[kind].items()}
        for kind in ("relations", "base")}


# The program's own facts in an input relation and beside rules, aggregates and a nullary input:
# bootstrapped in the driver too (counted from empty, every counted tuple new, the facts too).
FACTS_AND_AGGREGATES = ("""
.decl edge(x:number, y:number)
.input edge
edge(0, 1).
.decl node(x:number)
node(9).
node(x) :- edge(x, _).
node(y) :- edge(_, y).
.decl degree(x:number, n:number)
degree(x, n) :- node(x), n = count : { edge(x, _) }.
.decl total(n:number)
total(n) :- n = sum y : { edge(_, y) }.
.decl flag()
.input flag
.decl flagged(x:number)
flagged(x) :- node(x), flag().
.output node
.output degree
.output total
.output flagged
""", {"edge": lambda r: (r.randrange(6), r.randrange(6)), "flag": lambda r: ()})


@pytest.mark.parametrize("family,seed", [("tc", 5), ("negation", 6), ("facts", 7)])
def test_epochs_in_the_driver_write_the_state_spark_writes(spark, tmp_path, family, seed):
    text, gens = FAMILIES[family] if family != "facts" else FACTS_AND_AGGREGATES
    rng = random.Random(seed)
    pt = build_tasks(parse_program(text, f"{family}.dl"))
    facts = {name: {gen(rng) for _ in range(SIZES.get(name, 1))} for name, gen in gens.items()}
    write_facts(tmp_path / "f0", facts)
    now = {name: set(rows) for name, rows in facts.items()}  # as the epochs leave them
    sessions = {where: IncrementalSession.bootstrap(
        spark, pt, tmp_path / "f0", tmp_path / where, **options)
        for where, options in (("driver", {}), ("spark", {"driver_rows": None}))}
    states = {where: StateDir(tmp_path / where) for where in sessions}
    # A task whose epoch ran another strategy in the driver (negation's walk, whose negated
    # input changed: recomputed there, where Spark runs DRed's rounds) ranks its tuples by
    # other rounds; its tuples and the rank invariant still agree.
    diverged: set[str] = set()
    for k, ops in enumerate([[]] + list(random_epochs(rng, gens, facts, 3))):
        for session in sessions.values():
            if k:
                for sign, name, row in ops:
                    (session.insert if sign > 0 else session.remove)(name, row)
                assert session.commit().epoch == k
        jobs = sessions["driver"].last.spark_jobs
        assert jobs == dict.fromkeys(jobs, 0), k  # nothing of it ran on Spark
        ran = {w: s.last.strategies for w, s in sessions.items()}
        for n, strategy in ran["driver"].items():
            if strategy != ran["spark"].get(n):
                diverged |= set(pt.tasks[pt.graph.names.index(n)].relations)
        fields = {w: _fields(states[w]) for w in states}
        for f in fields.values():
            f["max_rank"] = {n: r for n, r in f["max_rank"].items() if n not in diverged}
            f["labelled"] = [n for n in f["labelled"] if n not in diverged]
        assert fields["driver"] == fields["spark"], k
        driver, on_spark = (_stored(states[w], pt.program) for w in ("driver", "spark"))
        assert driver.keys() == on_spark.keys()
        for name, rows in driver.items():
            other = on_spark[name]
            if name.removeprefix("rel/") in diverged:
                rows, other = (df.drop(RANK).sort(pl.all()) for df in (rows, other))
            assert rows.equals(other), (k, name)
        assert_ranks_valid(sessions["driver"], pt)
        if family == "facts":  # its tuples against the naive reference here
            from naive_datalog import evaluate as naive_evaluate

            for sign, name, row in ops if k else []:
                (now[name].add if sign > 0 else now[name].discard)(row)
            write_facts(tmp_path / f"ref{k}", now)
            ref = naive_evaluate(pt, tmp_path / f"ref{k}")
            for name in pt.program.decls:
                got = {tuple(r) for r in sessions["driver"].relation(name).collect()}
                if not pt.program.decls[name].arity:  # held as the row (true,) while it holds
                    got = {()} if got else set()
                assert got == ref[name], (k, name)
    driver, on_spark = _schemas(states["driver"]), _schemas(states["spark"])
    for where in driver.keys() & on_spark.keys():
        assert driver[where] == on_spark[where], where


def test_a_share_the_driver_lost_is_shipped_from_the_stored_state(spark, tmp_path):
    from levelflow.engine.incremental.backends.worker.share_job import Held

    text, _ = FAMILIES["tc"]
    pt = build_tasks(parse_program(text, "tc.dl"))
    edges = {(1, 2), (2, 3), (3, 1), (4, 5)}
    write_facts(tmp_path / "f0", {"edge": edges})
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", tmp_path / "st",
                                           mode="incremental")  # DRed, however large
    held = session.snap.arranged["path"]
    assert held.in_driver
    # A version the driver does not keep: the share answers MISS and is shipped again.
    session.snap.arranged["path"] = Held(held.lineage, "9999999999-none", 1, in_driver=True)
    session.remove("edge", (3, 1))
    session.insert("edge", (5, 6))
    result = session.commit()
    assert result.strategies["path"] == "dred" and result.spark_jobs["path"] == 0
    write_facts(tmp_path / "ref", {"edge": edges - {(3, 1)} | {(5, 6)}})
    from naive_datalog import evaluate as naive_evaluate

    ref = naive_evaluate(pt, tmp_path / "ref")
    for name in pt.program.decls:
        assert {tuple(r) for r in session.relation(name).collect()} == ref[name], name


def test_run_state_and_update_of_small_tasks_need_no_spark(cli, tmp_path, no_spark):
    """`run --state` and `update` of examples/tc with a Spark that cannot start: every task
    runs in the driver, so neither waits for it, and the epoch equals a run on its facts."""
    from pathlib import Path

    tc = Path(__file__).resolve().parents[1] / "examples" / "tc"
    code, out, err = cli(["run", tc / "program.dl", "-F", tc / "facts", "-D", tmp_path / "o",
                          "--state", tmp_path / "st"])
    assert (code, err) == (0, "") and out.startswith("ran 3 of 3 tasks")
    (tmp_path / "d.diff").write_text("+edge(21,22)\n-edge(1,2)\n")
    code, out, err = cli(["update", tmp_path / "st", "--insert", tmp_path / "d.diff",
                          "-D", tmp_path / "o2"])
    assert (code, err) == (0, ""), err
    assert "strategies: edge=counting, path=dred, cyclic=counting" in out
    facts = tmp_path / "f1"
    facts.mkdir()
    lines = (tc / "facts" / "edge.facts").read_text().splitlines()
    (facts / "edge.facts").write_text("\n".join([ln for ln in lines if ln != "1\t2"]
                                                + ["21\t22"]) + "\n")
    code, _, err = cli(["run", tc / "program.dl", "-F", facts, "-D", tmp_path / "o3"])
    assert code == 0, err
    for name in ("path.csv", "cyclic.csv"):
        assert sorted((tmp_path / "o2" / name).read_text().splitlines()) == \
            sorted((tmp_path / "o3" / name).read_text().splitlines()), name


def test_a_recompute_in_the_driver_plans_by_the_rows_its_task_reads(tmp_path):
    """An epoch recomputing path (--strategy scratch) with a Spark that cannot start: path
    reads 4 edges, under the session's 100 driver rows, and runs in the driver however large
    an input no rule reads (big: 300 facts); its tuples are the naive reference's."""
    from levelflow.engine.incremental.backends.driver_rows import rows_of
    from levelflow.engine.session import DeferredSession

    def no_spark():
        raise AssertionError("Spark was asked for")

    text = (".decl edge(x:number, y:number)\n.input edge\n.decl big(x:number)\n.input big\n"
            ".decl path(x:number, y:number)\n.output path\npath(x, y) :- edge(x, y).\n"
            "path(x, z) :- path(x, y), edge(y, z).\n")
    pt = build_tasks(parse_program(text, "tc.dl"))
    write_facts(tmp_path / "f0", {"edge": {(1, 2), (2, 3), (3, 4)},
                                  "big": {(i,) for i in range(300)}})
    spark = DeferredSession(no_spark)
    IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", tmp_path / "st").close()
    session = IncrementalSession.open(spark, tmp_path / "st", driver_rows=100, mode="scratch")
    session.insert("edge", (4, 5))
    result = session.commit()
    assert result.strategies["path"] == "scratch"
    write_facts(tmp_path / "ref", {"edge": {(1, 2), (2, 3), (3, 4), (4, 5)}, "big": set()})
    from naive_datalog import evaluate as naive_evaluate

    want = naive_evaluate(pt, tmp_path / "ref")["path"]
    assert len(want) == 10
    held = rows_of(session.snap.tuples("path"))  # the driver holds them: no Spark to ask
    assert set(zip(*(c.to_pylist() for c in held.columns), strict=True)) == want


def test_reading_held_relations_back_equals_their_spark_frames(spark, tmp_path):
    """session.relation(..).collect() and .count() of rows the driver holds start no Spark
    job, and give what the built DataFrame gives: names, values and their Python types."""
    from levelflow.engine.session import jobs_started

    text = """
.decl e(src:number, dst:number)
.input e
.decl w(name:symbol, v:float, u:unsigned)
w(cat("n", to_string(x)), to_float(x) / 4.0, to_unsigned(y)) :- e(x, y).
.decl none(x:number)
none(x) :- e(x, x).
.decl flag()
flag() :- e(1, _).
"""
    write_facts(tmp_path, {"e": {(1, 2), (3, 5), (-4, 7)}})
    s = IncrementalSession.bootstrap(spark, build_tasks(parse_program(text, "p.dl")), tmp_path)
    before = jobs_started(spark)
    held = {n: (s.relation(n).collect(), s.relation(n).count()) for n in s.program.decls}
    assert jobs_started(spark) == before  # nothing built, nothing run
    assert sorted(held["w"][0]) == [("n-4", -1.0, 7), ("n1", 0.25, 2), ("n3", 0.75, 5)]
    for name, (rows, count) in held.items():
        built = s.relation(name).force().collect()
        assert count == len(built) == len(rows)
        assert sorted(rows) == sorted(built), name
        assert [r.__fields__ for r in rows[:1]] == [r.__fields__ for r in built[:1]]
        assert {tuple(map(type, r)) for r in rows} == {tuple(map(type, r)) for r in built}
    assert held["none"][1] == 0 and held["flag"][1] == 1
