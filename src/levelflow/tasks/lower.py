"""Surface terms lowered to the core once checked: `as(x, T)` is `x`, `5u` the integer 5.

The engine sees only Var, Wildcard, Const ("number", "float", "symbol") and BinOp terms.
"""

from __future__ import annotations

from levelflow.tasks.ast import Atom, BinOp, Cast, Comparison, Const, Negation, Rule, Term


def lower_term(term: Term) -> Term:
    """Return the term with casts removed and unsigned constants as plain integers."""
    if isinstance(term, Cast):
        return lower_term(term.term)
    if isinstance(term, Const) and term.kind == "unsigned":
        return Const(term.value, "number", term.loc)
    if isinstance(term, BinOp):
        return BinOp(term.op, lower_term(term.left), lower_term(term.right), term.loc)
    return term


def _atom(atom: Atom) -> Atom:
    return Atom(atom.relation, tuple(lower_term(a) for a in atom.args), atom.loc)


def lower_rule(rule: Rule) -> Rule:
    """Return the rule with every term lowered."""
    body = []
    for lit in rule.body:
        if isinstance(lit, Atom):
            body.append(_atom(lit))
        elif isinstance(lit, Negation):
            body.append(Negation(_atom(lit.atom), lit.loc))
        elif isinstance(lit, Comparison):
            body.append(Comparison(lit.op, lower_term(lit.left), lower_term(lit.right), lit.loc))
        else:
            body.append(lit)
    return Rule(tuple(_atom(h) for h in rule.heads), tuple(body), rule.loc)
