"""`range(...)` anywhere in a clause, as Soufflé normalises it: each call that is not already
`x = range(...)` becomes a fresh variable bound by `@range<k> = range(...)` in the body, so
`r(range(0, n)) :- n(n).` and the fact `r(range(0, 3)).` derive one tuple per value."""

from __future__ import annotations

from levelflow.tasks.ast import Aggregate, Call, Comparison, Rule, Term, Var
from levelflow.tasks.user_functors import map_rule, map_term


def _generator(lit: object) -> bool:
    """Return whether a body literal is already `x = range(...)` (either way round)."""
    return (isinstance(lit, Comparison) and lit.op == "="
            and any(isinstance(t, Call) and t.name == "range" and isinstance(o, Var)
                    for t, o in ((lit.left, lit.right), (lit.right, lit.left))))


def name_ranges(rule: Rule) -> Rule:
    """Return the rule with its nested `range` calls bound to fresh variables (the same rule
    when it has none)."""
    bound: list[Comparison] = []

    def name(term: Term) -> Term:
        if isinstance(term, Aggregate):  # lowered to rules of its own, named there
            return term
        term = map_term(term, name)  # inner ranges first, as Soufflé's mapper goes
        if isinstance(term, Call) and term.name == "range":
            var = Var(f"@range{len(bound)}", term.loc)
            bound.append(Comparison("=", var, term, term.loc))
            return var
        return term

    def keep_generators(term: Term) -> Term:  # the range of `x = range(...)` stays
        return map_term(term, name) if isinstance(term, Call) and term.name == "range" \
            else name(term)

    heads = map_rule(Rule(rule.heads, (), rule.loc), name).heads
    body = tuple(map_rule(Rule((), (lit,), rule.loc),
                          keep_generators if _generator(lit) else name).body[0]
                 for lit in rule.body)
    if not bound:
        return rule
    return Rule(heads, body + tuple(bound), rule.loc)
