"""Soufflé components, their syntax: `.comp`, `.init`, `.override`, qualified names `inst.rel`,
and how a component name is found from where it is used (`lookup`).

A component's body is parsed once, where it is defined, into its own statements, components and
instances (a `Comp`); tasks/comp_instances.py makes each instance from them, as Soufflé does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from levelflow.tasks.ast import Loc
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.lexer import Token

MAX_COMP_NESTING = 32  # components defined inside components, each a parser's recursion
MAX_INHERITANCE = 64  # bases of bases: each a recursion of the lookup and the instantiation


@dataclass(frozen=True)
class Init:
    """`.init inst = Name<args>`."""

    name: str
    comp: str
    args: tuple[str, ...]
    loc: Loc


@dataclass(eq=False)
class Comp:
    """`.comp Name<params> : Base<args>, ... { body }`: its body's tokens (for comp_check) and
    what they parse to: statements (a parser.Parsed), the components and instances it defines."""

    name: str
    params: tuple[str, ...]
    bases: tuple[tuple[str, tuple[str, ...], Loc], ...]
    body: tuple[Token, ...]
    loc: Loc
    outer: Comp | None  # the component whose body defines it; None at the top level
    parsed: object = None
    comps: dict[str, Comp] = field(default_factory=dict)
    inits: list[Init] = field(default_factory=list)


def merge_qualified(tokens: list[Token]) -> list[Token]:
    """Return the tokens with `a.b.c` written without spaces joined into one identifier.

    Path expressions `[a.b]` keep their '.', and `A(x).B(y).` is two facts: the '.' must sit
    between two identifiers. In brackets, a name after ':' is a record field's type: joined."""
    out: list[Token] = []
    depth = 0
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        if tok.kind == "punct" and tok.text in "[]":
            depth += 1 if tok.text == "[" else -1
        if ((depth == 0 or (i and tokens[i - 1].text == ":")) and tok.kind == "ident"
                and i + 2 < n and tokens[i + 1].text == "." and tokens[i + 1].kind == "punct"
                and tokens[i + 2].kind == "ident"
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


def check_arity(what: Comp, args: tuple[str, ...], loc: Loc) -> None:
    """Raise when a component is given the wrong number of type arguments."""
    if len(args) != len(what.params):
        raise DatalogError(f"component '{what.name}' takes {len(what.params)} type "
                           f"argument{'s' if len(what.params) != 1 else ''}, given {len(args)}",
                           loc)


def lookup(top: dict[str, Comp], scope: Comp | None, name: str, binding: dict[str, str],
           seen: frozenset = frozenset()) -> Comp | None:
    """Return the component `name` means in `scope`, as Soufflé finds it: a type parameter's
    argument first; then the components defined in the scope, in its bases' scopes and in its
    enclosing scopes, innermost first; then the top level."""
    name = binding.get(name, name)
    if len(seen) > MAX_INHERITANCE and scope is not None:
        raise DatalogError(f"components inherit through more than {MAX_INHERITANCE} levels",
                           scope.loc)
    while scope is not None and scope not in seen:
        if name in scope.comps:
            return scope.comps[name]
        inner = seen | {scope}
        for base, _, _ in scope.bases:
            found = lookup(top, scope.outer, base, binding, inner)
            if found is scope:
                return None
            if found is not None and (found := lookup(top, found, name, binding, inner)):
                return found
        scope = scope.outer
    return top.get(name)


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
    """Parse `.comp Name<params> : Base<args>, ... { body }` and its body's statements."""
    start = p.take()
    name = p.ident("a component name")
    params = _type_args(p)
    bases = []
    while p.at(":") or (bases and p.at(",")):  # Soufflé takes ':' or ',' between bases
        p.take()
        base = p.ident("a base component name")
        bases.append((base.text, _type_args(p), p.loc(base)))
    p.expect("{")
    first, depth = p.i, 1
    while depth:
        tok = p.take()
        if tok.kind == "eof":
            raise p.error(f"component '{name.text}' has no closing '}}'", start)
        if tok.kind == "punct" and tok.text in "{}":
            depth += 1 if tok.text == "{" else -1
    earlier = p.comps.get(name.text)
    if earlier is not None:
        raise p.error(f"component '{name.text}' is already defined at {earlier.loc.line}:"
                      f"{earlier.loc.col}", name)
    if p.level >= MAX_COMP_NESTING:
        raise p.error(f"components nest deeper than {MAX_COMP_NESTING}", start)
    body = tuple(p.toks[first:p.i - 1])
    comp = Comp(name.text, params, tuple(bases), body, p.loc(start), p.scope)
    sub = type(p)(p.source, [*body, Token("eof", "", None, p.toks[p.i - 1].pos)], comp,
                  p.level + 1)
    sub.parse()
    comp.parsed, comp.comps, comp.inits = sub.out, sub.comps, sub.inits
    p.comps[name.text] = comp


def init_def(p) -> None:
    """Parse `.init inst = Name<args>`; instances are made once the whole program is read."""
    start = p.take()
    name = p.ident("an instance name")
    p.expect("=")
    comp = p.ident("a component name")
    p.inits.append(Init(name.text, comp.text, _type_args(p), p.loc(start)))


def override(p) -> None:
    """Parse `.override rel` (only inside a component)."""
    start = p.take()
    if p.scope is None:
        raise p.error("'.override' is only allowed in a component", start)
    p.out.overrides.append(p.ident("a relation name").text)
