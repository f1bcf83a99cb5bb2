"""Existence tests: a body part that shares no variable with the head or the rest of the body.

In `a(x) :- b(x), c(y), d(y).` the part `c(y), d(y)` only says whether some y exists: joined
into the rule it multiplies b's rows by its own, every round. The body's literals are split
into the connected components of their variable graph; each component with variables of which
the head uses none is lifted into a generated nullary relation, named by its text:

    @exists_<hash>() :- c(y), d(y).
    a(x) :- b(x), @exists_<hash>().

The test is then a relation like any other: evaluated once in its own task (or, when it reads
the head's recursion, once per round its relations change), joined as "a tuple exists", counted
by its derivations where counting maintains it (a tuple of `a` counts b's rows, not b's rows
times the test's), its flips propagated by every incremental strategy.
Not lifted: aggregate rules and rules calling `autoinc()` (both count the body's rows), and a
test that reads a recursion whose rounds decide its result (`choice-domain`, subsumption).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from levelflow.tasks.aggregates import is_aggregate_rule
from levelflow.tasks.ast import Atom, Call, Decl, Literal, Negation, Rule, Term, Var
from levelflow.tasks.functor_check import subterms
from levelflow.tasks.strata import Precedence

PREFIX = "@exists_"  # no program can write a relation named so


def _terms(lit: Literal) -> tuple[Term, ...]:
    if isinstance(lit, Atom):
        return lit.args
    if isinstance(lit, Negation):
        return lit.atom.args
    return (lit.left, lit.right)


def _vars(terms: Iterable[Term]) -> set[str]:
    return {t.name for term in terms for t in subterms(term) if isinstance(t, Var)}


def components(body: tuple[Literal, ...]) -> list[list[int]]:
    """Return the body positions of each connected component of literals sharing variables,
    in order of their first literal; a literal without variables is a component of its own."""
    parent = list(range(len(body)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, lit in enumerate(body):
        for name in _vars(_terms(lit)):
            if name in first:
                parent[root(i)] = root(first[name])
            else:
                first[name] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(body)):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values())


def _canonical(node, names: dict[str, int]):
    """Return a node as nested tuples without positions, variables numbered by first use."""
    if isinstance(node, Var):
        return ("Var", names.setdefault(node.name, len(names)))
    if isinstance(node, tuple):
        return tuple(_canonical(n, names) for n in node)
    fields = getattr(node, "__dataclass_fields__", None)
    if fields is None:
        return (type(node).__name__, node)
    return (type(node).__name__,) + tuple(_canonical(getattr(node, f), names)
                                          for f in fields if f != "loc")


def test_name(lits: Iterable[Literal]) -> str:
    """Return the generated relation of a test: the same test in any rule gets the same one."""
    text = repr(_canonical(tuple(lits), {}))
    return PREFIX + hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def _counts_rows(rule: Rule) -> bool:
    """Return whether the rule's tuples depend on its body's row count (not lifted then)."""
    if is_aggregate_rule(rule):
        return True
    terms = [a for h in rule.heads for a in h.args] + [t for lit in rule.body
                                                         for t in _terms(lit)]
    return any(isinstance(t, Call) and t.name == "autoinc" for term in terms
               for t in subterms(term))


def lift_tests(rules: tuple[Rule, ...], decls: Mapping[str, Decl], prec: Precedence,
               ordered: Iterable[str]) -> tuple[tuple[Rule, ...], dict[str, Decl]]:
    """Return the rules with every existence test lifted, and the declarations with theirs
    (the same `rules` object when there is none).

    `ordered` names relations whose recursion's rounds decide their tuples: a test reading
    such a recursion stays in its rule (lifting it would derive one round later)."""
    held = {prec.comp_of[prec.ids[n]] for n in ordered if n in prec.ids}
    out, decls, changed = [], dict(decls), False
    for rule in rules:
        if not rule.body or len(rule.body) < 2 or _counts_rows(rule):
            out.append(rule)
            continue
        parts = components(rule.body)
        heads = _vars(a for h in rule.heads for a in h.args)
        have = [p for p in parts if _vars(t for i in p for t in _terms(rule.body[i]))]
        tests = [p for p in have
                 if not heads & _vars(t for i in p for t in _terms(rule.body[i]))]
        if len(tests) == len(have):  # no part binds the head: one of them stays in the rule
            tests = tests[1:]
        home = {prec.comp_of[prec.ids[h.relation]] for h in rule.heads if h.relation in prec.ids}
        lifted = []
        for part in tests:
            reads = {rule.body[i].relation if isinstance(rule.body[i], Atom)
                     else rule.body[i].atom.relation for i in part
                     if isinstance(rule.body[i], Atom | Negation)}
            inside = {prec.comp_of[prec.ids[r]] for r in reads if r in prec.ids} & home
            if not inside & held:
                lifted.append(part)
        if not lifted:
            out.append(rule)
            continue
        changed = True
        moved = {i for part in lifted for i in part}
        body = [lit for i, lit in enumerate(rule.body) if i not in moved]
        made = []
        for part in lifted:
            lits = tuple(rule.body[i] for i in part)
            name = test_name(lits)
            loc = lits[0].loc
            if name not in decls:
                decls[name] = Decl(name, (), (), loc)
                made.append(Rule((Atom(name, (), loc),), lits, rule.loc))
            body.append(Atom(name, (), loc))
        out += [Rule(rule.heads, tuple(body), rule.loc)] + made
    return (tuple(out), decls) if changed else (rules, dict(decls))
