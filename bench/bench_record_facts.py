"""Time reading a fact file of records: each distinct value read and checked once, on Polars
columns (engine/record_facts.record_rows), against reading every field of every line (the
reference, the per-line loop it replaced), in the same run. No Spark.

Run: .venv/bin/python bench/bench_record_facts.py [--rows N] [--distinct D]
The file: N lines (default 1,000,000) of `id  [a, b]  $Leaf(k)` with D distinct values per
record column (default 1,000; --distinct N makes every value distinct: the worst case).
Goal: ratio at most 1.0 whatever D (each value is still read once).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from levelflow.engine.facts import FactError
from levelflow.engine.record_facts import record_rows
from levelflow.tasks import parse_program
from levelflow.tasks.record_values import Types

PROGRAM = """
.type P = [a: number, b: symbol]
.type T = Leaf {k: number} | Node {l: T, r: T}
.decl r(id: number, p: P, t: T)
.input r
"""


def per_line(lines: list[str], decl) -> list[tuple]:
    """Return the rows as the per-line loop read them: every field of every line parsed."""
    types = Types(decl.record_types)
    rows = set()
    for line in lines:
        fields = line.split("\t", decl.arity)[:decl.arity]
        rows.add(tuple(types.read(f, s) if s else int(f)
                       for f, s in zip(fields, decl.shapes, strict=True)))
    return sorted(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--distinct", type=int, default=1_000)
    args = ap.parse_args()
    decl = parse_program(PROGRAM, "r.dl").decls["r"]
    rng = random.Random(7)
    d = args.distinct
    lines = [f"{i % 1000}\t[{rng.randrange(d)}, s{rng.randrange(3)}]\t"
             f"$Node($Leaf({rng.randrange(d)}), $Leaf(1))" for i in range(args.rows)]
    start = time.perf_counter()
    reference = per_line(lines, decl)
    t_ref = time.perf_counter() - start
    start = time.perf_counter()
    got = record_rows(Path("r.facts"), lines, decl, "\t", 1, FactError)
    t_new = time.perf_counter() - start
    assert got == reference, "the two reads differ"
    print(f"reading {args.rows:,} lines of records ({d:,} distinct per column, "
          f"{len(got):,} distinct rows):")
    print(f"  every field of every line: {t_ref:.2f} s (reference)")
    print(f"  each distinct value once (record_rows): {t_new:.2f} s; ratio {t_new / t_ref:.2f}")


if __name__ == "__main__":
    main()
