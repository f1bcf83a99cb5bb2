"""What `match(pattern, text)` costs per match, by engine, against Python's `re` row by row.

Before, both backends called `re.fullmatch` once per row from Python (the reference here).
Now engine/regex_match.py matches the column at once: Polars' `str.contains` (Rust, linear)
on ASCII texts, RE2 over bytes one row at a time on the others, the `regex` module under a
time budget for backreferences and lookahead. This bench times each of those on the same
symbols and typical patterns, then the pathological `(a+)+$`, whose cost under `re` doubles
with each character, and a backreference past its budget. It prints ns per match and the
ratio to `re` measured in the same run.

Run: PYTHONPATH=src .venv/bin/python bench/bench_regex.py [--rows N]
"""

from __future__ import annotations

import argparse
import random
import re
import time

import polars as pl
import re2
import regex

from levelflow.engine import regex_match
from levelflow.engine.regex_match import RegexBudgetError, match_series
from levelflow.tasks.ecmascript import translate

PATTERNS = ["a.*", "[a-c]+[0-9]?", ".*[13].*", "\\w+_\\d+", "(ab|cd)*e?"]
_RE2 = re2.Options()
_RE2.encoding = re2.Options.Encoding.LATIN1


def _symbols(rows: int, seed: int, foreign: float = 0.0) -> list[str]:
    """Return short symbols (3-12 characters); a `foreign` share holds a non-ASCII one."""
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        word = "".join(rng.choice("abcdef0123_") for _ in range(rng.randint(3, 12)))
        out.append(word + "é" if rng.random() < foreign else word)
    return out


def _seconds(fn) -> float:
    """Return the best of two runs' seconds (the machine is shared)."""
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _per_pattern(pattern: str, texts: list[str], series: pl.Series, mixed: pl.Series) -> None:
    """Print each engine's ns per match over the texts, and its ratio to `re` row by row."""
    written = translate(pattern)
    data = [t.encode() for t in texts]
    python = re.compile(pattern, re.ASCII)
    ready = regex_match.compiled(pattern)  # RE2, as the per-row fallback calls it
    wrapped = re2.compile(written.linear.encode(), _RE2)
    back = regex.compile(written.backtracking.encode())
    one = pl.Series([pattern])
    n = len(texts)
    timings = {
        "re, row by row (before)": _seconds(lambda: [python.fullmatch(t) for t in texts]),
        "match_series (Rust, ASCII)": _seconds(lambda: match_series(one, series)),
        "match_series, 1% non-ASCII": _seconds(lambda: match_series(one, mixed)),
        "RE2 bytes, row by row": _seconds(lambda: [ready.match(t) for t in texts]),
        "RE2 wrapper's fullmatch": _seconds(lambda: [wrapped.fullmatch(d) for d in data]),
        "regex + budget, row by row": _seconds(
            lambda: [back.fullmatch(d, timeout=1.0, concurrent=True) for d in data]),
    }
    reference = timings["re, row by row (before)"]
    print(f"\n{pattern!r} over {n:,} symbols")
    for name, seconds in timings.items():
        print(f"  {name:30s} {seconds / n * 1e9:8.0f} ns/match  {seconds / reference:6.2f}x re")


def _pathological() -> None:
    """Print `(a+)+$` over a^k! under `re` (k small: it doubles per character) and the rest."""
    print("\n'(a+)+$' over 'a' * k + '!' (no match)")
    slow = re.compile("(a+)+$", re.ASCII)
    base = None
    for k in (18, 20, 22):
        seconds = _seconds(lambda k=k: slow.fullmatch("a" * k + "!"))
        base = (k, seconds)
        print(f"  {'re,':26s} k={k:<6} {seconds * 1e6:10.0f} us/match")
    k0, s0 = base
    print(f"  {'re,':26s} k=41     {s0 * 2 ** (41 - k0) * 1e6:10.2e} us/match (doubling per "
          "character from the last)")
    ready = regex_match.compiled("(a+)+$")
    back = regex.compile(translate("(a+)+$").backtracking.encode())
    for k in (41, 10_000):
        text = "a" * k + "!"
        series = pl.Series([text] * 1000)
        for name, fn in (
                ("match_series (1,000 rows)",
                 lambda s=series: match_series(pl.Series(["(a+)+$"]), s)),
                ("RE2 bytes", lambda t=text: ready.match(t)),
                ("regex + budget",
                 lambda t=text: back.fullmatch(t.encode(), timeout=1.0, concurrent=True))):
            try:
                seconds = _seconds(fn) / (1000 if name.startswith("match_series") else 1)
            except TimeoutError:
                print(f"  {name + ',':26s} k={k:<6} past its budget of 1 s of CPU")
                continue
            print(f"  {name + ',':26s} k={k:<6} {seconds * 1e6:10.1f} us/match"
                  + (f"  ({s0 * 2 ** (41 - k0) / seconds:.1e}x less than re)" if k == 41
                     else ""))
    t0 = time.perf_counter()
    try:
        regex_match.matches("(a|aa)+\\1c", "a" * 41)
    except RegexBudgetError as e:
        print(f"  backreference past its budget: failed after {time.perf_counter() - t0:.2f} s: "
              f"{e}")


def main() -> None:
    """Time each engine on typical patterns and on the pathological one; print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    texts = _symbols(args.rows, 1)
    series = pl.Series(texts)
    mixed = pl.Series(_symbols(args.rows, 1, foreign=0.01))
    for pattern in PATTERNS:
        _per_pattern(pattern, texts, series, mixed)
    _pathological()


if __name__ == "__main__":
    main()
