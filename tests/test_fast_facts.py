"""The lexer's whole-fact fast path (a fact alone on its line after a statement's '.') gives
exactly what the ordinary tokens give: the same rules, positions and errors."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from levelflow.tasks import DatalogError, lexer, parse_program

HEAD = ".decl n(a:number, b:symbol)\n.decl f(x:float)\n.decl u(x:unsigned)\n"


def _both(text: str):
    """Return (fast, slow): each the rules or the error of parsing `text`."""
    def one():
        try:
            p = parse_program(text, "t.dl")
            return [(r, r.loc, [a.loc for a in r.heads[0].args]) for r in p.rules]
        except DatalogError as e:
            return str(e)
    fast = one()
    saved = lexer._FACT
    lexer._FACT = re.compile(r"(?!)")  # never matches: every fact takes the ordinary tokens
    try:
        slow = one()
    finally:
        lexer._FACT = saved
    return fast, slow


def test_fast_path_is_taken_and_agrees():
    text = HEAD + 'n(1, "a").\nn(-2, "b c").\n  n( 3 ,"") .\nf(1.5).\nf(-0.25).\nu(7).\n'
    fast, slow = _both(text)
    assert fast == slow
    tokens, _ = lexer.tokenize(lexer.Source(text, "t.dl"))
    assert sum(t.kind == "fact" for t in tokens) == 5  # all but the first after a .decl


@pytest.mark.parametrize("bad", [
    'n("x", 1).', "n(1).", "u(-1).", "f(1).", 'n(99999999999999999999, "a").', "m(1, 2).",
    'n(1, "a\\tb").', 'n(0x10, "a").'])
def test_errors_and_slow_cases_agree(bad):
    fast, slow = _both(HEAD + 'n(1, "a").\n' + bad + "\n")
    assert fast == slow


ARG = st.one_of(st.integers(-10**20, 10**20).map(str), st.floats(-1e6, 1e6).map(repr),
                st.text(alphabet="ab \t\\\"", max_size=4).map(lambda s: f'"{s}"'))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["n", "f", "u"]), st.lists(ARG, min_size=1, max_size=3),
                          st.sampled_from(["", " ", "\n", "  // c\n"])), max_size=8))
def test_random_facts_agree(facts):
    text = HEAD + "".join(f"{sep}{rel}({', '.join(args)})." for rel, args, sep in facts)
    fast, slow = _both(text)
    assert fast == slow
