"""What a generated view costs on its graph, measured before it is kept: gMark's selectivity.

gMark draws each query of a chosen selectivity class, by how its answer grows with the graph
(constant, linear, quadratic), so that a workload of 10 views stays evaluable as the graph
grows. Here the class is measured rather than predicted: the candidate view is evaluated in
this process on the generated graph itself, task by task as a worker runs them, under a budget
of tuples per node. Nothing larger than the budget is ever built: before a rule runs, the
matches of each prefix of its body are counted by message passing over the body's tree of
variables (no join is materialized); before a closure runs, its pairs are estimated by BFS from
a sample of its sources, with the edges its search walks. The view's cost is the tuples its
tasks derive, its rules' largest prefix matches and its closures' walks.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from levelflow.engine.plans.closure import Adjacency, bfs_layers, task_evaluator
from levelflow.tasks.ast import Atom, Const, Var
from levelflow.tasks.tasks import ProgramTasks


def closure_sample(src: np.ndarray, dst: np.ndarray, sample: int = 64, seed: int = 0
                   ) -> tuple[int, int]:
    """Return the closure's (pairs, edges its BFS walks), estimated from a sample of sources."""
    if not len(src):
        return 0, 0
    adj = Adjacency(src, dst)
    sources = adj.ids(np.unique(src))
    picked = np.random.default_rng(seed).choice(sources, min(sample, len(sources)),
                                                replace=False)
    found = [t for _, t in bfs_layers(adj, np.sort(picked))]
    pairs = sum(len(t) for t in found)
    walks = sum(int(adj.deg[t].sum()) for t in found)  # each pair (s, t) walks t's out-edges
    scale = len(sources) / len(picked)
    return round(pairs * scale), round(walks * scale)


def _weights(atom: Atom, frame: pl.DataFrame) -> tuple[tuple[str, ...], pl.DataFrame] | None:
    """Return (the atom's distinct variables, their values `v:<name>` counted in `w`), or None."""
    names: list[str] = []
    for i, arg in enumerate(atom.args):
        col = frame.columns[i]
        if isinstance(arg, Const):
            frame = frame.filter(pl.col(col) == arg.value)
        elif isinstance(arg, Var) and arg.name in names:  # r(x, x)
            frame = frame.filter(pl.col(col) == pl.col(frame.columns[names.index(arg.name)]))
        if isinstance(arg, Var) and arg.name not in names:
            names.append(arg.name)
            frame = frame.rename({col: f"v:{arg.name}"})
    keep = [f"v:{n}" for n in names]
    if len(keep) > 2:
        return None
    if not keep:
        return (), pl.DataFrame({"w": [float(frame.height)]})
    return tuple(names), frame.group_by(keep).agg(pl.len().cast(pl.Float64).alias("w"))


def _times(a: pl.DataFrame | None, b: pl.DataFrame, on: str) -> pl.DataFrame:
    """Return per value of `on` the product of two weightings (None weighs 1 everywhere)."""
    if a is None:
        return b
    return a.join(b, on=on).select(on, (pl.col("w") * pl.col("w_right")).alias("w"))


def _tree_total(weights: list[tuple[tuple[str, ...], pl.DataFrame]]) -> float | None:
    """Return the matches of atoms whose variables form a forest (product over its trees)."""
    edges = [(vs, f) for vs, f in weights if len(vs) == 2]
    unary: dict[str, list[pl.DataFrame]] = {}
    total = 1.0
    for vs, f in weights:
        if len(vs) == 1:
            unary.setdefault(vs[0], []).append(f)
        elif not vs:
            total *= float(f["w"][0])
    variables = {v for vs, _ in weights for v in vs}
    seen: set[str] = set()

    def weigh(v: str, parent: int | None) -> pl.DataFrame | None:
        seen.add(v)
        acc = None
        for f in unary.get(v, []):
            acc = _times(acc, f.rename({f"v:{v}": "n"}), "n")
        for i, ((a, b), f) in enumerate(edges):
            if i == parent or v not in (a, b):
                continue
            u = b if v == a else a
            if u in seen:
                raise _Cycle
            msg = f.rename({f"v:{v}": "n", f"v:{u}": "m"})
            below = weigh(u, i)
            if below is not None:  # each edge (n, m) weighs as many matches as m's subtree
                msg = msg.join(below, left_on="m", right_on="n").select(
                    "n", (pl.col("w") * pl.col("w_right")).alias("w"))
            acc = _times(acc, msg.group_by("n").agg(pl.col("w").sum()), "n")
        return acc

    try:
        for v in sorted(variables):
            if v not in seen:
                root = weigh(v, None)
                total *= float(root["w"].sum()) if root is not None else 0.0
    except _Cycle:
        return None
    return total


class _Cycle(Exception):
    """The body's variables have a cycle: its matches are not counted."""


def body_matches(body, relations: Mapping[str, pl.DataFrame]) -> float | None:
    """Return the most matches of any prefix of a body's positive atoms (None: not a forest)."""
    weights, most = [], 0.0
    for lit in body:
        if not isinstance(lit, Atom):  # negations and constraints only filter matches
            continue
        w = _weights(lit, relations[lit.relation])
        if w is None:
            return None
        weights.append(w)
        count = _tree_total(weights)
        if count is None:
            return None
        most = max(most, count)
    return most


def view_cost(pt: ProgramTasks, relations: dict[str, pl.DataFrame], budget: int) -> int | None:
    """Return what evaluating the program's derived tasks costs, or None once past `budget`.

    `relations` holds the input relations (columns c0, c1); the derived ones are added to it.
    """
    cost = 0
    for task in pt.tasks:
        if task.input and not task.rules:
            continue
        if task.closure:
            (base,) = [r for r in task.rules if len(r.body) == 1]
            inner = relations[base.body[0].relation]
            cost += sum(closure_sample(inner["c0"].to_numpy(), inner["c1"].to_numpy()))
        else:
            for rule in task.rules:
                cost += int(body_matches(rule.body, relations) or 0)
        if cost > budget:
            return None
        run = task_evaluator(task.closure, ranked=False)  # as a from-scratch run's workers do
        outcome = run(task.rules, task.relations, pt.program.decls, relations, {})
        for name in task.relations:
            relations[name] = outcome.relation(name).unique()
            cost += relations[name].height
    return cost if cost <= budget else None
