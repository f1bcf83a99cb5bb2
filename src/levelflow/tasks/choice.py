"""`choice-domain`, lowered to stratified rules before checking, with one deterministic rule:
per key, the relation keeps its smallest candidate tuple (the non-key attributes compared in
declaration order: numbers by value, symbols by their text).

    .decl r(k: number, v: number) choice-domain k
    r(k, v) :- body.              @cand_r(k, v) :- body.
                                  r(c0, c1) :- @cand_r(c0, c1), !@worse_r(c0, c1).
                                  @worse_r(c0, c1) :- @cand_r(c0, c1), @cand_r(c0, d1), d1 < c1.

A candidate that changes re-chooses only its key: the rules join on the key, so counting and
delete-and-rederive maintain the choice as any stratified negation. A relation in a recursive
cycle with its own candidates (Soufflé's choice depends on insertion order there) is refused.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from levelflow.tasks.ast import Atom, Comparison, Loc, Negation, Rule, Var

if TYPE_CHECKING:
    from levelflow.tasks.parser_protocol import TokenParser as Parser
    from levelflow.tasks.typecheck import Report


def parse_choice(p: Parser, start) -> tuple[tuple[str, ...], Loc]:
    """Return (key attributes, where) of `choice-domain KEY` after `choice` (KEY an attribute
    or `(a, b)`)."""
    if not p.at("-") or p.peek().kind != "ident" or p.peek().text != "domain":
        raise p.expected("'choice-domain'")
    p.take()
    p.take()
    keys: list[str] = []
    if p.at("("):
        p.take()
        while True:
            keys.append(p.ident("an attribute name").text)
            if not p.at(","):
                break
            p.take()
        p.expect(")")
    else:
        keys.append(p.ident("an attribute name").text)
    if p.at(",") and p.peek().kind == "ident" or p.at(",") and p.peek().text == "(":
        raise p.unsupported("several choice-domain keys (one key, composite as (a, b), is)")
    return tuple(keys), p.loc(start)


def _reaches(rules: list[Rule], start: str) -> bool:
    """Return whether a rule for `start` reads, through rules, `start` itself."""
    reads: dict[str, set[str]] = {}
    for rule in rules:
        for head in rule.heads:
            reads.setdefault(head.relation, set()).update(rule.reads())
    seen, stack = set(), list(reads.get(start, ()))
    while stack:
        name = stack.pop()
        if name == start:
            return True
        if name not in seen:
            seen.add(name)
            stack.extend(reads.get(name, ()))
    return False


def lower_choices(parsed, decls: dict, report: Report) -> tuple[dict, list[Rule]]:
    """Return the Decls with each choice's candidate relations and the rules lowered."""
    rules = parsed.rules
    if not parsed.choices:
        return decls, rules
    decls = dict(decls)
    inputs = {io.relation for io in parsed.ios if io.kind == "input"}
    for name, keys, loc in parsed.choices:
        decl = decls.get(name)
        if decl is None:
            continue
        bad = [k for k in keys if k not in decl.attrs]
        if bad:
            report(loc, f"choice-domain of '{name}' names '{bad[0]}', not one of its attributes")
            continue
        if name in inputs:
            report(loc, f"choice-domain of '{name}', an .input relation, is not supported")
            continue
        if _reaches(rules, name):
            report(loc, f"choice-domain of '{name}', which is in a recursive cycle, is not "
                        "supported (a non-recursive choice is, and is maintained)")
            continue
        cand, worse = f"@cand_{name}", f"@worse_{name}"
        decls[cand] = dataclasses.replace(decl, name=cand)
        decls[worse] = dataclasses.replace(decl, name=worse)
        rules = [_renamed(rule, name, cand) for rule in rules]
        rules += _choice_rules(decl, keys, cand, worse, loc)
    return decls, rules


def _renamed(rule: Rule, name: str, cand: str) -> Rule:
    if not any(h.relation == name for h in rule.heads):
        return rule
    heads = tuple(Atom(cand, h.args, h.loc) if h.relation == name else h for h in rule.heads)
    return Rule(heads, rule.body, rule.loc)


def _choice_rules(decl, keys: tuple[str, ...], cand: str, worse: str, loc: Loc) -> list[Rule]:
    """Return r :- cand, !worse, and one rule for worse per non-key attribute."""
    c = tuple(Var(f"c{i}", loc) for i in range(decl.arity))
    out = [Rule((Atom(decl.name, c, loc),),
                (Atom(cand, c, loc), Negation(Atom(worse, c, loc), loc)), loc)]
    free = [i for i, a in enumerate(decl.attrs) if a not in keys]
    for n, j in enumerate(free):
        d = list(c)
        for i in free[n:]:
            d[i] = Var(f"d{i}", loc)
        body = (Atom(cand, c, loc), Atom(cand, tuple(d), loc),
                Comparison("<", d[j], c[j], loc))
        out.append(Rule((Atom(worse, c, loc),), body, loc))
    return out
