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
    scope: str = ""  # the instance whose body defines it ("a." ...), "" at the top level


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


# -- parsing: functions of the parser `p` (tasks/parser.py) -----------------------------------

def _type_args(p) -> tuple[str, ...]:
    """Return `<T1, T2>` at the cursor (none: ())."""
    if not p.at("<"):
        return ()
    p.take()
    args = [p.ident("a type name").text]
    while p.at(","):
        p.take()
        args.append(p.ident("a type name").text)
    p.expect(">")
    return tuple(args)


def comp_def(p) -> None:
    """Parse `.comp Name<params> : Base<args> { body }`, keeping the body's tokens."""
    start = p.take()
    name = p.ident("a component name")
    params = _type_args(p)
    bases = []
    if p.at(":"):
        p.take()
        while True:
            base = p.ident("a base component name")
            bases.append((base.text, _type_args(p), p.loc(base)))
            if not p.at(","):
                break
            p.take()
    p.expect("{")
    first, depth = p.i, 1
    while depth:
        tok = p.take()
        if tok.kind == "eof":
            raise p.error(f"component '{name.text}' has no closing '}}'", start)
        if tok.kind == "punct" and tok.text in "{}":
            depth += 1 if tok.text == "{" else -1
    earlier = p.comps.get(name.text)
    if earlier is not None and earlier.scope == p.prefix:  # a nested scope may shadow it
        raise p.error(f"component '{name.text}' is already defined at {earlier.loc.line}:"
                      f"{earlier.loc.col}", name)
    p.comps[name.text] = Comp(name.text, params, tuple(bases),
                              tuple(p.toks[first:p.i - 1]), p.loc(start), p.prefix)


def init_def(p) -> None:
    """Parse `.init inst = Name<args>`; the instance is made at the end of its scope."""
    start = p.take()
    name = p.ident("an instance name")
    p.expect("=")
    comp = p.ident("a component name")
    p.inits.append(Init(name.text, comp.text, _type_args(p), p.loc(start)))


def override(p) -> None:
    """Parse `.override rel` (only inside a component)."""
    start = p.take()
    if not p.prefix:
        raise p.error("'.override' is only allowed in a component", start)
    p.out.overrides.append(p.ident("a relation name").text)


def _parts(p, comp: Comp, args: tuple[str, ...], loc: Loc, seen: tuple[str, ...]
          ) -> list[tuple[tuple[Token, ...], dict[str, str]]]:
    """Return (body, type arguments) of the component's bases, then its own, in order."""
    if comp.name in seen:
        raise DatalogError(f"component '{comp.name}' inherits from itself", loc)
    check_arity(comp, args, loc)
    types = dict(zip(comp.params, args, strict=True))
    out = []
    for base, base_args, base_loc in comp.bases:
        base = types.get(base, base)  # `.comp C<T> : T`: the base is a type argument
        if base not in p.comps:
            raise DatalogError(f"component '{base}' is not defined", base_loc)
        out += _parts(p, p.comps[base], tuple(types.get(a, a) for a in base_args),
                          base_loc, seen + (comp.name,))
    out.append((comp.body, types))
    return out


def instantiate(p, init: Init) -> None:
    """Parse the instance's bodies as statements of relations named `inst.rel`."""
    comp = p.comps.get(init.comp)
    if comp is None:
        raise DatalogError(f"component '{init.comp}' is not defined", init.loc)
    if p.level >= MAX_INSTANCE_DEPTH:
        raise DatalogError(f"component instances nest deeper than {MAX_INSTANCE_DEPTH}",
                           init.loc)
    prefix = f"{p.prefix}{init.name}."
    parts = _parts(p, comp, init.args, init.loc, ())
    names = set().union(*(declared_names(body) for body, _ in parts))
    done: list = []  # each part's Parsed
    for body, types in parts:
        eof = Token("eof", "", None, body[-1].pos if body else 0)
        sub = type(p)(p.source, rename(body, prefix, names, types) + [eof], p.comps,
                      prefix, p.level + 1)
        sub.parse()
        dropped = {prefix + name if not name.startswith(prefix) else name
                   for name in sub.out.overrides}
        for earlier in done:
            earlier.rules = [r for r in earlier.rules
                             if not any(h.relation in dropped for h in r.heads)]
        done.append(sub.out)
    for part in done:
        p.out.absorb(part)
