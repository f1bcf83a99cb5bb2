"""A gMark-style workload: a graph shaped by a schema and random UC2RPQ views over its labels.

Graph: each node type gets a range of integer ids (a fixed count, a proportion of N, or an
equal share of what is left). Per edge spec (source type, label, target type), each source
draws an out-degree from the out-distribution (or from the multiplicity: 1 -> 1, ? -> 0..1,
* -> 0..2, + -> 1..2) and each stub picks a target with probability proportional to a weight
drawn from the in-distribution (uniform if none): the configuration model gMark uses. Vectorized
with numpy; the same seed gives the same graph.

Views: random walks on the schema's type graph (forward a label, or backward `^label`) make
words; 1-2 words between the same types form a disjunction, starred (`*`) when it starts and
ends on the same type; 1-3 such path atoms form a chain or star conjunction: a UC2RPQ as a rule
with path atoms. gMark draws each view of a chosen selectivity class; here the views are linear
unless any is asked for: a drawn view that would cost more than LINEAR_TUPLES_PER_NODE tuples
per node on the graph is drawn again (selectivity.py), so the workload stays evaluable as the
graph grows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from levelflow.errors import LevelflowError
from levelflow.workloads.gmark_schema import (
    LINEAR_TUPLES_PER_NODE,
    Distribution,
    EdgeSpec,
    Schema,
)

# Out-degrees when a spec gives no out-distribution, by multiplicity: (min, max) uniform.
_MULTIPLICITY_DEGREES = {"1": (1, 1), "?": (0, 1), "*": (0, 2), "+": (1, 2)}
# Draws per view before giving up on finding one within the selectivity asked for.
MAX_DRAWS = 200


def type_ranges(schema: Schema, nodes: int) -> list[tuple[int, int]]:
    """Return per node type (first id, count): fixed counts, proportions of N, equal shares."""
    counts: list[int | None] = []
    for _, fixed, share in schema.types:
        counts.append(fixed if fixed is not None else
                      round(share * nodes) if share is not None else None)
    free = [i for i, c in enumerate(counts) if c is None]
    if free:
        rest = max(nodes - sum(c for c in counts if c is not None), len(free))
        for i in free:
            counts[i] = rest // len(free)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    return [(int(s), int(c)) for s, c in zip(starts, counts, strict=True)]


def sample(dist: Distribution | None, size: int, rng: np.random.Generator, default=(1, 1),
           cap: int | None = None) -> np.ndarray:
    """Return `size` non-negative integer draws from the distribution, at most `cap`."""
    if dist is None or dist.kind == "uniform":
        lo, hi = ((dist.params["min"], dist.params["max"]) if dist is not None else default)
        out = rng.integers(int(lo), int(hi) + 1, size)
    elif dist.kind == "gaussian":
        out = np.rint(rng.normal(dist.params["mu"], dist.params["sigma"], size)).astype(np.int64)
    else:  # numpy's zipf needs an exponent > 1
        out = rng.zipf(max(dist.params["alpha"], 1.01), size)
    out = np.maximum(out, 0)
    return np.minimum(out, cap) if cap is not None else out


def spec_edges(spec: EdgeSpec, ranges, rng: np.random.Generator) -> np.ndarray:
    """Return the (source, target) id pairs one edge spec generates, as an (m, 2) array."""
    (s0, ns), (t0, nt) = ranges[spec.source], ranges[spec.target]
    if not ns or not nt:
        return np.empty((0, 2), np.int64)
    out = sample(spec.out_dist, ns, rng, _MULTIPLICITY_DEGREES[spec.multiplicity], cap=nt)
    sources = np.repeat(np.arange(s0, s0 + ns, dtype=np.int64), out)
    if spec.in_dist is None:
        targets = rng.integers(t0, t0 + nt, len(sources))
    else:
        weights = sample(spec.in_dist, nt, rng).astype(float) + 1e-9
        cdf = np.cumsum(weights)
        picks = np.searchsorted(cdf, rng.random(len(sources)) * cdf[-1], side="right")
        targets = t0 + np.minimum(picks, nt - 1)
    return np.stack([sources, targets], axis=1)


def generate_graph(schema: Schema, nodes: int, seed: int) -> dict[str, np.ndarray]:
    """Return per label its distinct edges (m, 2), sorted; the same seed gives the same graph."""
    rng = np.random.default_rng(seed)
    ranges = type_ranges(schema, nodes)
    parts: dict[str, list[np.ndarray]] = {label: [] for label in schema.labels}
    for spec in schema.edges:
        parts[spec.label].append(spec_edges(spec, ranges, rng))
    return {label: np.unique(np.concatenate(p), axis=0) if p else np.empty((0, 2), np.int64)
            for label, p in parts.items()}


@dataclass(frozen=True, slots=True)
class _Step:
    """One schema edge walked forward or backward: from type, text (`label` or `^label`), to."""

    src: int
    text: str
    dst: int


def _steps(schema: Schema, ranges) -> dict[int, list[_Step]]:
    out: dict[int, list[_Step]] = {}
    for e in schema.edges:
        if ranges[e.source][1] and ranges[e.target][1]:
            out.setdefault(e.source, []).append(_Step(e.source, e.label, e.target))
            out.setdefault(e.target, []).append(_Step(e.target, "^" + e.label, e.source))
    return out


def _walk(steps, start: int, length: int, rng: random.Random) -> tuple[list[str], int]:
    """Return the labels of a random walk of at most `length` steps from `start`, and its end."""
    words, at = [], start
    for _ in range(length):
        # Not straight back over the label just walked (`a . ^a`): through a hub node (a
        # zipfian in-degree) that join is quadratic, and gMark's views are mostly linear.
        back = ("^" + words[-1]).replace("^^", "") if words else None
        options = [s for s in steps[at] if s.text != back]
        if not options:  # a dead end but for the way back: a shorter word
            break
        step = rng.choice(options)
        words.append(step.text)
        at = step.dst
    return words, at


def _loop(steps, start: int, rng: random.Random) -> list[str]:
    """Return up to two distinct words that lead from `start` back to it (maybe none)."""
    found: list[str] = []
    for _ in range(30):
        words, at = _walk(steps, start, rng.randint(1, 3), rng)
        if at == start and " . ".join(words) not in found:
            found.append(" . ".join(words))
            if len(found) == 2:
                break
    return found[:rng.randint(1, 2)]


def _path(steps, start: int, rng: random.Random) -> tuple[str, int]:
    """Return a random disjunction of words from `start` (starred when it loops) and its end."""
    if rng.random() < 0.5:  # a regular query's heart: a closure over a cycle of the schema
        loop = _loop(steps, start, rng)
        if loop:
            return f"({' | '.join(loop)}){rng.choice('*+')}", start
    first, end = _walk(steps, start, rng.randint(1, 3), rng)
    words = [" . ".join(first)]
    for _ in range(rng.randint(0, 1) * 10):  # a second word ending at the same type
        other, at = _walk(steps, start, rng.randint(1, 3), rng)
        if at == end and " . ".join(other) not in words:
            words.append(" . ".join(other))
            break
    return " | ".join(words), end


def generate_query(schema: Schema, ranges, name: str, rng: random.Random) -> str:
    """Return one UC2RPQ view as a rule over path atoms (a chain or a star of 1-3 atoms)."""
    steps = _steps(schema, ranges)
    start = rng.choice(sorted(steps))
    star = rng.random() < 0.3
    atoms, at, var = [], start, 0
    for k in range(rng.randint(1, 3)):
        expr, end = _path(steps, start if star else at, rng)
        src = "x0" if star else f"x{var}"
        atoms.append(f"[{expr}]({src}, x{k + 1})")
        at, var = end, k + 1
    return f"{name}(x0, x{var}) :- {', '.join(atoms)}."


def program_text(schema: Schema, queries: list[str]) -> str:
    """Return the levelflow program: one input relation per label, one output per view."""
    lines = ["// generated by `levelflow workload gmark`: labels as inputs, UC2RPQ views"]
    for label in schema.labels:
        lines += [f".decl {label}(x:number, y:number)", f".input {label}"]
    for rule in queries:
        name = rule.split("(", 1)[0]
        lines += [f".decl {name}(x:number, y:number)", rule, f".output {name}"]
    return "\n".join(lines) + "\n"


def draw_views(schema: Schema, ranges, edges: dict[str, np.ndarray], count: int,
               rng: random.Random, tuples_per_node: int | None) -> list[str]:
    """Return `count` random views; with `tuples_per_node`, each one costs at most that many
    tuples per node on these edges (selectivity.view_cost): the others are drawn again."""
    if count and not _steps(schema, ranges):
        raise LevelflowError("error: no edge of the schema joins two types that have nodes: "
                             "no view can be drawn (use --queries 0 for the graph alone)")
    if tuples_per_node is None:
        return [generate_query(schema, ranges, f"q{k}", rng) for k in range(count)]
    from levelflow.tasks import build_tasks, parse_program
    from levelflow.workloads.selectivity import view_cost

    relations = {label: pl.DataFrame({"c0": p[:, 0], "c1": p[:, 1]}) for label, p in edges.items()}
    budget = tuples_per_node * sum(c for _, c in ranges)
    views = []
    for k in range(count):
        for _ in range(MAX_DRAWS):
            rule = generate_query(schema, ranges, f"q{k}", rng)
            pt = build_tasks(parse_program(program_text(schema, [rule]), "<view>"))
            if view_cost(pt, dict(relations), budget) is not None:
                views.append(rule)
                break
        else:
            raise LevelflowError(f"error: no view of at most {tuples_per_node} tuples per node "
                                 f"in {MAX_DRAWS} draws; allow any view with --selectivity any")
    return views


def write_workload(schema: Schema, nodes: int, queries: int, seed: int, out: Path,
                   tuples_per_node: int | None = LINEAR_TUPLES_PER_NODE) -> dict:
    """Write program.dl and facts/<label>.facts under `out`; return the figures to show.

    With `tuples_per_node` (None: any view), every view is linear: it costs at most that many
    tuples per node of the graph (gMark's selectivity classes, measured by view_cost).
    """
    edges = generate_graph(schema, nodes, seed)
    ranges = type_ranges(schema, nodes)
    rng = random.Random(seed)
    views = draw_views(schema, ranges, edges, queries, rng, tuples_per_node)
    facts = out / "facts"
    facts.mkdir(parents=True, exist_ok=True)
    for label, pairs in edges.items():
        np.savetxt(facts / f"{label}.facts", pairs, fmt="%d", delimiter="\t")
    (out / "program.dl").write_text(program_text(schema, views))
    return {"nodes": sum(c for _, c in ranges), "edges": sum(len(p) for p in edges.values()),
            "labels": len(edges), "views": views}
