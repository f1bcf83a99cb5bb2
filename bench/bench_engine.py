"""Benchmark `levelflow run` on Spark: a big transitive closure, scaled points-to, -j 2 vs -j 1.

    .venv/bin/python bench/bench_engine.py            # full sizes (TC with ~1.2M pairs)
    .venv/bin/python bench/bench_engine.py --quick    # small sizes, a smoke run

Facts are generated (seeded) into a temp dir. Every result count is checked against a plain
Python computation. Printed per workload: wall time per task (and fixpoint rounds), the Spark time
(worker busy time), the scheduling time (inside scheduler calls), and the ratios to the references:
seconds per TC round against the 0.8 s/round measured on this machine class for a layered TC
(shared notes), and the speed-up of -j 2 over -j 1 on a program with independent tasks (goal > 1).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from levelflow.engine.runner import run_program
from levelflow.engine.session import make_session
from levelflow.tasks import build_tasks, parse_program

REF_SECONDS_PER_ROUND = 0.8  # layered TC, 10k edges, 39 rounds, ~34 s (notes/spark-local.md)

TC_RULES = """
.decl edge(x:number, y:number)
.input edge
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.printsize path
"""

POINTSTO_RULES = """
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
.printsize vpt
.printsize hpt
.printsize alias
"""


# ---------------------------------------------------------------------------------------------
# Generated inputs and their plain-Python reference counts


def layered_graph(layers: int, width: int, degree: int, seed: int) -> list[tuple[int, int]]:
    """Return the edges of a layered DAG: each node links to `degree` random nodes below it."""
    rng = random.Random(seed)
    edges = set()
    for layer in range(layers - 1):
        for i in range(width):
            u = layer * width + i
            for j in rng.sample(range(width), degree):
                edges.add((u, (layer + 1) * width + j))
    return sorted(edges)


def closure_size(edges: list[tuple[int, int]]) -> int:
    """Return the number of pairs in the transitive closure (bitsets, reverse topological order)."""
    children: dict[int, list[int]] = {}
    for u, v in edges:
        children.setdefault(u, []).append(v)
    reach: dict[int, int] = {}
    for u in sorted({u for e in edges for u in e}, reverse=True):  # ids grow layer by layer
        bits = 0
        for v in children.get(u, ()):
            bits |= (1 << v) | reach[v]
        reach[u] = bits
    return sum(bin(b).count("1") for b in reach.values())


def pointsto_facts(variables: int, objects: int, fields: int, assigns: int, loads: int,
                   stores: int, seed: int, layers: int = 4) -> dict[str, list[tuple]]:
    """Return random new/assign/load/store facts over v<i>, o<i>, f<i> symbols.

    Variables are split into `layers`; assignments and loads copy from one layer into the next,
    which bounds the fixpoint's depth (a random assignment graph has very long chains).
    """
    rng = random.Random(seed)
    per_layer = max(variables // layers, 1)

    def var(layer: int) -> str:
        return f"v{layer * per_layer + rng.randrange(per_layer)}"

    def fld() -> str:
        return f"f{rng.randrange(fields)}"

    def layer() -> int:
        return rng.randrange(layers - 1)

    new, assign, load, store = set(), set(), set(), set()
    for h in range(objects):
        new.add((var(rng.randrange(layers)), f"o{h}"))
    for _ in range(assigns):
        i = layer()
        assign.add((var(i + 1), var(i)))
    for _ in range(loads):
        i = layer()
        load.add((var(i + 1), var(i), fld()))
    for _ in range(stores):
        i = rng.randrange(layers)
        store.add((var(i), fld(), var(i)))
    return {"new": sorted(new), "assign": sorted(assign), "load": sorted(load),
            "store": sorted(store)}


def pointsto_counts(facts: dict[str, list[tuple]]) -> dict[str, int]:
    """Return |vpt|, |hpt|, |alias| by a plain semi-naive fixpoint over Python sets."""
    vpt: dict[str, set[str]] = {}
    hpt: dict[tuple[str, str], set[str]] = {}
    assign_from: dict[str, list[str]] = {}  # w -> [v] for v = w
    load_from: dict[str, list[tuple[str, str]]] = {}  # w -> [(v, f)] for v = w.f
    store_base: dict[str, list[tuple[str, str]]] = {}  # w -> [(f, v)] for w.f = v
    store_val: dict[str, list[tuple[str, str]]] = {}  # v -> [(w, f)] for w.f = v
    for v, w in facts["assign"]:
        assign_from.setdefault(w, []).append(v)
    for v, w, f in facts["load"]:
        load_from.setdefault(w, []).append((v, f))
    for w, f, v in facts["store"]:
        store_base.setdefault(w, []).append((f, v))
        store_val.setdefault(v, []).append((w, f))
    loads_of: dict[tuple[str, str], list[str]] = {}  # (g, f) -> [v] with v = w.f, w -> g
    dv = list(facts["new"])
    dh: list[tuple[str, str, str]] = []
    while dv or dh:
        nv, nh = [], []
        for v, h in dv:
            if h in vpt.setdefault(v, set()):
                continue
            vpt[v].add(h)
            nv.append((v, h))
        for g, f, h in dh:
            if h in hpt.setdefault((g, f), set()):
                continue
            hpt[(g, f)].add(h)
            nh.append((g, f, h))
        dv, dh = [], []
        for v, h in nv:
            dv += [(x, h) for x in assign_from.get(v, ())]
            for x, f in load_from.get(v, ()):  # x = v.f, v -> h: x gets hpt(h, f)
                loads_of.setdefault((h, f), []).append(x)
                dv += [(x, h2) for h2 in hpt.get((h, f), ())]
            for f, val in store_base.get(v, ()):  # v.f = val, v -> h
                dh += [(h, f, h2) for h2 in vpt.get(val, ())]
            for base, f in store_val.get(v, ()):  # base.f = v, v -> h
                dh += [(g, f, h) for g in vpt.get(base, ())]
        for g, f, h in nh:
            dv += [(x, h) for x in loads_of.get((g, f), ())]
    pointed: dict[str, int] = {}
    for hs in vpt.values():
        for h in hs:
            pointed[h] = pointed.get(h, 0) + 1
    # alias(v, w): pairs v != w sharing an object, counted once per pair.
    by_obj: dict[str, set[str]] = {}
    for v, hs in vpt.items():
        for h in hs:
            by_obj.setdefault(h, set()).add(v)
    alias = set()
    for vs in by_obj.values():
        for v in vs:
            for w in vs:
                if v != w:
                    alias.add((v, w))
    return {"vpt": sum(map(len, vpt.values())), "hpt": sum(map(len, hpt.values())),
            "alias": len(alias)}


def write_facts(directory: Path, facts: dict[str, list[tuple]]) -> None:
    """Write each relation's tuples as a tab-separated .facts file."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in facts.items():
        with open(directory / f"{name}.facts", "w") as out:
            out.writelines("\t".join(map(str, row)) + "\n" for row in rows)


# ---------------------------------------------------------------------------------------------
# Runs and reports


def run(spark, text: str, factdir: Path, jobs: int, scheduler: str):
    """Return the RunResult of running the program text on the facts in factdir."""
    pt = build_tasks(parse_program(text, "bench.dl"))
    return run_program(spark, pt, factdir, None, scheduler=scheduler, jobs=jobs)


def report(console: Console, title: str, result, expected: dict[str, int]) -> bool:
    """Print per-task times and totals; return whether every count matches the reference."""
    table = Table(title=title)
    for col in ("task", "seconds", "rounds", "tuples"):
        table.add_column(col, justify="left" if col == "task" else "right")
    for v, name in enumerate(result.task_names):
        stats = result.task_stats[v]
        if stats is None:
            table.add_row(name, "-", "-", "not run")
            continue
        table.add_row(name, f"{result.task_seconds[v]:.2f}", str(stats.iterations),
                      ", ".join(f"{r}={n:,}" for r, n in stats.rows.items()))
    console.print(table)
    ok = True
    for name, count in expected.items():
        got = result.printsize[name]
        ok &= got == count
        console.print(f"  {name}: {got:,} tuples (reference {count:,}) "
                      f"{'OK' if got == count else 'MISMATCH'}")
    console.print(f"  wall {result.wall_seconds:.2f} s | Spark (worker busy) "
                  f"{result.spark_seconds:.2f} s | scheduling "
                  f"{result.scheduling_seconds * 1e3:.2f} ms | {result.summary()}")
    return ok


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; return 0 when every count matched its reference."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--scheduler", default="hybrid")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args(argv)
    console = Console()
    if args.quick:
        tc_shape = (12, 20, 2)  # layers, width, out-degree
        pts = dict(variables=300, objects=150, fields=4, assigns=300, loads=80, stores=80)
        mix_tc = (8, 15, 2)
    else:
        tc_shape = (32, 62, 2)  # 3,844 edges -> 1,116,884 pairs, 31 rounds
        pts = dict(variables=8000, objects=4000, fields=8, assigns=8000, loads=2000, stores=2000)
        mix_tc = (24, 40, 2)
    console.print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    ok = True
    with tempfile.TemporaryDirectory(prefix="levelflow-bench-") as tmp:
        tmp = Path(tmp)
        edges = layered_graph(*tc_shape, seed=1)
        tc_pairs = closure_size(edges)
        write_facts(tmp / "tc", {"edge": edges})
        facts = pointsto_facts(**pts, seed=2)
        pt_counts = pointsto_counts(facts)
        write_facts(tmp / "pointsto", facts)
        mix_edges = layered_graph(*mix_tc, seed=3)
        mix = dict(facts, edge=mix_edges)
        write_facts(tmp / "mix", mix)
        mix_expected = dict(pt_counts, path=closure_size(mix_edges))
        console.print(f"TC: {len(edges):,} edges in {tc_shape[0]} layers of {tc_shape[1]} "
                      f"-> {tc_pairs:,} pairs; points-to: "
                      + ", ".join(f"{k} {len(v):,}" for k, v in facts.items()))

        t0 = time.perf_counter()
        spark = make_session(master=args.master, driver_memory="2g")
        spark.range(1).count()
        console.print(f"Spark session: {time.perf_counter() - t0:.1f} s ({args.master})")
        try:
            tc = run(spark, TC_RULES, tmp / "tc", 2, args.scheduler)
            ok &= report(console, "transitive closure (-j 2)", tc, {"path": tc_pairs})
            path_task = tc.task_names.index("path")
            rounds = tc.task_stats[path_task].iterations
            per_round = tc.task_seconds[path_task] / max(rounds, 1)
            console.print(f"  path: {rounds} rounds, {per_round:.2f} s/round = "
                          f"{per_round / REF_SECONDS_PER_ROUND:.2f}x the 0.8 s/round reference")

            pts_run = run(spark, POINTSTO_RULES, tmp / "pointsto", 2, args.scheduler)
            ok &= report(console, "points-to (-j 2)", pts_run, pt_counts)

            mixed = TC_RULES + POINTSTO_RULES
            walls = {}
            for jobs in (1, 2, 1, 2):  # interleaved, best of two each: the machine is shared
                result = run(spark, mixed, tmp / "mix", jobs, args.scheduler)
                ok &= all(result.printsize[k] == n for k, n in mix_expected.items())
                walls.setdefault(jobs, []).append(result)
            best = {j: min(rs, key=lambda r: r.wall_seconds) for j, rs in walls.items()}
            for jobs in (1, 2):
                ok &= report(console, f"points-to + independent TC (-j {jobs}, best of 2)",
                             best[jobs], mix_expected)
            speedup = best[1].wall_seconds / best[2].wall_seconds
            console.print(f"speed-up of -j 2 over -j 1: {best[1].wall_seconds:.2f} s / "
                          f"{best[2].wall_seconds:.2f} s = {speedup:.2f}x (goal > 1: "
                          f"{'PASS' if speedup > 1 else 'FAIL'})")
        finally:
            spark.stop()
    console.print(f"load average after: {os.getloadavg()[0]:.2f}")
    console.print("all counts match their references" if ok else "COUNT MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
