"""Checks of the intrinsic functors' placement in rules, and autoinc()'s numbering.

`range` only binds a variable (`x = range(...)`); `autoinc()` stands in heads of non-recursive
rules. A constant `match` pattern that std::regex refuses is a warning, not an error: Soufflé
warns and the pattern matches nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from levelflow.tasks.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Const,
    Negation,
    Rule,
    Term,
    Var,
)
from levelflow.tasks.ecmascript import problem
from levelflow.tasks.typecheck import Report, show

if TYPE_CHECKING:
    from levelflow.tasks.strata import Precedence


def subterms(term: Term) -> Iterator[Term]:
    """Yield a term and its subterms, left to right."""
    stack = [term]
    while stack:
        t = stack.pop()
        yield t
        if isinstance(t, BinOp):
            stack.append(t.right)
            stack.append(t.left)
        elif isinstance(t, Call):
            stack.extend(reversed(t.args))
        elif isinstance(t, Cast):
            stack.append(t.term)
        elif isinstance(t, Aggregate) and t.target is not None:  # a lowered aggregate's value
            stack.append(t.target)


def _generator(lit: object) -> bool:
    """Return whether a body literal is `x = range(...)` (or `range(...) = x`)."""
    return (isinstance(lit, Comparison) and lit.op == "="
            and any(isinstance(t, Call) and t.name == "range" and isinstance(o, Var)
                    for t, o in ((lit.left, lit.right), (lit.right, lit.left))))


def check_functors(rule: Rule, report: Report) -> None:
    """Report `range` outside `x = range(...)` and `autoinc()` outside a head."""
    generators = {id(lit) for lit in rule.body if _generator(lit)}
    terms = [(arg, None) for head in rule.heads for arg in head.args]
    for lit in rule.body:
        if isinstance(lit, Comparison):
            terms += [(lit.left, lit), (lit.right, lit)]
        else:
            atom = lit.atom if isinstance(lit, Negation) else lit
            terms += [(arg, lit) for arg in atom.args]
    for term, lit in terms:
        for t in subterms(term):
            if isinstance(t, Call) and t.name == "range" and not (
                    id(lit) in generators and t in (lit.left, lit.right)):
                report(t.loc, "'range' generates values: write 'x = range(from, to[, step])' "
                              "in the body")
            if isinstance(t, Call) and t.name == "autoinc" and (t.args or lit is not None):
                report(t.loc, "'autoinc()' takes no arguments and stands in a rule head")


def pattern_warnings(rules: tuple[Rule, ...]) -> tuple[str, ...]:
    """Return a warning line per constant `match` pattern std::regex refuses (each matches
    nothing), as Soufflé warns; a pattern a component instantiates twice is named once."""
    seen, lines = set(), []
    for rule in rules:
        for lit in rule.body:
            if (isinstance(lit, Comparison) and lit.op.lstrip("!") == "match"
                    and isinstance(lit.left, Const) and lit.left.kind == "symbol"
                    and (lit.left.loc, lit.left.value) not in seen):
                seen.add((lit.left.loc, lit.left.value))
                why = problem(lit.left.value)
                if why is not None:
                    lines.append(f"{lit.left.loc}: warning: bad regular expression "
                                 f"{show(lit.left)} matches nothing: {why}")
    return tuple(lines)


def number_autoinc(prec: Precedence, rules: tuple[Rule, ...], report: Report,
                   constant: frozenset[int] | set[int] = frozenset()) -> tuple[Rule, ...]:
    """Return the rules with the k-th rule using `autoinc()` numbering from k * 2^32 (its
    argument), so numbers stay apart across rules as Soufflé's one counter keeps them; report
    `autoinc()` in a recursive rule (each round would number its tuples anew). The rules
    whose ids are in `constant` (the lexer's facts) have constants only: not looked into."""
    ids, comp = prec.ids, prec.comp_of
    out, k = [], 0
    for rule in rules:
        if id(rule) in constant:
            out.append(rule)
            continue
        calls = [t for h in rule.heads for a in h.args for t in subterms(a)
                 if isinstance(t, Call) and t.name == "autoinc"]
        if not calls:
            out.append(rule)
            continue
        heads = {comp[ids[h.relation]] for h in rule.heads if h.relation in ids}
        if any(atom.relation in ids and comp[ids[atom.relation]] in heads
               for _, atom, _ in rule.body_atoms()):
            report(calls[0].loc, "'autoinc()' in a recursive rule (each round would number "
                                 "its tuples anew)")
        base = Const(k << 32, "number")
        out.append(Rule(tuple(Atom(h.relation, tuple(_numbered(a, base) for a in h.args), h.loc)
                              for h in rule.heads), rule.body, rule.loc))
        k += 1
    return tuple(out)


def _numbered(term: Term, base: Const) -> Term:
    """Return the term with `autoinc()` given its rule's base."""
    if isinstance(term, Call):
        args = (base,) if term.name == "autoinc" else tuple(_numbered(a, base)
                                                            for a in term.args)
        return Call(term.name, args, term.loc)
    if isinstance(term, BinOp):
        return BinOp(term.op, _numbered(term.left, base), _numbered(term.right, base), term.loc)
    return term
