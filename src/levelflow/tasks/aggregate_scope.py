"""Soufflé's scopes of an aggregate's variables, settled on a rule before it is lowered.

Soufflé sorts each variable of an aggregate into one of three scopes (its `ast/analysis/
Aggregate.cpp`, and the transformers `SimplifyAggregateTargetExpression`,
`UniqueAggregationVariables` and `GroundWitnesses` run before its aggregates are materialised):

- *injected*: grounded by the rest of the rule, aggregates there read as grounded values, and
  not in the aggregate's target expression: the aggregate has one value per binding of it;
- *witness*: named by the rest of the rule without being grounded there, and grounded by the
  aggregate's own body. For `min` and `max` it takes every value a body binding reaching the
  aggregate's value gives it (`youngest(p, n) :- n = min a : age(p, a).` gives each `p` of the
  minimum, ties included); for `count`, `sum` and `mean` it is an error, as in Soufflé;
- *local*: every other one, the target expression's variables included. A local variable the
  rest of the rule names too is another variable there (renamed apart here), so
  `x = max x : a(x)` is the largest `x` of `a`.

A min/max witness is grounded as GroundWitnesses grounds it: the aggregate, its witnesses
renamed apart, gives its value to a fresh variable, and a copy of its body whose target is that
value binds the witnesses. So the lowering that follows (tasks/aggregates.py) sees injected and
local variables only, and the engine and the incremental strategies see plain rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from levelflow.tasks.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Literal,
    Negation,
    Record,
    Rule,
    Term,
    Var,
    Wildcard,
)


def children(term: Term) -> tuple[Term, ...]:
    """Return a term's direct subterms (an aggregate's target, not its body)."""
    if isinstance(term, BinOp):
        return (term.left, term.right)
    if isinstance(term, Call | Record):
        return term.args
    if isinstance(term, Cast):
        return (term.term,)
    if isinstance(term, Aggregate) and term.target is not None:
        return (term.target,)
    return ()


def literal_terms(lit: Literal) -> tuple[Term, ...]:
    """Return a literal's argument terms."""
    if isinstance(lit, Atom):
        return lit.args
    if isinstance(lit, Negation):
        return lit.atom.args
    return (lit.left, lit.right)


def all_terms(term: Term) -> Iterator[Term]:
    """Yield a term and its subterms, into aggregates' targets and bodies."""
    stack = [term]
    while stack:
        t = stack.pop()
        yield t
        stack.extend(reversed(children(t)))
        if isinstance(t, Aggregate):
            stack.extend(u for lit in reversed(t.body) for u in reversed(literal_terms(lit)))


def var_names(term: Term) -> list[str]:
    """Return the names of the variables in a term, into aggregates, in order (repeats kept)."""
    return [t.name for t in all_terms(term) if isinstance(t, Var)]


def user_aggregate(term: Term) -> bool:
    """Return whether a term holds an aggregate the user wrote (not a lowered head's)."""
    return any(isinstance(t, Aggregate) and t.body for t in all_terms(term))


def map_term(term: Term, fn: Callable[[Aggregate], Term]) -> Term:
    """Return the term with each outermost aggregate replaced by fn(aggregate)."""
    if isinstance(term, Aggregate):
        return fn(term)
    if isinstance(term, BinOp):
        return BinOp(term.op, map_term(term.left, fn), map_term(term.right, fn), term.loc)
    if isinstance(term, Call):
        return Call(term.name, tuple(map_term(a, fn) for a in term.args), term.loc)
    if isinstance(term, Record):
        return Record(tuple(map_term(a, fn) for a in term.args), term.branch, term.loc)
    if isinstance(term, Cast):
        return Cast(map_term(term.term, fn), term.type, term.loc, term.type_loc)
    return term


def map_literal(lit: Literal, fn: Callable[[Aggregate], Term]) -> Literal:
    """Return the literal with each outermost aggregate replaced by fn(aggregate)."""
    if isinstance(lit, Atom):
        return Atom(lit.relation, tuple(map_term(a, fn) for a in lit.args), lit.loc)
    if isinstance(lit, Negation):
        return Negation(map_literal(lit.atom, fn), lit.loc)
    return Comparison(lit.op, map_term(lit.left, fn), map_term(lit.right, fn), lit.loc)


def rename_term(term: Term, names: dict[str, str]) -> Term:
    """Return the term with the variables of `names` renamed, into aggregates."""
    if not names:
        return term
    if isinstance(term, Var):
        return Var(names[term.name], term.loc) if term.name in names else term
    if isinstance(term, Aggregate):
        target = None if term.target is None else rename_term(term.target, names)
        return Aggregate(term.kind, target, tuple(rename_literal(lit, names) for lit in term.body),
                         term.loc)
    if isinstance(term, BinOp):
        return BinOp(term.op, rename_term(term.left, names), rename_term(term.right, names),
                     term.loc)
    if isinstance(term, Call):
        return Call(term.name, tuple(rename_term(a, names) for a in term.args), term.loc)
    if isinstance(term, Record):
        return Record(tuple(rename_term(a, names) for a in term.args), term.branch, term.loc)
    if isinstance(term, Cast):
        return Cast(rename_term(term.term, names), term.type, term.loc, term.type_loc)
    return term


def rename_literal(lit: Literal, names: dict[str, str]) -> Literal:
    """Return the literal with the variables of `names` renamed, into aggregates."""
    if isinstance(lit, Atom):
        return Atom(lit.relation, tuple(rename_term(a, names) for a in lit.args), lit.loc)
    if isinstance(lit, Negation):
        return Negation(rename_literal(lit.atom, names), lit.loc)
    return Comparison(lit.op, rename_term(lit.left, names), rename_term(lit.right, names),
                      lit.loc)


def _bound_by(term: Term) -> Iterator[str]:
    """Yield the variables a positive atom's argument binds (a record's fields too)."""
    if isinstance(term, Var):
        yield term.name
    elif isinstance(term, Record):
        for a in term.args:
            yield from _bound_by(a)


def grounded(body: tuple[Literal, ...], given: frozenset[str] | set[str] = frozenset()
             ) -> set[str]:
    """Return the variables the body grounds: positive atoms' arguments, then `x = expr` of
    grounded parts; `given` are grounded already (aggregates' values)."""
    bound = set(given)
    bound.update(n for lit in body if isinstance(lit, Atom) for a in lit.args
                 for n in _bound_by(a))
    changed = True
    while changed:
        changed = False
        for lit in body:
            if isinstance(lit, Comparison) and lit.op == "=":
                for v, e in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(v, Var) and v.name not in bound and \
                            not isinstance(e, Aggregate) and \
                            all(n in bound for n in var_names(e)):
                        bound.add(v.name)
                        changed = True
    return bound


def scope_rule(rule: Rule, fresh: Callable[[str], str], report) -> Rule:
    """Return the rule with its outermost aggregates' local variables renamed apart from the
    rest of the rule and each min/max witness grounded by a copy of the aggregate's body;
    report each witness of count, sum or mean. `fresh(name)` gives an unused variable name."""
    found: list[Aggregate] = []

    def take(agg: Aggregate) -> Term:
        found.append(agg)
        return Var(f"@g{len(found)}", agg.loc)

    rule = Rule(rule.heads, tuple(_named_wildcard(lit, fresh) for lit in rule.body), rule.loc)
    heads, body = _replaced(rule, take)
    if not found:
        return rule
    outside_terms = [t for h in heads for a in h.args for t in all_terms(a)]
    outside_terms += [t for lit in body for a in literal_terms(lit) for t in all_terms(a)]
    outside = {t.name for t in outside_terms if isinstance(t, Var)}
    ground = grounded(body, {f"@g{k}" for k in range(1, len(found) + 1)})
    swaps: list[Term] = []
    extra: list[Literal] = []
    for agg in found:
        own = list(dict.fromkeys(var_names(agg)))
        target = set(var_names(agg.target)) if agg.target is not None else set()
        injected = {n for n in own if n in ground and n not in target}
        inside = grounded(agg.body)
        witnesses = [n for n in own if n in outside and n not in ground and n in inside]
        local = {n: fresh(n) for n in own if n in outside and n not in injected
                 and n not in witnesses}
        agg = rename_term(agg, local)
        if not witnesses:
            swaps.append(agg)
            continue
        if agg.kind not in ("min", "max"):
            for n in witnesses:
                at = next(t.loc for t in outside_terms if isinstance(t, Var) and t.name == n)
                report(at or agg.loc, f"variable '{n}' is bound only inside the {agg.kind} "
                       f"aggregate at {agg.loc.line}:{agg.loc.col} but used outside it: "
                       "only a min or max aggregate gives its witnesses (Soufflé's witness "
                       "problem)")
            swaps.append(agg)
            continue
        value = Var(fresh("@r"), agg.loc)
        if isinstance(agg.target, Var):  # a witness target stays free in the copy, as in Soufflé
            copies = tuple(rename_literal(lit, {agg.target.name: value.name}
                                          if agg.target.name not in witnesses else {})
                           for lit in agg.body)
        else:  # Soufflé first makes the target a variable: `z = target` in the body
            copies = agg.body + (Comparison("=", value, agg.target, agg.loc),)
        own_value = rename_term(agg, {n: fresh(n) for n in witnesses})
        swaps.append(value)
        extra.append(Comparison("=", value, own_value, agg.loc))
        extra.extend(copies)
    it = iter(swaps)
    heads, body = _replaced(rule, lambda _: next(it))
    return Rule(heads, body + tuple(extra), rule.loc)


def _named_wildcard(lit: Literal, fresh: Callable[[str], str]) -> Literal:
    """Return `_ = aggregate` with a fresh variable for `_` (Soufflé allows it: the aggregate's
    witnesses are what the rule wants)."""
    if isinstance(lit, Comparison) and lit.op == "=":
        if isinstance(lit.left, Wildcard) and isinstance(lit.right, Aggregate):
            return Comparison("=", Var(fresh("_"), lit.left.loc), lit.right, lit.loc)
        if isinstance(lit.right, Wildcard) and isinstance(lit.left, Aggregate):
            return Comparison("=", lit.left, Var(fresh("_"), lit.right.loc), lit.loc)
    return lit


def _replaced(rule: Rule, fn: Callable[[Aggregate], Term]) -> tuple[tuple[Atom, ...],
                                                                     tuple[Literal, ...]]:
    """Return the rule's heads and body with each outermost user aggregate replaced by fn(it),
    heads first, in order (a lowered head aggregate, with no body, stays)."""
    heads = tuple(Atom(h.relation, tuple(a if isinstance(a, Aggregate) and not a.body
                                         else map_term(a, fn) for a in h.args), h.loc)
                  for h in rule.heads)
    return heads, tuple(map_literal(lit, fn) for lit in rule.body)
