"""Time loading a 465,000-node / 465,000-edge job trace: parse, check, levels; goal <= 5 s total.

Run: .venv/bin/python bench/bench_load.py [--nodes N] [--edges E] [--levels L] [--gz]
Prints the seconds of each phase, the end-to-end `load_trace` time and its ratio to the goal.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from levelflow.traces import dump_trace, generate_trace, load_trace
from levelflow.traces.jobtrace import assemble, build_graph, check_obj, paused_gc, read_json

GOAL_SECONDS = 5.0


def _timed(fn, *args):
    """Return ((wall seconds, CPU seconds), result) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return (time.perf_counter() - t0, time.process_time() - c0), out


def main() -> None:
    """Generate, write, then time each phase of reading the trace back."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=465_000)
    ap.add_argument("--edges", type=int, default=465_000)
    ap.add_argument("--levels", type=int, default=5)
    ap.add_argument("--gz", action="store_true", help="write and read a .json.gz file")
    args = ap.parse_args()

    t_gen, trace = _timed(generate_trace, args.nodes, args.edges, args.levels, 1000, 0.5, 7)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("trace.json.gz" if args.gz else "trace.json")
        t_dump, _ = _timed(dump_trace, trace, path)
        size_mb = path.stat().st_size / 1e6
        print(f"trace: {args.nodes} nodes, {args.edges} edges, {args.levels} levels; "
              f"generated in {t_gen[0]:.2f} s, written in {t_dump[0]:.2f} s ({size_mb:.1f} MB)")

        src = str(path)
        with paused_gc():  # as load_trace does
            t_parse, obj = _timed(read_json, path)
            t_check, parts = _timed(check_obj, obj, src)
            t_graph, graph = _timed(build_graph, parts.names, parts.pairs, src)
            # assemble() rebuilds the graph; subtract it to get the activation checks alone.
            t_asm, loaded = _timed(assemble, parts, src)
            t_acts = tuple(max(0.0, a - g) for a, g in zip(t_asm, t_graph, strict=True))
            del obj, parts, graph, loaded
        t_total, again = _timed(load_trace, path)
        assert len(again.graph) == args.nodes and again.graph.num_edges == args.edges

    phases = [("parse JSON", t_parse), ("validate fields, ids, edges", t_check),
              ("levels (TaskGraph: duplicates, cycle, levels)", t_graph),
              ("validate activations", t_acts)]
    # The machine's load shows as wall > CPU; the goal is on wall time of an unloaded machine.
    print(f"  {'phase':<48} {'wall':>7} {'CPU':>7}")
    for label, (wall, cpu) in phases:
        print(f"  {label:<48} {wall:6.2f}s {cpu:6.2f}s")
    print(f"  {'sum of phases':<48} {sum(w for _, (w, _c) in phases):6.2f}s "
          f"{sum(c for _, (_w, c) in phases):6.2f}s")
    wall, cpu = t_total
    print(f"load_trace end to end: {wall:.2f} s wall, {cpu:.2f} s CPU; goal {GOAL_SECONDS:.1f} s; "
          f"ratio to the goal {wall / GOAL_SECONDS:.2f} wall "
          f"({'met' if wall <= GOAL_SECONDS else 'MISSED'}), {cpu / GOAL_SECONDS:.2f} CPU")


if __name__ == "__main__":
    main()
