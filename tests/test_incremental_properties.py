"""Incremental maintenance against from-scratch evaluation, epoch after epoch.

Four program families (transitive closure, same generation, points-to with alias, stratified
negation with wildcard negations), random small fact sets and random sequences of mixed
insertions and deletions (some of them no-ops). After every epoch each maintained relation
must equal a from-scratch evaluation of the same base facts: the naive Python reference for
every epoch, and the Spark engine's `evaluate_program` on the last epoch of tc's sequence;
after negation's epochs, the maintained derivation counts equal counts from scratch.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from levelflow.engine.evaluate import evaluate_program
from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.incremental.strategies.counting_spark import count_scratch
from levelflow.engine.incremental.versions import TaskContext, Versions
from levelflow.tasks import build_tasks, parse_program

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402

TC = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl cyclic(x:number)
cyclic(x) :- path(x, x).
.output path
.output cyclic
"""

SG = """
.decl parent(c:symbol, p:symbol)
.input parent
.decl sg(x:symbol, y:symbol)
sg(x, y) :- parent(x, p), parent(y, p), x != y.
sg(x, y) :- parent(x, a), sg(a, b), parent(y, b).
.output sg
"""

POINTSTO = """
.decl new(v:symbol, h:symbol)
.decl assign(v:symbol, w:symbol)
.decl load(v:symbol, w:symbol, f:symbol)
.decl store(w:symbol, f:symbol, v:symbol)
.input new
.input assign
.input load
.input store
.decl vpt(v:symbol, h:symbol)
.decl hpt(g:symbol, f:symbol, h:symbol)
.decl alias(v:symbol, w:symbol)
vpt(v, h) :- new(v, h).
vpt(v, h) :- assign(v, w), vpt(w, h).
vpt(v, h) :- load(v, w, f), vpt(w, g), hpt(g, f, h).
hpt(g, f, h) :- store(w, f, v), vpt(w, g), vpt(v, h).
alias(v, w) :- vpt(v, h), vpt(w, h), v != w.
.output vpt
.output alias
"""

NEGATION = """
.decl node(x:number)
.decl edge(x:number, y:number)
.decl source(x:number)
.decl blocked(x:number, y:number)
.input node
.input edge
.input source
.input blocked
.decl open_edge(x:number, y:number)
open_edge(x, y) :- edge(x, y), !blocked(x, y).
.decl reachable(x:number)
reachable(x) :- source(x).
reachable(y) :- reachable(x), open_edge(x, y).
.decl unreachable(x:number)
unreachable(x) :- node(x), !reachable(x).
.decl safe(x:number)
safe(x) :- reachable(x), !blocked(x, _).
.decl dead_end(x:number)
dead_end(x) :- reachable(x), !open_edge(x, _).
.decl two_hop(x:number, z:number)
two_hop(x, z) :- open_edge(x, y), open_edge(y, z), x != z.
.decl walk(x:number)
walk(x) :- source(x), !blocked(x, _).
walk(y) :- walk(x), edge(x, y), !blocked(x, y).
.output walk
.output unreachable
.output safe
.output dead_end
.output two_hop
"""


def _num(rng, n):
    return rng.randrange(n)


def _sym(prefix, n):
    return lambda rng: f"{prefix}{rng.randrange(n)}"


# Per family: the program and, per input relation, a generator of one random tuple.
FAMILIES = {
    "tc": (TC, {"edge": lambda r: (_num(r, 7), _num(r, 7))}),
    "sg": (SG, {"parent": lambda r: (_sym("p", 8)(r), _sym("p", 4)(r))}),
    "pointsto": (POINTSTO, {
        "new": lambda r: (_sym("v", 6)(r), _sym("o", 3)(r)),
        "assign": lambda r: (_sym("v", 6)(r), _sym("v", 6)(r)),
        "load": lambda r: (_sym("v", 6)(r), _sym("v", 6)(r), _sym("f", 2)(r)),
        "store": lambda r: (_sym("v", 6)(r), _sym("f", 2)(r), _sym("v", 6)(r)),
    }),
    "negation": (NEGATION, {
        "node": lambda r: (_num(r, 8),),
        "edge": lambda r: (_num(r, 8), _num(r, 8)),
        "source": lambda r: (_num(r, 8),),
        "blocked": lambda r: (_num(r, 8), _num(r, 8)),
    }),
}
SIZES = {"edge": 9, "parent": 9, "new": 4, "assign": 5, "load": 3, "store": 3, "node": 6,
         "source": 2, "blocked": 3}


def write_facts(factdir: Path, facts: dict[str, set]) -> None:
    factdir.mkdir(parents=True, exist_ok=True)
    for name, rows in facts.items():
        (factdir / f"{name}.facts").write_text(
            "".join("\t".join(map(str, row)) + "\n" for row in sorted(rows)))


def rows_of(df) -> set[tuple]:
    return {tuple(r) for r in df.collect()}


def random_epochs(rng, gens, facts, epochs):
    """Yield the ops of `epochs` random mixed updates (a few are no-ops); `facts` follows them."""
    for _ in range(epochs):
        ops = []
        for _ in range(rng.randint(1, 4)):
            name = rng.choice(sorted(gens))
            current = sorted(facts[name])
            if current and rng.random() < 0.5:
                row = rng.choice(current)
                ops.append((-1, name, row))
                facts[name].discard(row)
            else:
                row = gens[name](rng)
                ops.append((+1, name, row))
                facts[name].add(row)
        if rng.random() < 0.5:  # a no-op: remove something absent
            name = rng.choice(sorted(gens))
            row = gens[name](rng)
            if row not in facts[name]:
                ops.append((-1, name, row))
        yield ops


def check_against_reference(session, pt, facts, tmp: Path) -> None:
    write_facts(tmp, facts)
    ref = naive_datalog.evaluate(pt, tmp)
    for name in pt.program.decls:
        got = rows_of(session.relation(name))
        assert got == ref[name], f"{name}: extra {got - ref[name]}, missing {ref[name] - got}"
        assert session.size(name) == len(ref[name]), name


def start_family(spark, tmp_path, family: str, seed: int, **options):
    """Return (session, ProgramTasks, facts, generators, rng): a family on random facts."""
    text, gens = FAMILIES[family]
    rng = random.Random(seed)
    pt = build_tasks(parse_program(text, f"{family}.dl"))
    facts = {name: {gen(rng) for _ in range(SIZES[name])} for name, gen in gens.items()}
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental",
                                           **options)
    return session, pt, facts, gens, rng


# Where the tasks run: these small programs' in the driver (plans/driver.py) by default, and
# on Spark (the executors keep each task's state) when the session runs nothing there.
WHERE = {"driver": {}, "spark": {"driver_rows": None}}


@pytest.mark.parametrize("where", sorted(WHERE))
@pytest.mark.parametrize("family,seed", [("tc", 1), ("sg", 2), ("pointsto", 3),
                                         ("negation", 4)])
def test_epochs_match_from_scratch(spark, tmp_path, family, seed, where):
    from test_incremental_ranks import assert_ranks_valid  # it imports this module
    session, pt, facts, gens, rng = start_family(spark, tmp_path, family, seed, **WHERE[where])
    check_against_reference(session, pt, facts, tmp_path / "ref0")
    for k, ops in enumerate(random_epochs(rng, gens, facts, 2), 1):
        for sign, name, row in ops:
            (session.insert if sign > 0 else session.remove)(name, row)
        result = session.commit()
        assert result.epoch == k
        assert set(result.strategies.values()) <= {"counting", "dred"}
        check_against_reference(session, pt, facts, tmp_path / f"ref{k}")
        assert_ranks_valid(session, pt)  # else a later deletion can go wrong
    if family == "negation":
        assert_counts_recounted(spark, session, pt)
    if family != "tc":
        return
    # The engine's own from-scratch evaluation agrees too (once: it costs as much as an epoch).
    write_facts(tmp_path / "last", facts)
    scratch = evaluate_program(spark, pt, tmp_path / "last")
    for name in pt.program.decls:
        assert rows_of(session.relation(name)) == rows_of(scratch[name]), name


def assert_counts_recounted(spark, session, pt) -> None:
    """The maintained derivation counts of counted relations equal counts from scratch."""
    snap = session.snap
    assert {"open_edge", "unreachable", "safe", "dead_end", "two_hop"} <= snap.counted
    versions = {n: Versions(pt.program.decls[n], snap.tuples(n), snap.rows[n])
                for n in pt.program.decls}
    base = {n: Versions(pt.program.decls[n], snap.base[n], snap.base_rows[n])
            for n in pt.program.inputs}
    ctx = TaskContext(spark, pt.program, versions, {}, base)
    for task in pt.tasks:
        if task.relations[0] not in snap.counted:
            continue
        fresh = count_scratch(ctx, task)
        for name in task.relations:
            assert rows_of(snap.rel[name]) == rows_of(fresh[name]), name


def test_mixed_insert_and_remove_of_same_fact_in_one_epoch(spark, tmp_path):
    pt = build_tasks(parse_program(TC, "tc.dl"))
    write_facts(tmp_path / "f", {"edge": {(1, 2), (2, 3)}})
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f", mode="incremental")
    session.insert("edge", (3, 1))
    session.remove("edge", (3, 1))  # net: nothing
    session.insert("edge", (1, 2))  # already there: a no-op with a note
    result = session.commit()
    assert result.ran == 0 and result.deltas == {}
    assert any("already present" in n for n in result.notes)
    assert rows_of(session.relation("path")) == {(1, 2), (2, 3), (1, 3)}


def test_noop_notes_count_only_facts_there_or_absent_before_the_epoch(spark, tmp_path):
    pt = build_tasks(parse_program(TC, "tc.dl"))
    write_facts(tmp_path / "f", {"edge": {(1, 2), (2, 3)}})
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f", mode="incremental")
    for row in [(4, 5), (4, 5), (1, 2)]:  # a new fact listed twice is inserted, not a no-op
        session.insert("edge", row)
    for row in [(2, 3), (2, 3), (9, 9)]:  # a fact removed twice was there: removed
        session.remove("edge", row)
    result = session.commit()
    assert result.notes == ["note: 1 inserted fact(s) of edge already present (no-op)",
                            "note: 1 removed fact(s) of edge not present (no-op)"]
    assert rows_of(session.relation("edge")) == {(1, 2), (4, 5)}
