"""The checks Soufflé's component checker makes, run on every component (nested ones too)
before any instance is made, so a component never instantiated is checked too.

Per component: its bases and the components its body instantiates are defined and given as
many type arguments as they take (one named by a type parameter is known only once
instantiated), it does not inherit from itself, and each `.override r` names a relation a base
declares (not the component itself) `overridable`. At the top level: each instance's component
is defined, and a component or instance name is not also a type, a relation, another component
or another instance. Each problem is one DatalogError at the statement it is about.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from levelflow.tasks.ast import DECL_QUALIFIERS
from levelflow.tasks.components import check_arity, lookup
from levelflow.tasks.errors import DatalogError

if TYPE_CHECKING:
    from levelflow.tasks.components import Comp, Init
    from levelflow.tasks.lexer import Token


def check_components(p) -> None:
    """Raise the first problem of the components and instances of the top-level parser `p`."""
    if not p.comps and not p.inits:
        return
    comps = list(p.comps.values())
    for comp in comps:  # grows: nested components are checked after their scope's
        comps.extend(comp.comps.values())
    for comp in comps:
        _check_bases(p.comps, comp)
    for comp in comps:
        _check_overrides(p, comp)
        for init in comp.inits:
            _check_init(p.comps, comp, init)
    for init in p.inits:
        _check_init(p.comps, None, init)
    _check_names(p, list(p.comps.values()))


def _check_init(top, scope: Comp | None, init: Init) -> None:
    if scope is not None and init.comp in scope.params:
        return  # a type parameter: known once the component is instantiated
    found = lookup(top, scope, init.comp, {})
    if found is None:
        raise DatalogError(f"component '{init.comp}' is not defined", init.loc)
    check_arity(found, init.args, init.loc)


def _check_bases(top, comp: Comp) -> None:
    for base, args, loc in comp.bases:
        if base in comp.params:
            continue  # a type parameter: known once the component is instantiated
        found = lookup(top, comp.outer, base, {})
        if found is None:
            raise DatalogError(f"component '{base}' is not defined", loc)
        check_arity(found, args, loc)
    if comp in _ancestors(top, comp):
        raise DatalogError(f"component '{comp.name}' inherits from itself", comp.loc)


def _ancestors(top, comp: Comp) -> list[Comp]:
    """Return the components `comp` inherits from, directly or not."""
    found: list[Comp] = []
    todo = [comp]
    while todo:
        cur = todo.pop()
        for base, _, _ in cur.bases:
            if base in cur.params:
                continue
            parent = lookup(top, cur.outer, base, {})
            if parent is not None and parent not in found:
                found.append(parent)
                todo.append(parent)
    return found


def _check_overrides(p, comp: Comp) -> None:
    overrides = [(k, tok) for k, tok in _top_level(comp.body)
                 if tok.kind == "directive" and tok.value == "override"]
    if not overrides:
        return
    own = dict(_declared(comp.body))
    inherited = {}
    for base in _ancestors(p.comps, comp):
        for rel, (overridable, tok) in _declared(base.body):
            if not overridable or rel not in inherited:
                inherited[rel] = (base.name, overridable, tok)
    for k, tok in overrides:
        rel = comp.body[k + 1] if k + 1 < len(comp.body) else None
        if rel is None or rel.kind != "ident":
            continue  # the parser says what is expected there
        where = p.loc(tok)
        if rel.text in own:
            raise DatalogError(f"'.override {rel.text}' in component '{comp.name}': the "
                               f"relation is declared in '{comp.name}' itself, not inherited",
                               where)
        if rel.text in inherited and not inherited[rel.text][1]:
            base, _, decl = inherited[rel.text]
            raise DatalogError(f"'.override {rel.text}' in component '{comp.name}': base "
                               f"component '{base}' does not declare it overridable (at "
                               f"{_where(p.loc(decl), where)})", where)


def _top_level(body: tuple[Token, ...]) -> Iterator[tuple[int, Token]]:
    """Yield (index, token) of a body's tokens outside nested components' braces."""
    depth = 0
    for k, tok in enumerate(body):
        if tok.kind == "punct" and tok.text in "{}":
            depth += 1 if tok.text == "{" else -1
        elif depth == 0:
            yield k, tok


def _declared(body: tuple[Token, ...]) -> Iterator[tuple[str, tuple[bool, Token]]]:
    """Yield (relation, (declared overridable, its name token)) per `.decl` of a body."""
    n = len(body)
    for k, tok in _top_level(body):
        if tok.kind != "directive" or tok.value != "decl":
            continue
        names, j = [], k + 1
        while j < n and body[j].kind == "ident":
            names.append(body[j])
            j += 2 if j + 1 < n and body[j + 1].text == "," else 1
        depth = 0
        while j < n:  # the attributes, to the ')' that closes them
            if body[j].text == "(":
                depth += 1
            elif body[j].text == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        qualifiers = set()
        j += 1
        while j < n and body[j].kind == "ident" and body[j].text in DECL_QUALIFIERS:
            qualifiers.add(body[j].text)
            j += 1
        for name in names:
            yield name.text, ("overridable" in qualifiers, name)


def _where(at, here) -> str:
    """Return `line:col` of `at`, with its file when it is not `here`'s."""
    return f"{at.line}:{at.col}" if at.file == here.file else f"{at.file}:{at.line}:{at.col}"


def _check_names(p, comps: list[Comp]) -> None:
    """Raise when a top-level component or instance takes a name already in use."""
    taken = {}
    for t in p.out.types:
        taken.setdefault(t.name, ("type", t.loc))
    for d in p.out.decls:
        taken.setdefault(d.name, ("relation", d.name_loc))
    for what, name, loc in ([("component", c.name, c.loc) for c in comps]
                            + [("instance", i.name, i.loc) for i in p.inits]):
        if name in taken:
            kind, at = taken[name]
            raise DatalogError(f"{what} '{name}' has the name of the {kind} declared at "
                               f"{_where(at, loc)}", loc)
        taken[name] = (what, loc)
