"""Benchmark small programs' latency (issue 44): what a first try of a small program costs.

    .venv/bin/python bench/bench_latency.py            # every figure, with Spark references
    .venv/bin/python bench/bench_latency.py --quick    # no Spark reference for the tree

Each figure is printed with its goal and its ratio to a reference measured in the same run,
the same work with every task on Spark (`--master local[*]`, `driver_rows=None`):
  1. `levelflow run examples/tc/program.dl ...` as a fresh process, median of 3 (goal <= 2 s);
  2. `levelflow update STATE --insert` of one diff on examples/tc as a fresh process, median
     of 3 (the diff inserted, then removed, then inserted);
  3. the programs under tests/programs run one after another in one session: the median per
     program (goal <= 0.1 s), every output checked against its expected file;
  4. a program of many tiny relations (a binary tree of 127, as Soufflé's example double_tree)
     in that session (goal <= 10 s);
  5. `levelflow serve STATE` as a fresh process: seconds from its start to the first answer of
     GET /status (goal <= 3 s), against the seconds until it says `ready` (its state opened:
     when /status used to answer first), median of 3;
  6. `levelflow run --state` of tests/programs/aggregates (22 tasks: aggregates, the
     program's own facts) as a fresh process, median of 3, its outputs checked.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TC = ROOT / "examples" / "tc"
PROGRAMS = ROOT / "tests" / "programs"


def _cli(*args: str) -> float:
    """Return the wall seconds of `levelflow ARGS` as a fresh process (it must succeed)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    # As on a user's machine, Python keeps the bytecode it compiles: with this variable set
    # (as in some sandboxes) every fresh process compiled each changed module again (0.25 s).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "levelflow", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"levelflow {' '.join(args)} failed:\n{proc.stderr}")
    return seconds


def _line(what: str, seconds: float, goal: float | None, reference: float | None) -> bool:
    """Print one figure with its goal and its ratio to the reference; return goal met."""
    ok = goal is None or seconds <= goal
    parts = [f"{what}: {seconds:.3f} s"]
    if goal is not None:
        parts.append(f"goal <= {goal:g} s: {'PASS' if ok else 'FAIL'}")
    if reference is not None:
        parts.append(f"on Spark {reference:.3f} s: {reference / seconds:.1f}x faster")
    print(" | ".join(parts), flush=True)
    return ok


def fresh_run(tmp: Path, spark_too: bool) -> bool:
    """Figure 1: a fresh process running examples/tc, median of 3."""
    args = ["run", str(TC / "program.dl"), "-F", str(TC / "facts"), "-D", str(tmp / "out"),
            "-q"]
    driver = statistics.median(_cli(*args) for _ in range(3))
    spark = statistics.median(_cli(*args, "--master", "local[*]") for _ in range(3)) \
        if spark_too else None
    return _line("fresh `run` of examples/tc (median of 3)", driver, 2.0, spark)


def fresh_update(tmp: Path, spark_too: bool) -> bool:
    """Figure 2: a fresh process applying one diff to examples/tc's state, median of 3."""
    state = tmp / "state"
    _cli("run", str(TC / "program.dl"), "-F", str(TC / "facts"), "-D", str(tmp / "o"), "-q",
         "--state", str(state))
    diff = str(TC / "change.diff")
    flips = ("--insert", "--remove", "--insert", "--remove", "--insert", "--remove")

    def times(*extra: str, flips=flips) -> list[float]:
        return [_cli("update", str(state), flag, diff, *extra) for flag in flips]
    driver = statistics.median(times()[:3])
    spark = statistics.median(times("--master", "local[*]")[:3]) if spark_too else None
    return _line("fresh `update --insert` of one diff on examples/tc (median of 3)", driver,
                 None, spark)


def fresh_state_run(tmp: Path, spark_too: bool) -> bool:
    """Figure 6: a fresh process bootstrapping a state of tests/programs/aggregates."""
    prog = PROGRAMS / "aggregates"

    def once(k: int, *extra: str) -> float:
        out, state = tmp / f"agg-out-{k}{extra[:1]}", tmp / f"agg-state-{k}{extra[:1]}"
        seconds = _cli("run", str(prog / "program.dl"), "-F", str(prog / "facts"), "-D",
                       str(out), "-q", "--state", str(state), *extra)
        _check(out, prog / "expected")
        return seconds
    driver = statistics.median(once(k) for k in range(3))
    spark = statistics.median(once(k, "--master", "local[*]") for k in range(3)) \
        if spark_too else None
    return _line("fresh `run --state` of tests/programs/aggregates (median of 3)", driver,
                 None, spark)


def _serve_once(state: Path) -> tuple[float, float]:
    """Return (seconds to the first 200 of GET /status, seconds to `ready`) of a fresh serve."""
    import re
    import urllib.request

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "levelflow", "serve", str(state), "--port",
                             "0"], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        first = proc.stdout.readline()  # "listening on http://HOST:PORT ..."
        url = re.search(r"http://\S+:\d+", first)
        if url is None:
            raise SystemExit(f"serve said: {first!r}")
        while True:
            try:
                with urllib.request.urlopen(url[0] + "/status", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.01)
        status = time.perf_counter() - t0
        while "ready" not in proc.stdout.readline():
            pass
        return status, time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(60)


def fresh_serve(tmp: Path) -> bool:
    """Figure 5: a fresh `serve` of examples/tc's state answering /status, median of 3."""
    state = tmp / "state"
    if not state.exists():
        _cli("run", str(TC / "program.dl"), "-F", str(TC / "facts"), "-D", str(tmp / "o"),
             "-q", "--state", str(state))
    runs = [_serve_once(state) for _ in range(3)]
    return _line("fresh `serve`: first /status answer (median of 3)",
                 statistics.median(r[0] for r in runs), 3.0, None) and \
        _line("fresh `serve`: says ready, its state opened (median of 3; /status's old floor)",
              statistics.median(r[1] for r in runs), None, None)


def _check(out: Path, expected: Path) -> None:
    """Raise SystemExit unless `out` holds exactly the expected output files."""
    for want in expected.iterdir():
        if want.name == "printsize.txt":
            continue
        got = sorted((out / want.name).read_text().splitlines())
        if got != sorted(want.read_text().splitlines()):
            raise SystemExit(f"{out / want.name}: differs from {want}")


def in_session(spark, tmp: Path, driver_rows) -> list[float]:
    """Return the wall seconds of each program under tests/programs, run in one session."""
    from levelflow.engine.runner import run_program
    from levelflow.tasks import build_tasks, load_program

    seconds = []
    for d in sorted(p for p in PROGRAMS.iterdir() if (p / "program.dl").is_file()):
        out = tmp / f"p-{d.name}-{driver_rows}"
        t0 = time.perf_counter()
        pt = build_tasks(load_program(d / "program.dl"))
        run_program(spark, pt, d / "facts", out, driver_rows=driver_rows)
        seconds.append(time.perf_counter() - t0)
        _check(out, d / "expected")
        shutil.rmtree(out, ignore_errors=True)  # a program may write nothing
    return seconds


def tree_program(depth: int = 6) -> str:
    """Return a binary tree of 2^(depth+1) - 1 relations, each derived from its parent (a
    swap or a join and a copy): many tiny relations, as Soufflé's example double_tree."""
    lines = [".decl r0(x:number, y:number)", ".input r0"]
    count = 2 ** (depth + 1) - 1
    for i in range(1, count):
        p = (i - 1) // 2
        lines.append(f".decl r{i}(x:number, y:number)")
        if i % 2:
            lines.append(f"r{i}(y, x) :- r{p}(x, y).")
        else:
            lines += [f"r{i}(x, z) :- r{p}(x, y), r{p}(y, z).", f"r{i}(x, y) :- r{p}(x, y)."]
    lines += [f".output r{i}" for i in range(count - 2 ** depth, count)]
    return "\n".join(lines) + "\n"


def tree(spark, tmp: Path, driver_rows) -> float:
    """Return the wall seconds of the tree of tiny relations, parsed and run in the session."""
    from levelflow.engine.runner import run_program
    from levelflow.tasks import build_tasks, parse_program

    facts = tmp / "tree-facts"
    facts.mkdir(exist_ok=True)
    (facts / "r0.facts").write_text("".join(f"{i}\t{i + 1}\n" for i in range(10)))
    t0 = time.perf_counter()
    pt = build_tasks(parse_program(tree_program(), "tree.dl"))
    run_program(spark, pt, facts, tmp / f"tree-{driver_rows}", driver_rows=driver_rows)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Print every figure; return 0 when each goal is met."""
    from levelflow.engine.plans.driver import DRIVER_ROWS
    from levelflow.engine.session import make_session

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="no Spark reference for the tree of tiny relations (minutes on Spark)")
    args = ap.parse_args(argv)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    ok = True
    with tempfile.TemporaryDirectory(prefix="levelflow-latency-") as tmp:
        tmp = Path(tmp)
        ok &= fresh_run(tmp, True)
        ok &= fresh_update(tmp, True)
        ok &= fresh_serve(tmp)
        ok &= fresh_state_run(tmp, True)
        spark = make_session(master="local[*]")
        spark.range(1).count()
        in_session(spark, tmp, DRIVER_ROWS)  # once to warm the imports, then measured
        driver = statistics.median(in_session(spark, tmp, DRIVER_ROWS))
        on_spark = statistics.median(in_session(spark, tmp, None))
        ok &= _line(f"tests/programs in one session (median of {len(list(PROGRAMS.iterdir()))} "
                    f"programs)", driver, 0.1, on_spark)
        reference = None if args.quick else tree(spark, tmp, None)
        ok &= _line("127 tiny relations in one session", tree(spark, tmp, DRIVER_ROWS), 10.0,
                    reference)
        spark.stop()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
