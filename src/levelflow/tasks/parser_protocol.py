"""The parser as the syntax modules it calls see it (choice, declarations, directives, paths,
records, subsume, terms).

They are functions of the parser `p` (tasks/parser.py) and parser.py imports them, so they name
its type by these protocols rather than by importing it: no import cycle, even a type-only one.
"""

from __future__ import annotations

from typing import Protocol

from levelflow.tasks.ast import IO, Atom, Loc, RawDecl, Rule, Term, TypeDef
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.lexer import Source, Token


class ParsedOut(Protocol):
    """What the syntax modules append to: the parts of `parser.Parsed` they fill in."""

    decls: list[RawDecl]
    types: list[TypeDef]
    ios: list[IO]
    eqrels: list[tuple[str, Loc]]
    choices: list[tuple[str, tuple[str, ...], Loc]]
    pragmas: list[tuple[str, str, Loc]]
    plans: list[Loc]
    surface: bool
    subsumptions: list[Rule]
    aggregates: bool


class TokenParser(Protocol):
    """The parser's cursor over its tokens, its errors and what it parsed so far."""

    source: Source
    depth: int  # nesting so far (`nest` counts it, bounded)
    path_top: int  # the depth at the current path atom's '['

    @property
    def out(self) -> ParsedOut: ...

    @property
    def tok(self) -> Token: ...

    def peek(self, k: int = 1) -> Token: ...

    def loc(self, tok: Token | None = None) -> Loc: ...

    def at(self, text: str) -> bool: ...

    def error(self, what: str, tok: Token | None = None) -> DatalogError: ...

    def expected(self, what: str) -> DatalogError: ...

    def unsupported(self, what: str, tok: Token | None = None) -> DatalogError: ...

    def take(self) -> Token: ...

    def expect(self, text: str) -> Token: ...

    def ident(self, what: str) -> Token: ...

    def nest(self) -> None: ...

    def expr(self) -> Term: ...

    def terms(self, close: str) -> tuple[list[Term], int]: ...

    def atom(self) -> Atom: ...

    def disjunction(self) -> list[tuple]: ...
