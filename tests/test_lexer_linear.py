"""The lexer's time is linear in its input: blanks and comments between statements never make
it backtrack, and they change no token (issue 43: 12 lines of `  //` took 13 s, 20 days)."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from levelflow.tasks import parse_program
from levelflow.tasks.lexer import Source, tokenize

# Pieces a person puts between statements; each ends where the next may start.
_BLANKS = st.text(alphabet=" \t", min_size=1, max_size=6)
_LINE_COMMENT = st.text(alphabet=" /*a\t", max_size=8).map(lambda body: f"//{body}\n")
_BLOCK_COMMENT = st.text(alphabet=" /a\n\t", max_size=8).map(lambda body: f"/*{body}*/")
_FILLER = st.lists(st.one_of(_BLANKS, st.just("\n"), _LINE_COMMENT, _BLOCK_COMMENT),
                   max_size=40).map("".join)
_STATEMENTS = [
    ".decl a(x:number)", ".decl b(x:number)", ".decl s(x:symbol)",
    "a(1).", "a(-2).", 's("x // not a comment").', "b(x) :- a(x).", "b(x) :- a(x), x > 1.",
    ".output b",
]


def _kinds_and_texts(text: str) -> list[tuple[str, str]]:
    tokens, error = tokenize(Source(text, "t.dl"))
    assert error is None, error
    return [(t.kind, t.text) for t in tokens[:-1]]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_STATEMENTS), _FILLER), min_size=1, max_size=8))
def test_blanks_and_comments_between_statements_change_no_token(parts):
    # Every statement starts a line in both texts, so the whole-fact fast path sees the same.
    with_filler = "".join(f"{stmt}\n{filler}\n" for stmt, filler in parts)
    without = "".join(f"{stmt}\n" for stmt, _ in parts)
    assert _kinds_and_texts(with_filler) == _kinds_and_texts(without)


def test_the_reported_program_parses_and_keeps_its_rules():
    text = ".decl a(x:number)\na(1).\n" + "  //\n" * 60 + ".decl b(x:number)\nb(x) :- a(x).\n"
    program = parse_program(text, "t.dl")
    assert [str(r.heads[0].relation) for r in program.rules] == ["a", "b"]


def test_long_runs_of_blanks_and_comments_end_in_a_subprocess():
    # Exponential backtracking holds the GIL, so only another process can time it out: each
    # run below is thousands of pieces long, where the old lexer needed 2**pieces steps.
    script = (
        "from levelflow.tasks import parse_program\n"
        "for filler in ('  //\\n', ' \\t \\n', '/* c */ ', '// x // y\\n  '):\n"
        "    text = '.decl a(x:number)\\na(1).\\n' + filler * 5000 + "
        "'.decl b(x:number)\\nb(x) :- a(x).\\n' + filler * 5000\n"
        "    assert len(parse_program(text, 't.dl').rules) == 2\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
