"""`choice-domain`, with one deterministic rule: candidates are taken in the relation's order
(attributes left to right: numbers by value, symbols by their text), and a candidate is kept
when no tuple kept before it shares the value of any of its keys.

One key (single or composite `(a, b)`) on a relation outside a recursive cycle keeps, per key,
its smallest candidate. It is lowered to stratified rules before checking:

    .decl r(k: number, v: number) choice-domain k
    r(k, v) :- body.              @cand_r(k, v) :- body.
                                  r(c0, c1) :- @cand_r(c0, c1), !@worse_r(c0, c1).
                                  @worse_r(c0, c1) :- @cand_r(c0, c1), @cand_r(c0, d1), d1 < c1.

so a candidate that changes re-chooses only its key (counting maintains it as any stratified
negation). Several keys (`choice-domain x, y`: no two tuples share x, none share y), or a
relation in a recursive cycle, keep their rules; the Decl carries the keys and every plan
chooses while evaluating (engine/choose.py): per semi-naive round, among the round's new
candidates whose keys no earlier tuple holds, greedily in the relation's order.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from levelflow.tasks.ast import Atom, Comparison, Loc, Negation, Rule, Var

if TYPE_CHECKING:
    from levelflow.tasks.parser_protocol import TokenParser as Parser
    from levelflow.tasks.typecheck import Report


def parse_choice(p: Parser, start) -> tuple[tuple[tuple[str, ...], ...], Loc]:
    """Return (keys, where) of `choice-domain KEY, ...` after `choice` (each KEY an attribute
    or `(a, b)`)."""
    if not p.at("-") or p.peek().kind != "ident" or p.peek().text != "domain":
        raise p.expected("'choice-domain'")
    p.take()
    p.take()
    groups = [_key(p)]
    while p.at(",") and (p.peek().kind == "ident" or p.peek().text == "("):
        p.take()
        groups.append(_key(p))
    return tuple(groups), p.loc(start)


def _key(p: Parser) -> tuple[str, ...]:
    """Return one key's attributes: `a` or `(a, b)`."""
    if not p.at("("):
        return (p.ident("an attribute name").text,)
    p.take()
    keys = [p.ident("an attribute name").text]
    while p.at(","):
        p.take()
        keys.append(p.ident("an attribute name").text)
    p.expect(")")
    return tuple(keys)


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
    for name, groups, loc in parsed.choices:
        decl = decls.get(name)
        if decl is None:
            continue
        bad = [k for g in groups for k in g if k not in decl.attrs]
        if bad:
            report(loc, f"choice-domain of '{name}' names '{bad[0]}', not one of its attributes")
            continue
        if name in inputs:
            report(loc, f"choice-domain of '{name}', an .input relation, is not supported")
            continue
        if len(groups) > 1 or _reaches(rules, name):  # chosen while evaluating
            keys = tuple(tuple(decl.attrs.index(k) for k in g) for g in groups)
            decls[name] = dataclasses.replace(decl, choice=keys)
            continue
        cand, worse = f"@cand_{name}", f"@worse_{name}"
        decls[cand] = dataclasses.replace(decl, name=cand)
        decls[worse] = dataclasses.replace(decl, name=worse)
        rules = [_renamed(rule, name, cand) for rule in rules]
        rules += _choice_rules(decl, groups[0], cand, worse, loc)
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
