"""What keeping symbols as text costs a task: its fixpoint on strings against integer codes.

A task whose rules read or make text (`cat`, `substr`, `match`, ...) runs in the workers with
its symbols as strings (plans/encode.py: new symbols appear every round, so no dictionary made
before the fixpoint is complete). This bench runs one symbol-typed transitive closure both ways
in process, as a worker would: encoded (dictionary, encode, fixpoint, decode) and as text, then
the closure with a string functor in its recursive rule, and prints the seconds and ratios.

Run: .venv/bin/python bench/bench_symbol_text.py [--nodes N] [--width W]
"""

from __future__ import annotations

import argparse
import time

import polars as pl

from levelflow.engine.plans.encode import decode, dictionary, encode, encoded_program
from levelflow.engine.plans.fixpoint import run_task
from levelflow.tasks import build_tasks, parse_program

CLOSURE = """
.decl edge(x:symbol, y:symbol)
.decl path(x:symbol, y:symbol)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
"""
# The same closure, its recursive rule reading text: every task of this shape runs as text.
WITH_FUNCTOR = CLOSURE.replace("edge(y, z).", 'edge(y, z), !contains("#", z).')


def _edges(nodes: int, width: int) -> pl.DataFrame:
    """Return a layered DAG: each node links to `width` nodes of the next layer."""
    names = [f"node{i:07d}" for i in range(nodes)]
    pairs = [(names[i], names[(i // width + 1) * width + k])
             for i in range(nodes) for k in range(width)
             if (i // width + 1) * width + k < nodes]
    return pl.DataFrame(pairs, schema={"c0": pl.String, "c1": pl.String}, orient="row")


def _run(text: str, edges: pl.DataFrame, encoded: bool) -> tuple[float, int]:
    """Return (seconds, tuples) of the task's fixpoint, encoded or as text, decode included."""
    pt = build_tasks(parse_program(text, "bench.dl"))
    task = pt.task_of("path")
    decls = pt.program.decls
    rules = tuple(r for r in task.rules if r.body)
    t0 = time.perf_counter()
    symbols = dictionary([(decls["edge"], edges)], rules) if encoded else None
    coded_rules, coded_decls = encoded_program(rules, decls, symbols)
    lower = {"edge": encode(edges, decls["edge"], symbols)}
    outcome = run_task(coded_rules, task.relations, coded_decls, lower, {})
    path = decode(outcome.relation("path"), decls["path"], symbols)
    return time.perf_counter() - t0, path.height


def main() -> None:
    """Time the closure encoded, as text, and with a string functor; print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1200)
    ap.add_argument("--width", type=int, default=20)
    args = ap.parse_args()
    edges = _edges(args.nodes, args.width)
    best = {}
    for name, text, encoded in (("encoded", CLOSURE, True), ("text", CLOSURE, False),
                                ("text + contains", WITH_FUNCTOR, False)):
        runs = [_run(text, edges, encoded) for _ in range(3)]
        best[name] = min(t for t, _ in runs)
        print(f"{name:>16}: {best[name]:.2f} s, {runs[0][1]} path tuples (best of 3)")
    print(f"text / encoded: {best['text'] / best['encoded']:.2f}x; "
          f"with contains / encoded: {best['text + contains'] / best['encoded']:.2f}x")


if __name__ == "__main__":
    main()
