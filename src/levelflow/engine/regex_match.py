"""`match(pattern, text)` over a column of texts, in linear time wherever the pattern allows.

Soufflé's answer is std::regex_match over the text's UTF-8 bytes (tasks/ecmascript.py reads
the pattern as it does). On ASCII texts characters are bytes, so Polars' `str.contains` (Rust's
`regex`: linear, vectorized, the GIL released) answers for the whole column at once. The other
rows, and patterns Rust refuses (too large), go to RE2 over the bytes read as Latin-1, one call
each, also linear. Backreferences and lookahead need backtracking: the `regex` module over the
bytes, each match with a time budget (the GIL released meanwhile); a match past it stops the
task in one line, where Python's `re` ran for hours and held the GIL (`serve` stopped
answering). A malformed pattern matches nothing, as in Soufflé (whose warning the checker
gives for a constant pattern).

Both backends call `match_series`: columnar.py over its frames, compile.py in an Arrow UDF.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import polars as pl
import pyarrow as pa
import re2
import regex

from levelflow.errors import LevelflowError
from levelflow.tasks.ecmascript import PatternError, translate

# CPU seconds one backtracking match may take before the task fails (the `regex` module reads
# the process's CPU clock: a loaded machine stretches it in wall time, other threads shorten it).
MATCH_BUDGET = 1.0
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.encoding = re2.Options.Encoding.LATIN1  # one byte, one character
_RE2_OPTIONS.log_errors = False  # a refused pattern falls back; RE2 would print to stderr
# The wrapper's `fullmatch` builds a generator and a Match object per call: its pybind class
# answers the same in a third of the time where the text matches (4.5 us against 15 us).
_WHOLE = re2._Anchor.ANCHOR_BOTH


class RegexBudgetError(LevelflowError):
    """A backtracking match ran past its time budget (one line)."""

    def __str__(self) -> str:
        # Polars appends the failing expression to an error raised inside map_batches.
        return super().__str__().split("\n", 1)[0]


@dataclass(frozen=True, slots=True)
class Compiled:
    """One pattern, ready for each engine that can run it."""

    pattern: str
    rust: str | None  # for Polars' str.contains on ASCII texts
    linear: re2._re2.RE2 | None  # RE2 over bytes
    backtracking: regex.Pattern | None  # only when RE2 cannot run it

    def match(self, text: str) -> bool:
        """Return whether the whole text matches (as std::regex_match over its bytes)."""
        data = text.encode("utf-8", "surrogatepass")
        if self.linear is not None:  # RE2 releases the GIL while it matches
            return self.linear.Match(_WHOLE, data, 0, len(data))[0][0] >= 0
        try:
            return self.backtracking.fullmatch(data, timeout=MATCH_BUDGET,
                                               concurrent=True) is not None
        except TimeoutError:
            raise RegexBudgetError(
                f"match({_quoted(self.pattern)}, ...): a backtracking match over a "
                f"{len(text)}-character symbol ran past its budget of {MATCH_BUDGET:g} s of CPU "
                "(backreferences and lookahead need a backtracking engine)") from None


def _quoted(pattern: str) -> str:
    shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _rust_reads(written: str) -> bool:
    """Return whether Polars (Rust's regex) compiles the pattern (not past its size limit)."""
    try:
        pl.Series([""], dtype=pl.String).str.contains(written)
    except pl.exceptions.PolarsError:
        return False
    return True


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> Compiled | None:
    """Return the pattern compiled for the engines that run it, or None when it matches
    nothing (std::regex refuses it, or no engine here takes it: a repetition too large)."""
    try:
        written = translate(pattern)
    except PatternError:
        return None
    linear = rust = None
    if written.linear is not None:
        linear = re2._re2.RE2(written.linear.encode("ascii"), _RE2_OPTIONS)
        linear = linear if linear.ok() else None
        rust = written.linear if _rust_reads(written.linear) else None
    backtracking = None
    if linear is None:  # every row needs an engine: Rust answers ASCII texts only
        try:
            backtracking = regex.compile(written.backtracking.encode("ascii"))
        except (regex.error, OverflowError, RecursionError):
            return None
    return Compiled(pattern, rust, linear, backtracking)


def matches(pattern: str, text: str) -> bool:
    """Return whether the whole text matches the pattern, as Soufflé's `match` answers."""
    c = compiled(pattern)
    return c is not None and c.match(text)


def match_series(patterns: pl.Series, texts: pl.Series) -> pl.Series:
    """Return per row whether the pattern matches the whole text (null where either is null).
    `patterns` may be one value for every row."""
    patterns, texts = patterns.cast(pl.String), texts.cast(pl.String)
    if len(patterns) > 1 and not patterns.has_nulls() and (patterns == patterns[0]).all():
        patterns = patterns[:1]  # a literal, broadcast by Polars or Spark
    if len(patterns) == 1:
        return _one_pattern(patterns[0], texts).alias("match")
    return _row_patterns(patterns, texts).alias("match")


def _one_pattern(pattern: str | None, texts: pl.Series) -> pl.Series:
    """Return `match(pattern, text)` per text, for one pattern."""
    ready = compiled(pattern) if pattern is not None else None
    if ready is None:  # no pattern: no value; a malformed one matches nothing
        return (pl.repeat(None, len(texts), dtype=pl.Boolean, eager=True) if pattern is None
                else texts.str.len_bytes() < 0)
    if ready.rust is None:
        result = pl.repeat(None, len(texts), dtype=pl.Boolean, eager=True)
        slow = texts.is_not_null()
    else:
        result = texts.str.contains(ready.rust)
        slow = texts.str.len_bytes() != texts.str.len_chars()  # not ASCII: bytes differ
    at = slow.fill_null(False).arg_true()
    if len(at):  # one call each: RE2 over the bytes, or `regex`
        values = [ready.match(t) for t in texts.gather(at).to_list()]
        result = result.scatter(at, pl.Series(values, dtype=pl.Boolean))
    return result


def _row_patterns(patterns: pl.Series, texts: pl.Series) -> pl.Series:
    """Return `match(pattern, text)` per row, each row with its own pattern."""
    ready = {p: compiled(p) for p in patterns.drop_nulls().unique().to_list()}
    rust = {p: c.rust for p, c in ready.items() if c is not None and c.rust is not None}
    written = patterns.replace_strict(list(rust), list(rust.values()), default=None,
                                      return_dtype=pl.String)
    result = texts.str.contains(written)  # Polars caches each distinct regex; null: no rust
    fast = (texts.str.len_bytes() == texts.str.len_chars()) & written.is_not_null()
    bad = [p for p, c in ready.items() if c is None]
    if bad:  # a malformed pattern matches nothing
        result = pl.select(pl.when(patterns.is_in(bad) & texts.is_not_null())
                           .then(False).otherwise(result)).to_series()
        fast = fast | patterns.is_in(bad)
    # The rest, one call each: non-ASCII texts, patterns only RE2 or `regex` can run.
    at = (~fast.fill_null(False) & patterns.is_not_null() & texts.is_not_null()).arg_true()
    if len(at):
        values = [ready[p].match(t) for p, t in zip(patterns.gather(at).to_list(),
                                                    texts.gather(at).to_list(), strict=True)]
        result = result.scatter(at, pl.Series(values, dtype=pl.Boolean))
    return result


def match_arrays(patterns: pa.Array, texts: pa.Array) -> pa.Array:
    """Return `match_series` over Arrow arrays (the Spark backend's Arrow UDF)."""
    return match_series(pl.Series(patterns), pl.Series(texts)).to_arrow()
