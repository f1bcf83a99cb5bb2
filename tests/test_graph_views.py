"""Graph views maintained over random epochs equal recomputation.

Views with path atoms over random labelled graphs: after every epoch of mixed edge insertions
and deletions, each view equals the networkx reference on the current edges. Non-recursive
view tasks are maintained by counting's factored delta rules (one per body atom: new versions
before it, old after it), closures by rank-based DRed. A gMark workload is checked the same
way against the naive evaluator.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402
from test_path_atoms import DECLS, random_edges, reference, write_facts  # noqa: E402

VIEWS = {"v_plus": "a+", "v_seq": "a+ . b", "v_star": "(a | ^c)*", "v_opt": "b? . ^c",
         "v_alt": "a . b | c"}


def views_program() -> str:
    lines = [DECLS]
    for name, expr in VIEWS.items():
        lines.append(f".decl {name}(x:number, y:number)\n{name}(x, y) :- [{expr}](x, y).\n"
                     f".output {name}\n")
    # the example: a conjunction of a path atom, an atom and a comparison
    lines.append(".decl cof(x:number, y:number)\n"
                 "cof(x, y) :- [a+ . b](x, c), b(y, c), x != y.\n.output cof\n")
    return "".join(lines)


def cof_reference(edges) -> set:
    reach = reference("a+ . b", edges)
    return {(x, y) for x, c in reach for y, c2 in edges["b"] if c == c2 and x != y}


def random_ops(rng, edges, nodes=9):
    """Return one epoch's ops (mixed, a few no-ops) and apply them to `edges`."""
    ops = []
    for _ in range(rng.randint(1, 5)):
        label = rng.choice("abc")
        if edges[label] and rng.random() < 0.5:
            row = rng.choice(sorted(edges[label]))
            edges[label].discard(row)
            ops.append((-1, label, row))
        else:
            row = (rng.randrange(nodes), rng.randrange(nodes))
            edges[label].add(row)
            ops.append((+1, label, row))
    return ops


def test_views_over_random_epochs_equal_networkx(spark, tmp_path):
    rng = random.Random(21)
    edges = random_edges(21)
    write_facts(tmp_path / "f0", edges)
    pt = build_tasks(parse_program(views_program(), "views.dl"))
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    for _ in range(2):
        for sign, label, row in random_ops(rng, edges):
            (session.insert if sign > 0 else session.remove)(label, row)
        result = session.commit()
        for task in pt.tasks:  # closures by DRed, the other view tasks by counting
            want = "dred" if task.recursive else "counting"
            assert result.strategies.get(task.name, want) == want, task.name
        for name, expr in VIEWS.items():
            got = {tuple(r) for r in session.relation(name).collect()}
            assert got == reference(expr, edges), f"{name} = [{expr}]"
        assert {tuple(r) for r in session.relation("cof").collect()} == cof_reference(edges)


def test_gmark_views_over_epochs_equal_recomputation(spark, tmp_path):
    from levelflow.workloads.gmark import write_workload
    from levelflow.workloads.gmark_schema import read_schema

    schema = read_schema(Path(__file__).parent / "data" / "gmark" / "social-network.xml")
    write_workload(schema, 120, 4, 5, tmp_path / "w")
    pt = build_tasks(parse_program((tmp_path / "w" / "program.dl").read_text(), "w.dl"))
    facts = {label: {tuple(map(int, line.split("\t"))) for line in
                     (tmp_path / "w" / "facts" / f"{label}.facts").read_text().splitlines()}
             for label in schema.labels}
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "w" / "facts",
                                           mode="incremental")
    rng = random.Random(5)
    for k in range(1):  # one epoch of mixed changes: every view task updated once
        for _ in range(8):
            label = rng.choice(sorted(facts))
            row = rng.choice(sorted(facts[label])) if facts[label] else None
            if row is not None and rng.random() < 0.5:
                facts[label].discard(row)
                session.remove(label, row)
            else:
                row = (rng.randrange(120), rng.randrange(120))
                facts[label].add(row)
                session.insert(label, row)
        session.commit()
        (tmp_path / f"ref{k}").mkdir()
        for label, rows in facts.items():
            (tmp_path / f"ref{k}" / f"{label}.facts").write_text(
                "".join(f"{x}\t{y}\n" for x, y in sorted(rows)))
        ref = naive_datalog.evaluate(pt, tmp_path / f"ref{k}")
        for name in pt.program.outputs:
            assert {tuple(r) for r in session.relation(name).collect()} == ref[name], name


class _Versions:
    """local_counting.Rows over old and new edge frames: each version one frame object."""

    def __init__(self, old: dict, new: dict, fresh: dict) -> None:
        import polars as pl

        def frame(rows):
            return pl.DataFrame(sorted(rows), schema={"c0": pl.Int64, "c1": pl.Int64},
                                orient="row")
        self.old = {n: frame(r) for n, r in old.items()}
        self.new = {n: frame(r) for n, r in new.items()}
        self.plus = {n: frame(r) for n, r in fresh.items()}
        self.empty = frame([])

    def changed(self, name: str) -> bool:
        return name in self.plus

    def version(self, name: str, new: bool) -> object:
        return (self.new if new else self.old)[name]

    def change(self, name: str, plus: bool) -> object:
        return self.plus.get(name, self.empty) if plus else self.empty


def test_view_rules_are_maintained_by_factored_delta_rules(spark, tmp_path, monkeypatch):
    """local_counting.count_changes (run where the view's counts live) evaluates
    ΔV = Σ_i new(A1..Ai-1) ⋈ ΔAi ⋈ old(Ai+1..An): n delta rules for n changed atoms (not
    2^n - 1), each over new versions before Δ and old after."""
    from levelflow.engine.incremental.strategies import counting_polars as local_counting

    edges = random_edges(4)
    text = DECLS + ".decl v(x:number, y:number)\nv(x, y) :- [a . b . c](x, y).\n.output v\n"
    pt = build_tasks(parse_program(text, "seq.dl"))
    fresh = {"a": {(20, 21)}, "b": {(21, 22)}, "c": {(22, 23)}}
    now = {label: edges[label] | fresh.get(label, set()) for label in edges}
    rows = _Versions(edges, now, fresh)
    task = next(t for t in pt.tasks if "v" in t.relations)
    rule = next(r for r in task.rules if r.body)
    calls = []
    real = local_counting.body_rows

    def spy(variant, decls, frames, first=None):
        atoms = {j: a.relation for j, a, _ in variant.body_atoms()}
        calls.append((first, all(frames[j] is rows.version(n, j < first)
                                 for j, n in atoms.items() if j != first)))
        return real(variant, decls, frames, first=first)

    monkeypatch.setattr(local_counting, "body_rows", spy)
    out = local_counting.count_changes((rule,), task.relations, pt.program.decls, rows, {})
    assert sorted(first for first, _ in calls) == [0, 1, 2] and all(ok for _, ok in calls)
    gained = {t for t in reference("a . b . c", now) - reference("a . b . c", edges)}
    assert {tuple(r[:2]) for r in out["v"].filter(out["v"]["_d"] > 0).rows()} >= gained
    assert (20, 23) in gained
    # The same epoch through a session: the view, counted in the driver, is the reference.
    write_facts(tmp_path / "f0", edges)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    for label, added in fresh.items():
        for row in added:
            session.insert(label, row)
    result = session.commit()
    assert result.strategies["v"] == "counting"
    assert result.spark_jobs["v"] == 0  # its counts are kept in the driver
    got = {tuple(r) for r in session.relation("v").collect()}
    assert got == reference("a . b . c", now)
