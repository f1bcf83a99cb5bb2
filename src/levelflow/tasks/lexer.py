"""Soufflé-style tokens: one linear pass over the text with a compiled master pattern.

Constant: the source text and its line starts. Each token keeps its character offset; a Loc is
computed from it only when an AST node or an error needs one.
"""

from __future__ import annotations

import dataclasses
import math
import re
from bisect import bisect_right

from levelflow.tasks.ast import Atom, Const, Loc, Rule
from levelflow.tasks.errors import DatalogError

# Only these words after a '.' form a directive, as in Soufflé's lexer; `A(x).B(y).` stays legal.
DIRECTIVES = frozenset({
    "decl", "type", "input", "output", "printsize", "limitsize", "comp", "init", "functor",
    "pragma", "plan", "include", "once", "override", "number_type", "symbol_type", "lattice",
})

# Whitespace and comments, skipped by a match of their own: nothing follows the loop in this
# pattern, so it never backtracks. Inside a token's pattern the same loop backtracked
# exponentially over runs of blanks and `//` lines whenever the token after them failed (a
# blank can end one `[ \t]+` or start the next), holding the GIL meanwhile.
_SKIP = re.compile(r"(?:[ \t\r\n\f\v]+|//[^\n]*|/\*(?:[^*]|\*(?!/))*\*/)*")

# Order matters: longer operators before their prefixes, floats before integers.
_TOKEN = re.compile(r"""
    (?:
      (?P<str>"(?:[^"\\]|\\[^\n])*")
    | (?P<badstr>")
    | (?P<badcomment>/\*)
    | (?P<ip>\d+\.\d+\.\d+\.\d+)
    | (?P<float>\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
    | (?P<hex>0[xX][0-9a-fA-F]+(?P<hsuf>u)?)
    | (?P<bin>0[bB][01]+(?P<bsuf>u)?)
    | (?P<int>\d+(?P<usuf>u)?)
    | (?P<dir>\.(?P<dname>DIRECTIVE_NAMES)(?![A-Za-z0-9_?]))
    | (?P<ident>[A-Za-z_?][A-Za-z0-9_?]*)
    | (?P<punct>:-|<:|<=|>=|!=|\*\*|[().,:!=<>+\-*/%;@\[\]$\#{}|^&~])
    | (?P<end>\Z)
    | (?P<bad>.)
    )
""".replace("DIRECTIVE_NAMES", "|".join(sorted(DIRECTIVES, key=len, reverse=True))),
    re.VERBOSE | re.DOTALL | re.ASCII)  # ASCII: \d must not take Arabic-Indic digits

# A whole simple fact `r(1, "a", -2.5).` on a line of its own after a statement's '.': one
# token instead of ten (programs with 100,000 inline facts). Anything else about a fact (hex,
# escapes, arithmetic, a newline inside) leaves it to the ordinary tokens: same result, slower.
_FACT_ARG = r'(?:(?:-[ \t]*)?\d{1,18}(?:\.\d{1,18})?|"[^"\\\n\t\r]*")'
_FACT = re.compile(r"""
    (?P<fact>[A-Za-z_?][A-Za-z0-9_?]*)[ \t]*\([ \t]*
    (?P<args>ARG(?:[ \t]*,[ \t]*ARG)*)[ \t]*\)[ \t]*\.(?![A-Za-z0-9_?(])
""".replace("ARG", _FACT_ARG), re.VERBOSE | re.ASCII)
FACT_ARGS = re.compile(r'(?:(-)[ \t]*)?(\d+(\.\d+)?)|(")([^"]*)"', re.ASCII)

MAX_INT_DIGITS = 80
# Soufflé's scanner (lexString) knows exactly these; any other escape is an error there.
_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "n": "\n",
            "r": "\r", "t": "\t", "v": "\v"}


class Token:
    """One token: kind (ident, int, float, string, directive, punct, eof), text, value, offset."""

    __slots__ = ("kind", "text", "value", "pos")

    def __init__(self, kind: str, text: str, value: object, pos: int) -> None:
        self.kind = kind
        self.text = text
        self.value = value
        self.pos = pos

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, {self.pos})"

    def describe(self) -> str:
        """Return the token as an error message shows it (`')'`, `end of file`, ...)."""
        if self.kind == "eof":
            return "end of file"
        text = self.text if len(self.text) <= 40 else self.text[:37] + "..."
        return f"'{text}'"


class Source:
    """A program text with its file name; maps character offsets to 1-based line:col."""

    __slots__ = ("file", "text", "line_starts", "line_map")

    def __init__(self, text: str, file: str, line_map=None) -> None:
        self.file = file
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        # After the preprocessor: where each line came from (tasks.preprocess.LineMap).
        self.line_map = line_map

    def loc(self, pos: int) -> Loc:
        """Return the Loc of character offset `pos` (in its original file when preprocessed)."""
        line = bisect_right(self.line_starts, pos)
        col = pos - self.line_starts[line - 1] + 1
        if self.line_map is None:
            return Loc(self.file, line, col)
        file, original = self.line_map.where(line)
        return Loc(file, original, col)

    def error(self, pos: int, what: str) -> DatalogError:
        """Return a DatalogError located at offset `pos`."""
        return DatalogError(what, self.loc(pos))


class BadEscape(ValueError):
    """A string literal holds an escape Soufflé's scanner does not know (`at`: its offset in
    the literal's body); str() is `a string with the unknown escape \\d`."""

    def __init__(self, char: str, at: int) -> None:
        super().__init__(f"a string with the unknown escape \\{char}")
        self.char, self.at = char, at


def unescape(body: str) -> str:
    """Return a string literal's body with Soufflé's escapes replaced (\\" \\' \\\\ \\a \\b \\f
    \\n \\r \\t \\v); raise BadEscape at any other, as Soufflé's scanner refuses it."""
    if "\\" not in body:
        return body
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == "\\" and i + 1 < n:
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise BadEscape(nxt, i)
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _unstorable(source: Source, pos: int, word: str, value) -> DatalogError | None:
    """Return the error of a float constant beyond the range of a float, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return source.error(pos, f"float constant {word} is beyond the range of a float")
    return None


def _bad_text(source: Source, kind: str, text: str, pos: int) -> DatalogError:
    """Return the error of text no token matches."""
    if kind == "badstr":
        return source.error(pos, "unterminated string (no closing '\"')")
    if kind == "badcomment":
        return source.error(pos, "unterminated comment (no closing '*/')")
    shown = text if text.isprintable() and not text.isspace() else f"\\u{ord(text):04x}"
    return source.error(pos, f"unexpected character '{shown}'")


def tokenize(source: Source) -> tuple[list[Token], DatalogError | None]:
    """Return the tokens of `source` up to an eof token, and the error that cut them short."""
    text = source.text
    tokens: list[Token] = []
    append = tokens.append
    start = at = 1 if text.startswith("\ufeff") else 0
    skip, token_match, fact_match, find = _SKIP.match, _TOKEN.match, _FACT.match, text.find
    after_dot = True
    while True:
        word_at = skip(text, at).end()
        if after_dot:
            m = fact_match(text, word_at)
            if m is not None and (at == start or find("\n", at, word_at) >= 0):
                append(Token("fact", m.group("fact"), m, word_at))
                at = m.end()
                continue
        at = word_at
        m = token_match(text, at)
        at = m.end()
        kind = m.lastgroup
        pos = m.start(kind)
        after_dot = kind == "punct" and m.group(kind) == "."
        if kind == "ident":
            word = m.group(kind)
            append(Token("ident", word, word, pos))
        elif kind == "punct":
            word = m.group(kind)
            append(Token("punct", word, word, pos))
        elif kind in ("int", "hex", "bin") and len(m.group(kind)) > MAX_INT_DIGITS:
            # Python refuses to convert very long digit strings; no such literal fits anyway.
            return _cut_short(tokens, pos, source.error(
                pos, f"integer constant {m.group(kind)[:20]}... does not fit in 64 bits"))
        elif kind == "int":
            # `5u` is an unsigned constant (Soufflé): it fits only unsigned attributes.
            word = m.group(kind)
            if m.group("usuf"):
                append(Token("uint", word, int(word[:-1]), pos))
            else:
                append(Token("int", word, int(word), pos))
        elif kind in ("str", "float"):
            word = m.group(kind)
            try:
                value = unescape(word[1:-1]) if kind == "str" else float(word)
            except BadEscape as e:  # the statements before the bad token are still parsed
                return _cut_short(tokens, pos, source.error(
                    pos + 1 + e.at, f"unknown escape sequence \\{e.char} in a string (a backslash "
                    f"itself is written \\\\, as in \"\\\\d\")"))
            error = _unstorable(source, pos, word, value)
            if error is not None:  # the statements before the bad token are still parsed
                return _cut_short(tokens, pos, error)
            append(Token("string" if kind == "str" else "float", word, value, pos))
        elif kind in ("hex", "bin"):
            # `0xffu`, `0b101u`: unsigned constants, as `5u` (Soufflé's scanner).
            word = m.group(kind)
            unsigned = word.endswith("u")
            append(Token("uint" if unsigned else "int", word, int(word.removesuffix("u"), 0), pos))
        elif kind == "ip":
            # Soufflé reads `a.b.c.d` as the number (a << 24) + (b << 16) + (c << 8) + d, computed
            # in a 32-bit int (so 192.168.0.1 is negative); a part above 255 is an error.
            parts = [int(p) for p in m.group(kind).split(".")]
            if max(parts) > 255:
                return _cut_short(tokens, pos, source.error(pos, "IP out of range"))
            value = (parts[0] << 24) + (parts[1] << 16) + (parts[2] << 8) + parts[3]
            value = value - (1 << 32) if value >= 1 << 31 else value
            append(Token("int", m.group(kind), value, pos))
        elif kind == "dir":
            append(Token("directive", m.group(kind), m.group("dname"), pos))
        elif kind == "end":
            break
        else:
            # The statements before the bad text are still parsed: an earlier problem wins.
            return _cut_short(tokens, pos, _bad_text(source, kind, m.group(kind), pos))
    append(Token("eof", "", None, len(text)))
    return tokens, None


def _cut_short(tokens: list[Token], pos: int,
               error: DatalogError) -> tuple[list[Token], DatalogError]:
    """Return the tokens so far, closed by an eof token at `pos`, and the error that cut them
    short (called once, on the error path only: never per token)."""
    tokens.append(Token("eof", "", None, pos))
    return tokens, error


_new_loc = tuple.__new__  # Loc(...) without its Python-level __new__


def _maker(cls):
    """Return a constructor of a frozen three-field slots dataclass that sets its slots
    directly: a frozen __init__ goes through object.__setattr__ by name, twice as slow, and a
    large program builds a few of these per fact."""
    names = [f.name for f in dataclasses.fields(cls)]
    assert len(names) == 3, cls
    first, second, third = (getattr(cls, name).__set__ for name in names)
    new = object.__new__

    def make(a, b, c):
        obj = new(cls)
        first(obj, a)
        second(obj, b)
        third(obj, c)
        return obj
    return make


_const, _atom, _rule = _maker(Const), _maker(Atom), _maker(Rule)


def simple_fact(source: Source, tok: Token) -> Rule:
    """Return the fact of a `fact` token (the lexer's fast path), as rule() would."""
    pos = tok.pos
    starts = source.line_starts
    line = bisect_right(starts, pos)
    base = starts[line - 1] - 1  # a column is an offset less this
    file = source.file
    if source.line_map is not None:
        file, line = source.line_map.where(line)
    loc = _new_loc(Loc, (file, line, pos - base))
    m = tok.value
    text = m.string
    at, end = m.span(2)  # the arguments
    find = text.find
    args = []
    # One findall for the fact's arguments, then each one's offset found from the last one's
    # end (only blanks and commas lie between): a match object per argument costs a third more.
    for minus, digits, frac, quote, body in _fact_args(text, at, end):
        if quote:
            start = find('"', at)
            at = start + len(body) + 2
            value, kind = body, "symbol"
        else:
            start = find("-" if minus else digits, at)
            at = (find(digits, start) if minus else start) + len(digits)
            value, kind = (float(digits), "float") if frac else (int(digits), "number")
            if minus:
                value = -value
        args.append(_const(value, kind, _new_loc(Loc, (file, line, start - base))))
    return _rule((_atom(tok.text, tuple(args), loc),), (), loc)


_fact_args = FACT_ARGS.findall
