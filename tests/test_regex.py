"""`match(pattern, text)` as Soufflé answers it: std::regex_match, ECMAScript grammar, over the
text's UTF-8 bytes in the C locale (GCC's libstdc++ where it departs from ECMA-262: noted).

Expected answers are written by hand from those semantics, including where Python's `re`, RE2
or Rust's `regex` would answer otherwise (the comment says how). Each case goes through every
engine levelflow runs (Rust through Polars, RE2, the backtracking `regex` module), through
every plan, and through incremental epochs.
"""

from __future__ import annotations

import random
import re

import polars as pl
import pytest
import regex
from test_incremental_properties import rows_of, write_facts

from levelflow.engine import regex_match
from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.regex_match import RegexBudgetError, compiled, match_series, matches
from levelflow.engine.runner import run_program
from levelflow.errors import LevelflowError
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.ecmascript import problem, translate
from levelflow.tasks.load import load_program

A41 = "a" * 41

# (pattern, text, whole-text match?) -- by hand, from ECMAScript and std::regex over bytes.
CASES = [
    ("a.*", "abba", True), ("a.*", "bcab", False),  # Soufflé's documented example
    ("a|b1", "ab", False), ("a|b1", "b1", True),  # the whole text must match
    # `.` is any character but a line terminator: Python's `.` takes "\r" (an extra row)
    (".", "\n", False), (".", "\r", False), ("a.*", "a\rb", False), (".", "\t", True),
    ("[^]", "\n", True), ("[^]*", "a\r\nb", True),  # `[^]`: any character (Python: error)
    ("[]", "", False), ("[]a]", "a]", False), ("[]a]", "]", False),  # `[]`: nothing (Python:
    # a class holding ']' and 'a')
    ("a$", "a", True), ("a$\n", "a\n", False),  # `$` is the end only (Python's `$` also
    # stands before a final newline)
    ("^a", "a", True), ("a^", "a", False),
    ("\\d+", "123", True), ("\\d", "\u0663", False),  # [0-9] only (Python str: any digit)
    ("\\s", "\v", True),  # the C locale's isspace holds \v (RE2's \s does not)
    ("\\s", "\u00a0", False),  # NBSP is two bytes: no single-byte class holds it
    ("\\w+", "a_1", True), ("\\w", "é", False), ("\\W\\W", "é", True),  # \W: each byte
    ("\\bab\\b", "ab", True), ("a\\Bb", "ab", True), ("a\\bb", "ab", False),
    ("[[:alpha:]]+", "abcXYZ", True), ("[[:digit:][:upper:]]+", "A1", True),
    ("[[:punct:]]", "!", True), ("[[:punct:]]", "a", False), ("[[:blank:]]", "\t", True),
    ("[[.-.]a]+", "-a", True), ("[[=a=]]", "a", True),  # collating element, equivalence
    ("[a-c-e]", "-", True), ("[a-c-e]", "d", False), ("[\\d-]+", "1-2", True),
    ("[\\b]", "\b", True),  # \b in a class is backspace
    # identity escapes: any character but c stands for itself (Python: \Z is the end)
    ("\\Z", "Z", True), ("\\A", "A", True), ("\\z", "z", True), ("\\.", ".", True),
    ("\\.", "a", False), ("\\/", "/", True),
    ("a{2}", "aa", True), ("a{2,}", "aaa", True), ("a{2,3}", "aaaa", False),
    ("a{0}", "", True), ("a{1001}", "a" * 1001, True), ("a{1001}", "a" * 1000, False),
    # (RE2 stops at 1,000 copies: the backtracking engine answers the non-ASCII rows)
    ("a**", "aaa", True),  # libstdc++ repeats a repetition (Python: error)
    ("a*?b", "aab", True), ("a{1,2}?", "aa", True),  # lazy: the same texts match
    ("a]", "a]", True), ("a}", "a}", True),  # libstdc++: `]` and `}` alone are literals
    ("\\x41\\u0042", "AB", True), ("\\t", "\t", True), ("\\0", "\0", True),
    ("\\cJ", "J", True),  # libstdc++ reads \cX as X (ECMA-262: a control character)
    # bytes: é is C3 A9, so `é+` repeats A9, `[é]` is one of two bytes, `.` one byte
    ("é", "é", True), ("é+", "é", True), ("é+", "éé", False), ("[é]", "é", False),
    ("[é][é]", "é", True), (".", "é", False), ("..", "é", True), ("a.*", "aé", True),
    ("(a)\\1", "aa", True), ("(a)\\1", "ab", False), ("(a|b)\\1", "ab", False),
    ("(a)?b\\1", "b", True),  # a group that took no part matches empty (Python: fails)
    ("(?=a)\\w+", "abc", True), ("(?=a)\\w+", "bc", False), ("(?!a)\\w+", "bc", True),
    ("(?:ab)+", "abab", True), ("(a|)+", "", True), ("", "", True), ("", "a", False),
    ("(a+)+$", A41, True), ("(a+)+$", A41 + "!", False),  # linear time, not 2^41 steps
]

# Patterns std::regex refuses: each matches nothing (Soufflé warns). Python reads several.
MALFORMED = ["(?i)a", "(?P<n>a)", "(?<=a)b", "(?<!a)b", "a{,3}", "[\\w-.]", "*", "a(", "a)",
             "[", "[a", "\\", "a{3,1}", "\\2(a)", "(a\\1)", "[[:foo:]]", "[z-a]", "\\x4",
             "[\\1]", "^*", "(?=a)*", "a{1", "{1}", "[\\x00-\\xff]", "b.*[", "\\c",
             "a{100001}", "(a{1000}){1000}", "a{99999999999}"]  # past libstdc++'s 100,000
# automaton states (RE2 would read the last as literal text)


@pytest.mark.parametrize(("pattern", "text", "expected"), CASES,
                         ids=[f"{p!r}~{t[:8]!r}" for p, t, _ in CASES])
def test_each_engine_answers_as_std_regex(pattern, text, expected):
    assert matches(pattern, text) is expected  # RE2, or `regex` under its budget
    written = translate(pattern)
    data = text.encode()
    assert (regex.fullmatch(written.backtracking.encode(), data) is not None) is expected
    if written.linear is not None and text.isascii():  # Rust (Polars) answers ASCII texts
        got = pl.Series([text]).str.contains(written.linear).item()
        assert got is expected
    assert match_series(pl.Series([pattern]), pl.Series([text, text])).to_list() == \
        [expected, expected]


@pytest.mark.parametrize("pattern", MALFORMED)
def test_a_malformed_pattern_matches_nothing(pattern):
    assert problem(pattern) is not None
    assert compiled(pattern) is None
    texts = pl.Series(["", "a", "b", "aaa", "(?i)a", None])
    assert match_series(pl.Series([pattern]), texts).to_list() == [False] * 5 + [None]


def test_python_reads_these_patterns_otherwise():
    """The differences the translation exists for: Python's `re` does not answer as Soufflé."""
    expected = {(p, t): e for p, t, e in CASES}
    for case in [(".", "\r"), ("a.*", "a\rb"), ("\\d", "\u0663"), ("\\Z", "Z"),
                 ("a$\n", "a\n"), ("(a)?b\\1", "b"), ("[]a]", "]"), (".", "é"), ("..", "é")]:
        assert (re.fullmatch(*case) is not None) != expected[case], case
    assert re.fullmatch("a{,3}", "aa") and re.fullmatch("(?i)a", "A")  # both refused here


def test_engines_agree_on_random_patterns():
    """RE2 and Rust (the linear writing) answer as the backtracking writing does."""
    rng = random.Random(5)
    atoms = ["a", "b", ".", "[ab]", "[^a]", "\\w", "\\s", "\\d", "é", "(a|b)", "(?:ab)", "[]",
             "[^]", "\\b", "$", "^", "a*", "(a|)", "[[:alpha:]]", "\\x62"]
    texts = ["", "a", "b", "ab", "ba", "aab", "a b", "1a", "é", "aé", "a\n", "abab", "bbb"]
    for _ in range(400):
        pattern = ""
        for _ in range(rng.randint(1, 4)):
            atom = rng.choice(atoms)  # an assertion takes no quantifier
            pattern += atom if atom in ("\\b", "$", "^") else atom + rng.choice(
                ["", "", "*", "+", "?", "{1,2}"])
        if rng.random() < 0.2:
            pattern += "|" + rng.choice(atoms)
        if problem(pattern) is not None:
            continue
        written = translate(pattern)
        reference = [regex.fullmatch(written.backtracking.encode(), t.encode()) is not None
                     for t in texts]
        assert [matches(pattern, t) for t in texts] == reference, pattern
        assert match_series(pl.Series([pattern]), pl.Series(texts)).to_list() == reference, \
            pattern


def test_patterns_from_a_column_each_match_their_row():
    patterns = pl.Series(["a.*", "b.*[", "..", "(a)\\1", None, "a.*", ".."])
    texts = pl.Series(["abc", "bcd", "é", "aa", "a", None, "ab"])
    assert match_series(patterns, texts).to_list() == [True, False, True, True, None, None,
                                                       True]


def test_a_match_over_its_budget_fails_in_one_line(monkeypatch):
    monkeypatch.setattr(regex_match, "MATCH_BUDGET", 0.2)
    with pytest.raises(RegexBudgetError) as e:
        matches("(a|aa)+\\1c", A41)
    assert str(e.value) == ('match("(a|aa)+\\\\1c", ...): a backtracking match over a '
                            "41-character symbol ran past its budget of 0.2 s of CPU "
                            "(backreferences and lookahead need a backtracking engine)")


# -- the checker ------------------------------------------------------------------------------

def test_a_malformed_constant_pattern_is_a_warning_naming_its_line(tmp_path, capsys):
    program = tmp_path / "w.dl"
    program.write_text('.decl s(t:symbol)\ns("a").\n.decl r(t:symbol)\n'
                       'r(t) :- s(t), match("(?i)A", t).\nr(t) :- s(t), !match("a{,3}", t).\n')
    load_program(program)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(": warning: ")[0] for line in lines] == [f"{program}:4:21",
                                                                 f"{program}:5:22"]
    assert 'bad regular expression "(?i)A" matches nothing' in lines[0]
    assert 'bad regular expression "a{,3}" matches nothing' in lines[1]


def test_a_component_pattern_is_warned_once():
    text = ('.comp C {\n.decl r(t:symbol)\nr(t) :- t = "x", match("[", t).\n}\n'
            ".init c1 = C\n.init c2 = C\n")
    notes = [n for n in parse_program(text, "c.dl").notes if "warning" in n]
    assert len(notes) == 1 and notes[0].startswith("c.dl:3:24: warning: ")


# -- every plan and an epoch ------------------------------------------------------------------

PROGRAM = r"""
.decl s(t:symbol)
.input s
.decl p(q:symbol)
.input p
.decl dotted(t:symbol)
dotted(t) :- s(t), match("a.*", t).
.decl two(t:symbol)
two(t) :- s(t), match("..", t).
.decl word(t:symbol)
word(t) :- s(t), match("\\w+", t).
.decl twice(t:symbol)
twice(t) :- s(t), match("(\\w)\\1", t).
.decl nested(t:symbol)
nested(t) :- s(t), match("(a+)+$", t).
.decl caseless(t:symbol)
caseless(t) :- s(t), match("(?i)A", t).
.decl unbounded(t:symbol)
unbounded(t) :- s(t), !match("a{,3}", t).
.decl by(q:symbol, t:symbol)
by(q, t) :- p(q), s(t), match(q, t).
.decl r(t:symbol)
r("axb"). r("a\rb").
.decl crlf(t:symbol)
crlf(t) :- r(t), match("a.b", t).
"""
TEXTS = ["a", "ab", "aa", "é", "aé", A41, A41 + "!", "xy", "a_1"]
PATTERNS = ["a.*", "b.*[", "..", "(a)\\1", "[[:alpha:]]+"]
# Per text, the relations (and patterns of `by`) it belongs to, read off the cases above.
MEMBERS = {
    "a": {"dotted", "word", "nested", "a.*", "[[:alpha:]]+"},
    "ab": {"dotted", "two", "word", "a.*", "..", "[[:alpha:]]+"},
    "aa": {"dotted", "two", "word", "twice", "nested", "a.*", "..", "(a)\\1", "[[:alpha:]]+"},
    "é": {"two", ".."},
    "aé": {"dotted", "a.*"},
    A41: {"dotted", "word", "nested", "a.*", "[[:alpha:]]+"},
    A41 + "!": {"dotted", "a.*"},
    "xy": {"two", "word", "..", "[[:alpha:]]+"},
    "a_1": {"dotted", "word", "a.*"},
}


def _expected(texts, patterns) -> dict[str, set]:
    out = {name: {(t,) for t in texts if name in MEMBERS[t]}
           for name in ("dotted", "two", "word", "twice", "nested")}
    out["caseless"] = set()  # (?i) is not ECMAScript: the pattern matches nothing
    out["unbounded"] = {(t,) for t in texts}  # a{,3} is malformed: `!match` holds for all
    out["by"] = {(q, t) for q in patterns for t in texts if q in MEMBERS[t]}
    out["crlf"] = {("axb",)}  # `.` does not match "\r"
    return out


def test_every_plan_derives_the_ecmascript_rows(spark, tmp_path):
    pt = build_tasks(parse_program(PROGRAM, "m.dl"))
    write_facts(tmp_path, {"s": {(t,) for t in TEXTS}, "p": {(q,) for q in PATTERNS}})
    expected = _expected(TEXTS, PATTERNS)
    for plan in ("local", "global"):
        result = run_program(spark, pt, tmp_path, tmp_path / f"out-{plan}", jobs=2, plan=plan)
        for name, rows in expected.items():
            assert rows_of(result.relation(name)) == rows, (plan, name)


def test_epochs_keep_the_ecmascript_rows(spark, tmp_path):
    pt = build_tasks(parse_program(PROGRAM, "m.dl"))
    texts, patterns = set(TEXTS[::2]), set(PATTERNS[:3])
    write_facts(tmp_path / "f0", {"s": {(t,) for t in texts}, "p": {(q,) for q in patterns}})
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    for added, removed in ((TEXTS[1::2], ["a"]), (["a"], ["ab", "aa", "é"])):
        for t in added:
            session.insert("s", (t,))
        for t in removed:
            session.remove("s", (t,))
        session.insert("p", (PATTERNS[len(patterns) % len(PATTERNS)],))
        patterns.add(PATTERNS[len(patterns) % len(PATTERNS)])
        texts = (texts | set(added)) - set(removed)
        session.commit()
        for name, rows in _expected(texts, patterns).items():
            assert rows_of(session.relation(name)) == rows, name


@pytest.mark.parametrize("plan", ["local", "global"])
def test_a_backreference_over_its_budget_stops_the_run_in_one_line(spark, tmp_path, plan):
    pt = build_tasks(parse_program('.decl s(t:symbol)\n.input s\n.decl slow(t:symbol)\n'
                                   'slow(t) :- s(t), match("(a|aa)+\\\\1c", t).\n', "b.dl"))
    write_facts(tmp_path, {"s": {(A41,), ("ab",)}})
    with pytest.raises(LevelflowError) as e:
        run_program(spark, pt, tmp_path, tmp_path / "out", jobs=2, plan=plan)
    message = str(e.value)
    assert "\n" not in message
    assert 'match("(a|aa)+\\\\1c", ...)' in message and "41-character symbol" in message
    assert f"budget of {regex_match.MATCH_BUDGET:g} s of CPU" in message


def test_the_cli_prints_the_warning_and_runs(cli_spark, cli, tmp_path):
    program = tmp_path / "w.dl"
    program.write_text('.decl r(t:symbol)\nr("a"). r("b").\n.decl m(t:symbol)\n.output m\n'
                       'm(t) :- r(t), !match("(?P<x>a)", t).\n')
    code, _, err = cli(["run", program, "-D", tmp_path / "out"])
    assert code == 0, err
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert warnings == [f'{program}:5:22: warning: bad regular expression "(?P<x>a)" matches '
                        "nothing: '(?' is followed by neither ':', '=' nor '!' (ECMAScript "
                        "has no (?i), (?P<name>, (?<= or other groups)"]
    assert sorted((tmp_path / "out" / "m.csv").read_text().split()) == ["a", "b"]
