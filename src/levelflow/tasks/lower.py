"""Surface forms lowered to the core: a negated group by De Morgan (the parser asks), and once
checked, `as(x, T)` as `x` (number <-> unsigned keeps the bits, as Soufflé's cast does) and `5u`
as the integer 5 (an unsigned above 2^63 - 1 as the int64 of its bits).

The engine sees only Var, Wildcard, Const ("number", "float", "symbol"), BinOp and Call terms.
"""

from __future__ import annotations

from levelflow.tasks.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Const,
    Literal,
    Loc,
    Negation,
    Rule,
    Term,
)
from levelflow.tasks.numbers import held_unsigned

MAX_DNF = 1024  # rules one disjunctive body may expand into


def lower_term(term: Term) -> Term:
    """Return the term with casts removed and unsigned constants as plain integers."""
    if isinstance(term, Cast):
        return lower_term(term.term)
    if isinstance(term, Const) and term.kind == "unsigned":  # held as its int64 bits
        return Const(held_unsigned(term.value), "number", term.loc)
    if isinstance(term, BinOp):
        return BinOp(term.op, lower_term(term.left), lower_term(term.right), term.loc)
    if isinstance(term, Call):
        return Call(term.name, tuple(lower_term(a) for a in term.args), term.loc)
    if isinstance(term, Aggregate) and term.target is not None:  # a lowered aggregate's value
        return Aggregate(term.kind, lower_term(term.target), term.body, term.loc)
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


NEGATED_COMPARISON = {"=": "!=", "!=": "=", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def negate_literal(lit: Literal, loc: Loc) -> Literal:
    """Return the literal that holds exactly when `lit` does not."""
    if isinstance(lit, Atom):
        return Negation(lit, loc)
    if isinstance(lit, Negation):
        return lit.atom
    # A functor constraint (`match`, `contains`) is negated by its '!' prefix.
    op = NEGATED_COMPARISON.get(lit.op) or (lit.op[1:] if lit.op.startswith("!") else "!" + lit.op)
    return Comparison(op, lit.left, lit.right, lit.loc)


def negate_dnf(alts: list[tuple[Literal, ...]], loc: Loc) -> list[tuple[Literal, ...]]:
    """Return the disjunctive normal form of `!(alts)` by De Morgan, as Soufflé's RuleBody does.

    Not over every clause is a conjunction of disjunctions of negated literals; it is expanded
    back into DNF clause by clause, so `!(a(x), b(x))` becomes `!a(x) ; !b(x)`.
    """
    out: list[tuple[Literal, ...]] = [()]  # true
    for clause in alts:
        out = [done + (negate_literal(lit, loc),) for done in out for lit in clause]
        if len(out) > MAX_DNF:
            break
    return out
