"""Soufflé components lowered to plain statements: `.comp`, `.init`, inheritance, `.override`,
type parameters and qualified names `inst.rel`.

A component is kept as its body's tokens. `.init inst = Name<number, symbol>` instantiates it:
its base components' bodies, then its own, each with the type parameters replaced by the
arguments and every relation, type and nested instance the component declares renamed
`inst.name`; the tokens are then parsed as ordinary statements. A relation the body names but
does not declare stays global, as in Soufflé. `.override r` drops the rules the bases give r.
So the engine sees relations named `inst.rel` (written to `inst.rel.csv`) and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from levelflow.tasks.ast import Loc
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.lexer import Token

MAX_INSTANCE_DEPTH = 32

# After these tokens an identifier names a relation or a type, never a variable.
_NAMING = frozenset({":", "<:", "=", "|"})


@dataclass(frozen=True)
class Comp:
    """`.comp Name<params> : Base<args>, ... { body }` as tokens."""

    name: str
    params: tuple[str, ...]
    bases: tuple[tuple[str, tuple[str, ...], Loc], ...]
    body: tuple[Token, ...]
    loc: Loc


@dataclass(frozen=True)
class Init:
    """`.init inst = Name<args>`."""

    name: str
    comp: str
    args: tuple[str, ...]
    loc: Loc


def merge_qualified(tokens: list[Token]) -> list[Token]:
    """Return the tokens with `a.b.c` written without spaces joined into one identifier.

    Path expressions `[a.b]` keep their '.', and `A(x).B(y).` is two facts: the '.' must sit
    between two identifiers."""
    out: list[Token] = []
    depth = 0
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        if tok.kind == "punct" and tok.text in "[]":
            depth += 1 if tok.text == "[" else -1
        if (depth == 0 and tok.kind == "ident" and i + 2 < n and tokens[i + 1].text == "."
                and tokens[i + 1].kind == "punct" and tokens[i + 2].kind == "ident"
                and tokens[i + 1].pos == tok.pos + len(tok.text)
                and tokens[i + 2].pos == tokens[i + 1].pos + 1):
            text, j = tok.text, i
            while (j + 2 < n and tokens[j + 1].kind == "punct" and tokens[j + 1].text == "."
                   and tokens[j + 2].kind == "ident"
                   and tokens[j + 1].pos == tokens[j].pos + len(tokens[j].text)
                   and tokens[j + 2].pos == tokens[j + 1].pos + 1):
                text += "." + tokens[j + 2].text
                j += 2
            out.append(Token("ident", text, text, tok.pos))
            i = j + 1
            continue
        out.append(tok)
        i += 1
    return out


def declared_names(body: tuple[Token, ...]) -> set[str]:
    """Return the relations, types and instances a body declares at its own level."""
    names: set[str] = set()
    depth = 0
    for k, tok in enumerate(body):
        if tok.kind == "punct" and tok.text in "{}":
            depth += 1 if tok.text == "{" else -1
            continue
        if depth or tok.kind != "directive":
            continue
        if tok.value in ("decl", "type", "number_type", "symbol_type", "init"):
            j = k + 1
            while j < len(body) and body[j].kind == "ident":
                names.add(body[j].text)
                if tok.value != "decl" or not (j + 1 < len(body) and body[j + 1].text == ","):
                    break
                j += 2
    return names


def rename(body: tuple[Token, ...], prefix: str, names: set[str], types: dict[str, str]
           ) -> list[Token]:
    """Return the body with declared names prefixed and type parameters replaced."""
    out: list[Token] = []
    for k, tok in enumerate(body):
        if tok.kind == "fact" and tok.text in names:  # a whole fact token: its relation
            out.append(Token("fact", prefix + tok.text, tok.value, tok.pos))
            continue
        if tok.kind != "ident":
            out.append(tok)
            continue
        prev = body[k - 1] if k else None
        if prev is not None and prev.kind == "directive" and prev.value == "init":
            out.append(tok)  # a nested instance's name: its own parse prefixes it
            continue
        nxt = body[k + 1] if k + 1 < len(body) else None
        head, _, rest = tok.text.partition(".")
        naming = (prev is not None and (prev.kind == "directive" or prev.text in _NAMING
                                        or (prev.text == "," and _in_directive(body, k))))
        calls = nxt is not None and nxt.kind == "punct" and nxt.text == "("
        if tok.text in types and (naming or _type_arg(body, k)):
            text = types[tok.text]
        elif head in names and (naming or calls or rest):
            text = prefix + tok.text
        else:
            out.append(tok)
            continue
        out.append(Token("ident", text, text, tok.pos))
    return out


def _in_directive(body, k: int) -> bool:
    """Return whether token k is in a directive's list of names (`.output a, b`)."""
    j = k - 1
    while j >= 0 and (body[j].kind == "ident" or body[j].text == ","):
        j -= 1
    return j >= 0 and body[j].kind == "directive"


def _type_arg(body, k: int) -> bool:
    """Return whether token k is a type argument `<...>` of a base or an instance."""
    j = k - 1
    while j >= 0 and (body[j].kind == "ident" or body[j].text == ","):
        j -= 1
    return j >= 0 and body[j].text == "<"


def check_arity(what: Comp, args: tuple[str, ...], loc: Loc) -> None:
    """Raise when a component is given the wrong number of type arguments."""
    if len(args) != len(what.params):
        raise DatalogError(f"component '{what.name}' takes {len(what.params)} type "
                           f"argument{'s' if len(what.params) != 1 else ''}, given {len(args)}",
                           loc)
