"""The parser's part for records and algebraic data types: their type definitions and terms.

`.type P = [a: number, b: P]`, `.type E = Num {n: number} | Add {l: E, r: E}`, and the terms
`[x, y]`, `nil`, `$Num(1)`, `$Mon` (tasks/records.py lowers the terms before checking).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.tasks.ast import Record, Term, TypeDef, TypeRef

if TYPE_CHECKING:
    from levelflow.tasks.parser_protocol import TokenParser as Parser


def _fields(p: Parser, close: str) -> tuple:
    """Return ((field, TypeRef), ...) up to the closing `close`, which is consumed."""
    out: list = []
    seen: set[str] = set()
    if not p.at(close):
        while True:
            name = p.ident("a field name")
            if name.text in seen:
                raise p.error(f"field '{name.text}' is declared twice", name)
            seen.add(name.text)
            p.expect(":")
            ty = p.ident("a type name")
            out.append((name.text, TypeRef(ty.text, p.loc(ty))))
            if not p.at(","):
                break
            p.take()
    p.expect(close)
    return tuple(out)


def record_type(p: Parser, name: str, loc) -> None:
    """Parse `[f: T, ...]` after `.type name =` into a record TypeDef."""
    p.take()  # [
    p.out.types.append(TypeDef(name, "record", (), loc, (("", _fields(p, "]")),)))


def adt_type(p: Parser, name: str, loc, first) -> None:
    """Parse `A {f: T} | B {}` after `.type name =` (the first branch name taken) into an ADT."""
    branches: list = []
    seen: set[str] = set()
    branch = first
    while True:
        if branch.text in seen:
            raise p.error(f"branch '{branch.text}' is declared twice", branch)
        seen.add(branch.text)
        p.expect("{")
        branches.append((branch.text, _fields(p, "}")))
        if not p.at("|"):
            break
        p.take()
        branch = p.ident("a branch name")
        if not p.at("{"):
            raise p.error("an algebraic data type's branches are written `Name {fields}`",
                          branch)
    p.out.types.append(TypeDef(name, "adt", (), loc, tuple(branches)))


def record_term(p: Parser) -> tuple[Term, int]:
    """Parse `[t, ...]` in a term position."""
    start = p.take()
    p.out.surface = True  # tasks/records.py lowers it
    args, depth = p.terms("]")
    return Record(tuple(args), "", p.loc(start)), depth + 1


def branch_term(p: Parser) -> tuple[Term, int]:
    """Parse `$Name(t, ...)` or `$Name` (a branch without fields)."""
    start = p.take()  # $
    p.out.surface = True
    nxt = p.tok
    if nxt.kind != "ident" or nxt.pos != start.pos + 1:
        raise p.unsupported("'$' (counters: write autoinc())", start)
    p.take()
    if not p.at("("):
        return Record((), "$" + nxt.text, p.loc(start)), 0
    p.take()
    args, depth = p.terms(")")
    return Record(tuple(args), "$" + nxt.text, p.loc(start)), depth + 1
