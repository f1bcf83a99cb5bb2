"""Time `levelflow.load` (preprocess, parse, check, tasks) on a program of inline facts; goal:
<= 1 s for 100,000 facts. Then time parsing a 10 MB program of rules, facts, comments and runs
of blank lines (issue 43: the lexer must be linear); goal: a few seconds (5 s).

Run: .venv/bin/python bench/bench_frontend.py [--facts N] [--megabytes M] [--repeat R]
The program mixes number, symbol, unsigned and float facts over four relations and a few rules.
Prints wall and CPU seconds (best of R), facts/s (MB/s), and the ratio to each goal; the
machine's load shows in wall time, so CPU time is the figure to compare.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

GOAL_SECONDS = 1.0
GOAL_FACTS = 100_000
GOAL_PARSE_SECONDS = 5.0
GOAL_MEGABYTES = 10


def program_text(n: int) -> str:
    """Return a program with n inline facts (a quarter per relation) and a few rules."""
    lines = [".decl edge(x:number, y:number)", ".decl name(id:number, s:symbol)",
             ".decl size(id:number, n:unsigned)", ".decl weight(id:number, w:float)",
             ".decl path(x:number, y:number)", ".output path",
             "path(x, y) :- edge(x, y).", "path(x, z) :- path(x, y), edge(y, z)."]
    for i in range(n // 4):
        lines.append(f"edge({i}, {i + 1}).")
        lines.append(f'name({i}, "node {i}").')
        lines.append(f"size({i}, {i * 7}).")
        lines.append(f"weight({i}, {i}.5).")
    return "\n".join(lines) + "\n"


def commented_text(megabytes: float) -> str:
    """Return a program of about `megabytes` MB: per relation a declaration, a rule and 50
    facts, between comments and runs of blank lines."""
    blocks = []
    size = i = 0
    while size < megabytes * 1_000_000:
        facts = "".join(f"r{i}({j}, {j + i}).   // fact {j}\n" if j % 5 else
                        f"\n  //\n  //\n\t\nr{i}({j}, {j + i}).\n" for j in range(50))
        block = (f".decl r{i}(x:number, y:number)\n"
                 f"// rule {i}: the pairs of a\n  //\n\n"
                 f"r{i}(x, y) :- a(x, z), /* a join */ b(z, y), x != {i}.\n"
                 f"/* facts\n   of r{i} */\n{facts}")
        blocks.append(block)
        size += len(block)
        i += 1
    return ".decl a(x:number, y:number)\n.decl b(x:number, y:number)\n" + "".join(blocks)


def parse_figure(megabytes: float, repeat: int) -> None:
    """Print the time to tokenize and to parse a program of `megabytes` MB, and the ratio of
    the parse to its goal."""
    from levelflow.tasks import parse_program
    from levelflow.tasks.lexer import Source, tokenize

    text = commented_text(megabytes)
    mb = len(text) / 1e6
    for what, step in (("tokenize", lambda: tokenize(Source(text, "big.dl"))),
                       ("parse_program", lambda: parse_program(text, "big.dl"))):
        best_wall = best_cpu = float("inf")
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            step()
            best_wall = min(best_wall, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
        print(f"{what}: {mb:.1f} MB, wall {best_wall:.3f} s ({mb / best_wall:.1f} MB/s), "
              f"cpu {best_cpu:.3f} s ({mb / best_cpu:.1f} MB/s)")
    goal = GOAL_PARSE_SECONDS * mb / GOAL_MEGABYTES
    print(f"  goal {goal:.3f} s: cpu/goal = {best_cpu / goal:.2f}, wall/goal = "
          f"{best_wall / goal:.2f} ({'met' if best_cpu <= goal else 'NOT met'})")


def main() -> None:
    """Write the program, then time loading it."""
    from levelflow import load

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=GOAL_FACTS)
    ap.add_argument("--megabytes", type=float, default=GOAL_MEGABYTES)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "facts.dl"
        path.write_text(program_text(args.facts))
        best_wall = best_cpu = float("inf")
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            pt = load(path)
            best_wall = min(best_wall, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
    facts = sum(1 for t in pt.tasks for r in t.rules if r.is_fact)
    goal = GOAL_SECONDS * facts / GOAL_FACTS
    print(f"levelflow.load: {facts:,} inline facts, {len(pt.tasks)} tasks")
    print(f"  wall {best_wall:.3f} s ({facts / best_wall:,.0f} facts/s)")
    print(f"  cpu  {best_cpu:.3f} s ({facts / best_cpu:,.0f} facts/s)")
    print(f"  goal {goal:.3f} s: cpu/goal = {best_cpu / goal:.2f}, wall/goal = "
          f"{best_wall / goal:.2f} ({'met' if best_cpu <= goal else 'NOT met'})")
    parse_figure(args.megabytes, args.repeat)


if __name__ == "__main__":
    main()
