"""Time an existence test in a long recursion: `a(x) :- b(x), c(y), d(y).`, c and d derived.

Run: .venv/bin/python bench/bench_exists.py [--rounds N] [--size S] [--spark]

The body part `c(y), d(y)` shares no variable with the head: the checker lifts it into a
nullary relation (tasks/exists.py), evaluated once, so each round joins b's delta with "a tuple
exists". The reference is the same program with the lifting turned off (the part joined into
every round, as before), measured in the same process on fewer rounds and compared per round.
Both run the task's fixpoint in process as a Spark worker runs it (fixpoint.run_task); with
--spark the lifted program also runs whole through `run_program` (plan auto), first on the
reference's rounds (its time includes starting Spark's Python workers), then on all of them.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

import polars as pl

from levelflow.engine.plans import fixpoint
from levelflow.tasks import build_tasks, check, parse_program

PROGRAM = """
.decl a(x:number)
.decl b(x:number)
.decl c(y:number)
.decl d(y:number)
c(y) :- y = range(0, {size}).
d(y) :- y = range({half}, {size} + {half}).
b(0).
a(x) :- b(x), c(y), d(y).
b(x + 1) :- a(x), x < {limit}.
.printsize a
"""


def program(rounds: int, size: int, lifted: bool):
    """Return the tasks of PROGRAM for about `rounds` rounds (two per step of the chain)."""
    text = PROGRAM.format(size=size, half=size // 2, limit=rounds // 2 - 1)
    if lifted:
        return build_tasks(parse_program(text, "exists.dl"))
    with mock.patch.object(check, "lift_tests", lambda rules, decls, *_: (rules, dict(decls))):
        return build_tasks(parse_program(text, "exists.dl"))


def in_process(pt) -> tuple[dict[str, pl.DataFrame], float, int]:
    """Return every relation, the seconds of a's task and its rounds, task by task in process."""
    decls, rels = pt.program.decls, {}
    seconds, rounds = 0.0, 0
    for task in pt.tasks:
        facts = {n: pl.DataFrame({"c0": [0]}) for n in task.relations if n == "b"}
        t0 = time.perf_counter()
        out = fixpoint.run_task(tuple(r for r in task.rules if r.body), task.relations, decls,
                                rels, facts)
        if "a" in task.relations:
            seconds, rounds = time.perf_counter() - t0, out.iterations
        rels.update({n: out.relation(n) for n in task.relations})
    return rels, seconds, rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200_000, help="rounds of the lifted run")
    ap.add_argument("--size", type=int, default=300, help="tuples of c and of d")
    ap.add_argument("--spark", action="store_true", help="also run the lifted program on Spark")
    args = ap.parse_args()
    short = max(args.rounds // 100, 2_000)
    rels, after, rounds = in_process(program(args.rounds, args.size, lifted=True))
    before_rels, before, before_rounds = in_process(program(short, args.size, lifted=False))
    assert rels["a"].height == args.rounds // 2 and before_rels["a"].height == short // 2
    per_after, per_before = after / rounds * 1e6, before / before_rounds * 1e6
    print(f"existence test, c and d of {args.size} tuples: lifted {rounds:,} rounds in "
          f"{after:.2f} s ({per_after:.1f} us/round); joined every round (reference, "
          f"{before_rounds:,} rounds) {before:.2f} s ({per_before:.1f} us/round); "
          f"ratio before/after {per_before / per_after:.1f}x", flush=True)
    if args.spark:
        from levelflow.engine.runner import run_program
        from levelflow.engine.session import make_session

        spark = make_session()
        for rounds in (short, args.rounds):  # the first starts Spark's Python workers
            pt = program(rounds, args.size, lifted=True)
            t0 = time.perf_counter()
            result = run_program(spark, pt, None, None)
            assert result.printsize["a"] == rounds // 2
            print(f"run_program (plan auto), {rounds:,} rounds: "
                  f"{time.perf_counter() - t0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
