"""Regular expressions as Soufflé's `match` reads them, written out for the engines levelflow runs.

Soufflé calls `std::regex_match(text, std::regex(pattern))`: the ECMAScript grammar of the C++
standard ([re.grammar], ECMA-262 3rd edition with C++'s changes), over the bytes of the UTF-8
text (`std::string`), in the C locale. Where GCC's libstdc++, which Soufflé's Linux builds use,
reads a pattern otherwise than that grammar says, it is followed: `]` and `}` alone are
literals, `a**` repeats a repetition, `\\cX` is the letter X, a `\\u` escape keeps its low
byte, a range compares `char`s, which are signed (`[\\x00-\\xff]` is malformed), and a
backreference must name a group closed before it; a pattern of more than 100,000 automaton
states is refused.

`translate` parses the pattern once and writes it twice: for the linear-time engines (RE2 over
bytes as Latin-1, Rust's `regex` through Polars over ASCII text), where nothing needs
backtracking, and for the backtracking `regex` module over bytes. Every literal and class is
written as explicit bytes (`\\xHH`, `[\\x30-\\x39]`), so no engine's reading of `.`, `\\s`,
`\\w`, `$`, `[[`, `(?` or `{,n}` comes into play. A pattern std::regex refuses raises
PatternError; Soufflé then warns and matches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

ALL = (1 << 256) - 1  # byte sets are 256-bit masks


def _bytes_of(chars: str) -> int:
    return sum(1 << ord(c) for c in set(chars))


def _span(lo: int, hi: int) -> int:
    return ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)


_DIGIT = _span(0x30, 0x39)
_UPPER, _LOWER = _span(0x41, 0x5A), _span(0x61, 0x7A)
_ALPHA = _UPPER | _LOWER
_SPACE = _bytes_of(" \t\n\v\f\r")
_GRAPH = _span(0x21, 0x7E)
# The C locale's <ctype.h> classes: what [[:name:]] and \d \s \w hold (libstdc++'s names).
CLASSES = {
    "alnum": _ALPHA | _DIGIT, "alpha": _ALPHA, "blank": _bytes_of(" \t"),
    "cntrl": _span(0, 0x1F) | 1 << 0x7F, "digit": _DIGIT, "graph": _GRAPH,
    "lower": _LOWER, "print": _GRAPH | 1 << 0x20, "punct": _GRAPH & ~(_ALPHA | _DIGIT),
    "space": _SPACE, "upper": _UPPER, "xdigit": _DIGIT | _bytes_of("abcdefABCDEF"),
    "d": _DIGIT, "s": _SPACE, "w": _ALPHA | _DIGIT | 1 << 0x5F,
}
_QUOTED = {"d": "d", "s": "s", "w": "w"}
# ECMAScript's `.`: any character but a line terminator; libstdc++ tests '\n' and '\r' (the
# other two, U+2028 and U+2029, are three bytes each in UTF-8).
_DOT = ALL & ~_bytes_of("\n\r")
_CONTROL = {ord("0"): 0, ord("f"): 0x0C, ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09,
            ord("v"): 0x0B}
_QUANTIFIERS = b"*+?{"
_HEX = b"0123456789abcdefABCDEF"
# libstdc++ refuses a pattern whose automaton passes this many states (its
# _GLIBCXX_REGEX_STATE_LIMIT): a repetition {n,m} copies its atom m times. The count here is
# close to libstdc++'s, not equal; it also keeps counts RE2 would misread (an overflowing
# `{99999999999}` is literal text to RE2) away from the engines.
STATE_LIMIT = 100_000


class PatternError(ValueError):
    """A pattern std::regex refuses (str() says why)."""


@dataclass(frozen=True, slots=True)
class Translated:
    """A pattern written for each engine (each matches the whole text, anchors included)."""

    linear: str | None  # RE2 / Rust regex syntax; None: backreferences or lookahead
    backtracking: str  # the `regex` module's syntax, over bytes


@lru_cache(maxsize=4096)
def translate(pattern: str) -> Translated:
    """Return the pattern written for the linear and the backtracking engines; raise
    PatternError when std::regex would refuse it."""
    reader = _Reader(pattern.encode("utf-8", "surrogatepass"))
    linear, backtracking = reader.disjunction()
    if reader.pos < len(reader.data):  # a `)` without its `(`
        raise PatternError(f"unmatched ')' at byte {reader.pos + 1}")
    return Translated(None if reader.backtracks else f"^(?:{linear})$", f"(?:{backtracking})")


def problem(pattern: str) -> str | None:
    """Return why std::regex refuses the pattern, or None when it reads it."""
    try:
        translate(pattern)
    except PatternError as e:
        return str(e)
    return None


def _literal(b: int) -> str:
    return chr(b) if chr(b).isascii() and chr(b).isalnum() else f"\\x{b:02x}"


def _class(mask: int) -> str:
    """Return a byte set as a class of explicit ranges (an empty set matches nothing)."""
    if mask & (mask - 1) == 0 and mask:  # one byte
        return _literal(mask.bit_length() - 1)
    if mask == 0:
        return "[^\\x00-\\xff]"
    parts, b = [], 0
    while b < 256:
        if mask >> b & 1:
            end = b
            while end + 1 < 256 and mask >> (end + 1) & 1:
                end += 1
            parts.append(f"\\x{b:02x}" if end == b else f"\\x{b:02x}-\\x{end:02x}")
            b = end + 1
        else:
            b += 1
    return "[" + "".join(parts) + "]"


def _signed(b: int) -> int:
    return b - 256 if b >= 128 else b


def _range(lo: int, hi: int) -> int:
    """Return the bytes of `[lo-hi]`, comparing signed chars as libstdc++ does."""
    if _signed(lo) > _signed(hi):
        raise PatternError(f"bad range {_literal(lo)}-{_literal(hi)} in a bracket expression")
    return sum(1 << b for b in range(256) if _signed(lo) <= _signed(b) <= _signed(hi))


class _Reader:
    """A recursive-descent reader of the pattern's bytes; each part returns its two writings."""

    __slots__ = ("backtracks", "data", "groups", "open", "pos", "states")

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0
        self.groups = 0  # capturing groups opened so far
        self.open: list[int] = []  # the ones not closed yet
        self.backtracks = False  # a backreference or a lookahead was read
        self.states = 0  # about as many as libstdc++'s automaton would hold

    def peek(self) -> int | None:
        return self.data[self.pos] if self.pos < len(self.data) else None

    def take(self) -> int:
        if self.pos >= len(self.data):
            raise PatternError("the pattern ends early")
        self.pos += 1
        return self.data[self.pos - 1]

    def disjunction(self) -> tuple[str, str]:
        alternatives = [self.alternative()]
        while self.peek() == ord("|"):
            self.pos += 1
            self.states += 1
            alternatives.append(self.alternative())
        return "|".join(a for a, _ in alternatives), "|".join(b for _, b in alternatives)

    def alternative(self) -> tuple[str, str]:
        linear, backtracking = [], []
        while self.peek() not in (None, ord("|"), ord(")")):
            a, b = self.term()
            linear.append(a)
            backtracking.append(b)
        return "".join(linear), "".join(backtracking)

    def term(self) -> tuple[str, str]:
        c = self.peek()
        if c in _QUANTIFIERS:
            raise PatternError(f"'{chr(c)}' at byte {self.pos + 1} repeats nothing")
        before = self.states
        self.states += 1
        assertion = self.assertion()
        if assertion is not None:
            return assertion
        linear, backtracking = self.atom()
        while self.peek() is not None and self.peek() in _QUANTIFIERS:
            suffix, copies = self.quantifier()
            self.states += (self.states - before) * copies + 2
            if self.states > STATE_LIMIT:
                raise PatternError(f"the repetition {suffix} makes the pattern more than the "
                                   f"{STATE_LIMIT:,} states std::regex allows")
            linear, backtracking = f"(?:{linear}){suffix}", f"(?:{backtracking}){suffix}"
        return linear, backtracking

    def assertion(self) -> tuple[str, str] | None:
        c, rest = self.peek(), self.data[self.pos:self.pos + 3]
        if c == ord("^"):
            self.pos += 1
            return "^", "^"
        if c == ord("$"):  # the end of the text only (no multiline): \Z in Python's syntax
            self.pos += 1
            return "$", "\\Z"
        if rest[:2] in (b"\\b", b"\\B"):
            self.pos += 2
            return rest[:2].decode(), rest[:2].decode()
        if rest in (b"(?=", b"(?!"):
            self.pos += 3
            _, inner = self.disjunction()
            self.close()
            self.backtracks = True
            return "", f"{rest.decode()}{inner})"
        return None

    def close(self) -> None:
        if self.peek() != ord(")"):
            raise PatternError("a '(' is not closed")
        self.pos += 1

    def atom(self) -> tuple[str, str]:
        c = self.take()
        if c == ord("."):
            return _class(_DOT), _class(_DOT)
        if c == ord("["):
            written = _class(self.bracket())
            return written, written
        if c == ord("\\"):
            return self.escape()
        if c != ord("("):
            return _literal(c), _literal(c)
        if self.peek() == ord("?"):
            self.pos += 1
            if self.peek() != ord(":"):  # (?= and (?! are assertions, read before atoms
                raise PatternError("'(?' is followed by neither ':', '=' nor '!' (ECMAScript "
                                   "has no (?i), (?P<name>, (?<= or other groups)")
            self.pos += 1
            linear, backtracking = self.disjunction()
            self.close()
            return f"(?:{linear})", f"(?:{backtracking})"
        self.groups += 1
        self.open.append(self.groups)
        linear, backtracking = self.disjunction()
        self.close()
        self.open.pop()
        return f"(?:{linear})", f"({backtracking})"

    def escape(self) -> tuple[str, str]:
        c = self.take()
        if chr(c) in "123456789":
            start = self.pos - 1
            while self.peek() is not None and chr(self.peek()) in "0123456789":
                self.pos += 1
            n = int(self.data[start:self.pos])
            if n > self.groups or n in self.open:
                raise PatternError(f"the backreference \\{n} names no group closed before it")
            self.backtracks = True
            # A group that took no part in the match matches the empty text, as in ECMAScript.
            return "", f"(?({n})\\g<{n}>)"
        written = _class(self.class_escape(c))
        return written, written

    def class_escape(self, c: int, in_bracket: bool = False) -> int:
        """Return the bytes an escape `\\c` (c already read) stands for."""
        if in_bracket and c == ord("b"):
            return 1 << 0x08  # backspace
        if c in _CONTROL:
            return 1 << _CONTROL[c]
        if chr(c).lower() in _QUOTED:
            mask = CLASSES[chr(c).lower()]
            return ALL & ~mask if chr(c).isupper() else mask
        if c == ord("c"):
            return 1 << self.take()  # libstdc++ reads \cX as X
        if c in (ord("x"), ord("u")):
            digits = self.data[self.pos:self.pos + (2 if c == ord("x") else 4)]
            if len(digits) < (2 if c == ord("x") else 4) or any(d not in _HEX for d in digits):
                raise PatternError(f"\\{chr(c)} is not followed by hexadecimal digits")
            self.pos += len(digits)
            return 1 << (int(digits, 16) & 0xFF)  # a char holds the low byte
        if in_bracket and (c == ord("B") or chr(c) in "123456789"):
            raise PatternError(f"\\{chr(c)} inside a bracket expression")
        return 1 << c  # an identity escape: any other character stands for itself

    def bracket(self) -> int:
        """Return the bytes a bracket expression holds (`[` already read)."""
        negate = self.peek() == ord("^")
        self.pos += negate
        mask = 0
        last: int | None | str = None  # the char waiting to start a range, or "class"
        first = True
        while True:
            c = self.take() if self.pos < len(self.data) else None
            if c is None:
                raise PatternError("a '[' is not closed")
            if c == ord("]"):  # ECMAScript: `[]` matches nothing and `[^]` anything
                break
            if c == ord("-") and not first:
                if self.peek() == ord("]"):
                    self.pos += 1
                    mask |= 1 << ord("-") | (1 << last if isinstance(last, int) else 0)
                    last = None
                    break
                if last == "class":
                    raise PatternError("a range in a bracket expression starts at a class")
                if isinstance(last, int):
                    end = self.bracket_char()
                    if end is None:
                        raise PatternError("a range in a bracket expression ends at a class")
                    mask |= _range(last, end)
                    last = None
                    continue
                c = None  # a dash after a range stands for itself
            if c is not None:
                self.pos -= 1
                item = self.bracket_item()
            else:
                item = ord("-")
            if isinstance(last, int):
                mask |= 1 << last
            if isinstance(item, int):
                last = item
            else:
                mask |= item[0]
                last = "class"
            first = False
        if isinstance(last, int):
            mask |= 1 << last
        return ALL & ~mask if negate else mask

    def bracket_char(self) -> int | None:
        """Return the char that ends a range, or None if a class or `[.x.]` stands there."""
        if self.data[self.pos:self.pos + 2] in (b"[.", b"[:", b"[="):
            return None
        item = self.bracket_item()
        return item if isinstance(item, int) else None

    def bracket_item(self) -> int | tuple[int]:
        """Return one char of a bracket expression, or a class as a 1-tuple of its bytes."""
        c = self.take()
        if c == ord("\\"):
            e = self.take()
            mask = self.class_escape(e, in_bracket=True)
            is_class = chr(e).lower() in _QUOTED
            return (mask,) if is_class else mask.bit_length() - 1
        if c == ord("[") and self.peek() in (ord("."), ord(":"), ord("=")):
            kind = chr(self.take())
            end = self.data.find(kind.encode(), self.pos)  # the name ends at the first `kind`
            if end < 0 or self.data[end + 1:end + 2] != b"]":
                raise PatternError(f"'[{kind}' is not closed by '{kind}]'")
            name = self.data[self.pos:end].decode("utf-8", "replace")
            self.pos = end + 2
            if kind == ":":
                if name.lower() not in CLASSES:
                    raise PatternError(f"unknown character class [:{name}:]")
                return (CLASSES[name.lower()],)
            if len(name.encode()) != 1:
                raise PatternError(f"unknown collating element [{kind}{name}{kind}]")
            return ord(name) if kind == "." else (1 << ord(name),)
        return c

    def quantifier(self) -> tuple[str, int]:
        """Return a quantifier as written for the engines, and the copies of its atom it makes."""
        c = self.take()
        if c == ord("{"):
            end = self.data.find(b"}", self.pos)
            body = self.data[self.pos:end].decode("ascii", "replace") if end >= 0 else ""
            low, comma, high = body.partition(",")
            if end < 0 or not low.isdigit() or (high and not high.isdigit()):
                raise PatternError("a '{' is not a repetition {n}, {n,} or {n,m}")
            if high and int(high) < int(low):
                raise PatternError(f"the repetition {{{body}}} has its bounds reversed")
            self.pos = end + 1
            suffix = f"{{{int(low)}{',' if comma else ''}{int(high) if high else ''}}}"
            copies = int(high) if high else int(low) + bool(comma)
        else:
            suffix, copies = chr(c), 0
        if self.peek() == ord("?"):  # lazy: the same texts match, in another order
            self.pos += 1
            suffix += "?"
        return suffix, copies
