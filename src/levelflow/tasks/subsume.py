"""Subsumptive rules `r(x, d1) <= r(x, d2) :- d2 <= d1.`: parsed, typed and stratified.

Each rule is lowered to a rule of a generated pair relation `@sub:r` whose tuples are the
(dominated, dominating) pairs of r's tuples:

    r(x, d1) <= r(x, d2) :- d2 <= d1.
    @sub:r(x, d1, x, d2) :- r(x, d1), r(x, d2), d2 <= d1.

It is typed as any rule (so a bad body is one line naming file and line) and then kept apart
from the program's rules (`Program.subsumptions`, a task's `Task.subsumes`): no task computes
`@sub:r`; the engine evaluates it while r's task runs (engine/plans/subsume.py). For the task
order, r reads what the bodies read; a body reading a relation in r's recursive cycle (other
than r itself) is refused, as its pruning would change what it prunes by.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from levelflow.tasks.ast import Atom, Decl, Rule

if TYPE_CHECKING:
    from levelflow.tasks.parser_protocol import TokenParser as Parser
    from levelflow.tasks.strata import Precedence
    from levelflow.tasks.typecheck import Report

SUB = "@sub:"  # the pair relation of a subsumed relation r is `@sub:r` (no program can write it)


def parse_subsumption(p: Parser, heads: list[Atom], first) -> None:
    """Parse `<= DOMINATING :- BODY.` after the dominated atom; add one lowered rule per
    alternative of the body to `p.out.subsumptions`."""
    loc = p.loc(first)
    if len(heads) != 1:
        raise p.error("a subsumptive rule has one dominated atom before '<='", first)
    p.take()
    dominating = p.atom()
    dominated = heads[0]
    if dominating.relation != dominated.relation:
        raise p.error(f"a subsumptive rule relates tuples of one relation: '{dominated.relation}'"
                      f" <= '{dominating.relation}'", first)
    p.expect(":-")
    bodies = p.disjunction()
    if not p.at("."):
        raise p.expected("',' or '.'")
    p.take()
    head = Atom(SUB + dominated.relation, dominated.args + dominating.args, loc)
    p.out.subsumptions.extend(Rule((head,), (dominated, dominating) + body, loc)
                              for body in bodies)


def subsumed(rule: Rule) -> str:
    """Return the relation a lowered subsumptive rule prunes."""
    return rule.heads[0].relation[len(SUB):]


def pair_decl(decl: Decl) -> Decl:
    """Return the declaration of `@sub:r`: r's attributes twice (dominated, then dominating)."""
    attrs = tuple(f"{a}#{side}" for side in (0, 1) for a in decl.attrs)
    return dataclasses.replace(decl, name=SUB + decl.name, attrs=attrs, types=decl.types * 2,
                               shapes=decl.shapes * 2)


def add_pair_decls(rules: list[Rule], decls: dict, report: Report) -> dict:
    """Return the Decls with `@sub:r` of every subsumed relation (an undeclared r reported)."""
    decls = dict(decls)
    for rule in rules:
        name = subsumed(rule)
        if name not in decls:
            report(rule.heads[0].loc, f"relation '{name}' is not declared", needs_rest=True)
        else:
            decls[SUB + name] = pair_decl(decls[name])
    return decls


def order_rules(subs) -> list[Rule]:
    """Return stand-in rules `r :- body` (r's own atoms left out) that put r after what its
    subsumptive bodies read, for the precedence graph only."""
    out = []
    for rule in subs:
        name = subsumed(rule)
        body = tuple(lit for lit in rule.body[2:] if not _reads(lit, name))
        if body:
            out.append(Rule((Atom(name, (), rule.loc),), body, rule.loc))
    return out


def _reads(lit, name: str) -> bool:
    atom = getattr(lit, "atom", lit)
    return isinstance(atom, Atom) and atom.relation == name


def check_strata(prec: Precedence, subs, report: Report) -> None:
    """Report a subsumptive body that reads a relation in a recursive cycle with r."""
    ids, comp = prec.ids, prec.comp_of
    for rule in subs:
        name = subsumed(rule)
        if name not in ids:
            continue
        for _, atom, _ in rule.body_atoms():
            other = ids.get(atom.relation)
            if atom.relation != name and other is not None and comp[other] == comp[ids[name]]:
                report(atom.loc, f"the subsumptive rule of '{name}' reads '{atom.relation}', "
                                 f"which is in a recursive cycle with '{name}' (not supported)")
