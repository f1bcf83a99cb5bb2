"""The parser's part for declarations: `.decl`, `.type` and the I/O directives.

Functions of the parser `p` (tasks/parser.py calls them per statement), as record_syntax.py's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.tasks.ast import DECL_QUALIFIERS, IO, RawDecl, TypeDef, TypeRef
from levelflow.tasks.choice import parse_choice
from levelflow.tasks.lexer import Token
from levelflow.tasks.record_syntax import adt_type, record_type

if TYPE_CHECKING:
    from levelflow.tasks.parser_protocol import TokenParser as Parser


def parse_decl(p: Parser) -> None:
    """Parse `.decl A, B(attr: T, ...) qualifiers` into a RawDecl per relation."""
    start = p.take()
    names = [p.ident("a relation name")]
    while p.at(","):  # `.decl A, B(x:number)`: several relations, one signature
        p.take()
        names.append(p.ident("a relation name"))
    name = names[0]
    p.expect("(")
    attrs: list[str] = []
    types: list[TypeRef] = []
    if not p.at(")"):
        while True:
            attr = p.ident("an attribute name")
            if attr.text in attrs:  # as Soufflé: "Doubly defined attribute name"
                raise p.error(f"attribute '{attr.text}' of {name.text} is declared twice",
                                 attr)
            p.expect(":")
            if p.at("["):
                raise p.unsupported("'[...]' (record types)")
            t = p.ident("a type name")
            attrs.append(attr.text)
            types.append(TypeRef(t.text, p.loc(t)))
            if not p.at(","):
                break
            p.take()
    p.expect(")")
    extra_io: list[str] = []
    eqrel: Token | None = None
    choice = None
    # A qualifier is a known word not opening an atom: `A(1).` may follow on the next line.
    while (p.tok.kind == "ident" and p.tok.text in DECL_QUALIFIERS
           and not (p.peek().kind == "punct" and p.peek().text in ("(", ",", ":-"))):
        q = p.take()
        if q.text == "eqrel":
            eqrel = q
        if q.text == "choice":
            choice = parse_choice(p, q)
        if q.text in ("input", "output", "printsize"):
            extra_io.append(q.text)
    for name in names:
        p.out.decls.append(RawDecl(name.text, tuple(attrs), tuple(types),
                                      p.loc(start), p.loc(name)))
        for kind in extra_io:
            p.out.ios.append(IO(kind, name.text, (), p.loc(name)))
        if eqrel is not None:
            p.out.eqrels.append((name.text, p.loc(eqrel)))
        if choice is not None:
            p.out.choices.append((name.text, *choice))


def parse_type(p: Parser) -> None:
    """Parse `.type` (subtype, union, record or ADT) into a TypeDef."""
    p.take()
    name = p.ident("a type name")
    loc = p.loc(name)
    if p.at("<:"):
        p.take()
        base = p.ident("a base type")
        ref = TypeRef(base.text, p.loc(base))
        p.out.types.append(TypeDef(name.text, "subtype", (ref,), loc))
        return
    if not p.at("="):
        raise p.expected("'<:' or '='")
    p.take()
    if p.at("["):
        return record_type(p, name.text, loc)
    bases: list[TypeRef] = []
    while True:
        base = p.ident("a type name")
        if p.at("{") and not bases:
            return adt_type(p, name.text, loc, base)
        if p.at("{"):
            raise p.error("a union of types cannot hold an ADT branch", base)
        bases.append(TypeRef(base.text, p.loc(base)))
        if not p.at("|"):
            break
        p.take()
    p.out.types.append(TypeDef(name.text, "equiv", tuple(bases), loc))


def parse_io(p: Parser, kind: str) -> None:
    """Parse `.input`, `.output`, `.printsize` or `.limitsize` with its options."""
    p.take()
    names = [p.ident("a relation name")]
    while p.at(","):
        p.take()
        names.append(p.ident("a relation name"))
    options: list[tuple[str, str]] = []
    if p.at("("):
        p.take()
        while not p.at(")"):
            key = p.ident("an option name")
            p.expect("=")
            value = p.tok
            if value.kind not in ("string", "ident", "int", "float"):
                raise p.expected("an option value")
            p.take()
            options.append((key.text, value.value if value.kind == "string" else value.text))
            if not p.at(","):
                break
            p.take()
        p.expect(")")
    for name in names:
        p.out.ios.append(IO(kind, name.text, tuple(options), p.loc(name)))
