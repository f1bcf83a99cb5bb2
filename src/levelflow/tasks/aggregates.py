"""Aggregates lowered to the core before checking: each becomes a generated relation.

`p(x, c) :- q(x), c = count : { r(x, _) }.` becomes

    @agg1(x, <count>) :- r(x, @w1).            -- a group-by over its body, per injected x
    p(x, c) :- q(x), @agg1(x, c).
    p(x, c) :- q(x), !@agg1(x, _), c = 0.      -- count and sum of an empty group are 0

The injected variables (Soufflé's word) are those of the aggregate that the rest of the rule
also uses; they must be grounded outside it (a variable bound only inside and used outside is a
"witness", which Soufflé refuses too). Every other variable is local. A wildcard of the body
becomes a fresh variable, so the aggregate ranges over the body's tuples as Soufflé's does, not
over its distinct values. Nested aggregates lower the same way inside the generated rule. The
head argument `<count>` is an `Aggregate` with an empty body: the engine groups the rule's body
rows by the other head arguments (engine/rules.py `head_rows`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace

from levelflow.tasks.ast import (
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Const,
    Literal,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)
from levelflow.tasks.functor_check import subterms

ZERO = {"float": Const(0.0, "float"), "number": Const(0, "number")}


def is_aggregate_rule(rule: Rule) -> bool:
    """Return whether a rule computes a lowered aggregate (an `Aggregate` head argument)."""
    return bool(rule.body) and any(isinstance(a, Aggregate) for h in rule.heads for a in h.args)


def _map(term: Term, fn) -> Term:
    """Return the term with each outermost aggregate replaced by fn(aggregate)."""
    if isinstance(term, Aggregate):
        return fn(term)
    if isinstance(term, BinOp):
        return BinOp(term.op, _map(term.left, fn), _map(term.right, fn), term.loc)
    if isinstance(term, Call):
        return Call(term.name, tuple(_map(a, fn) for a in term.args), term.loc)
    if isinstance(term, Cast):
        return Cast(_map(term.term, fn), term.type, term.loc, term.type_loc)
    return term


def _map_lit(lit: Literal, fn) -> Literal:
    if isinstance(lit, Atom):
        return Atom(lit.relation, tuple(_map(a, fn) for a in lit.args), lit.loc)
    if isinstance(lit, Negation):
        return Negation(_map_lit(lit.atom, fn), lit.loc)
    return Comparison(lit.op, _map(lit.left, fn), _map(lit.right, fn), lit.loc)


def _terms(lit: Literal) -> tuple[Term, ...]:
    if isinstance(lit, Atom):
        return lit.args
    if isinstance(lit, Negation):
        return lit.atom.args
    return (lit.left, lit.right)


def _user(term: Term) -> bool:
    """Return whether a term holds an aggregate the user wrote (not a lowered head's)."""
    return any(isinstance(t, Aggregate) and t.body for t in _all_terms(term))


def _all_terms(term: Term) -> Iterator[Term]:
    """Yield a term's subterms, into aggregates' values and bodies."""
    for t in subterms(term):
        yield t
        if isinstance(t, Aggregate):
            for lit in t.body:
                for u in _terms(lit):
                    yield from _all_terms(u)


def _var_names(term: Term) -> list[str]:
    return [t.name for t in _all_terms(term) if isinstance(t, Var)]


class Lowering:
    """Generated relations and rules so far; `report` takes (loc, message)."""

    def __init__(self, raw_decls, report, prims: dict[str, str]) -> None:
        self.report = report
        self.prims = prims
        self.attr_types = {d.name: d.types for d in raw_decls}  # relation -> TypeRefs
        self.decls: list = []
        self.rules: list[Rule] = []
        self.count = itertools.count(1)

    def rule(self, rule: Rule) -> list[Rule]:
        """Return the rules that replace `rule` (itself when it holds no aggregate)."""
        heads = [(h, i) for h in rule.heads for i, a in enumerate(h.args) if _user(a)]
        lits = [i for i, lit in enumerate(rule.body) if any(_user(t) for t in _terms(lit))]
        if not heads and not lits:
            return [rule]
        found: list[tuple[Aggregate, Var]] = []

        def take(agg: Aggregate) -> Term:
            found.append((agg, Var(f"@v{next(self.count)}", agg.loc)))
            return found[-1][1]

        new_heads = tuple(Atom(h.relation, tuple(a if isinstance(a, Aggregate) and not a.body
                                                 else _map(a, take) for a in h.args), h.loc)
                          for h in rule.heads)
        body = tuple(_map_lit(lit, take) for lit in rule.body)
        outer_terms = [t for h in new_heads for a in h.args for t in _all_terms(a)]
        outer_terms += [t for lit in body for a in _terms(lit) for t in _all_terms(a)]
        outer = [t.name for t in outer_terms if isinstance(t, Var)]
        grounded = _grounded(body)
        variants: list[tuple[Literal, ...]] = [body]
        others = set(outer)  # a sibling aggregate's variables are its own (local there)
        for agg, var in found:
            own = _var_names(agg.target) if agg.target is not None else []
            own += [n for lit in agg.body for t in _terms(lit) for n in _var_names(t)]
            injected = [n for n in dict.fromkeys(own) if n in others]
            for n in injected:
                if n not in grounded:  # reported where it is used outside
                    at = next(t.loc for t in outer_terms if isinstance(t, Var) and t.name == n)
                    self.report(at or agg.loc, f"variable '{n}' is bound only inside the "
                                f"aggregate at {agg.loc.line}:{agg.loc.col} but used outside it "
                                "(a witness: Soufflé allows none)")
            injected = [n for n in injected if n in grounded]
            rel = self._generate(agg, injected, rule)
            args = tuple(Var(n, agg.loc) for n in injected)
            hit = Atom(rel, args + (var,), agg.loc)
            nxt = [v + (hit,) for v in variants]
            if injected and agg.kind in ("count", "sum"):  # an empty group is 0, not nothing
                miss = Negation(Atom(rel, args + (Wildcard(agg.loc),), agg.loc), agg.loc)
                zero = ZERO["float" if self._value_type(agg, rule) == "float" else "number"]
                nxt += [v + (miss, Comparison("=", var, replace(zero, loc=agg.loc), agg.loc))
                        for v in variants]
            variants = nxt
        out: list[Rule] = []
        for v in variants:
            out.extend(self.rule(Rule(new_heads, v, rule.loc)))
        return out

    def _generate(self, agg: Aggregate, injected: list[str], rule: Rule) -> str:
        """Declare `@agg<n>` and queue its rule; return its name."""
        from levelflow.tasks.ast import RawDecl, TypeRef

        name = f"@agg{next(self.count)}"
        body = tuple(_fresh_wildcards(lit, self.count) for lit in agg.body)
        loose = [n for n in injected if n not in _grounded(body)]
        if loose:  # `sum y : { c(y), y < n }`: n comes from outside only
            body = (self._domain(loose, rule, agg.loc),) + body
        types = [self._var_type(n, body + rule.body, agg.loc) for n in injected]
        types.append(TypeRef(self._value_type(agg, rule), agg.loc))
        attrs = tuple(f"a{i}" for i in range(len(types)))
        self.decls.append(RawDecl(name, attrs, tuple(types), agg.loc, agg.loc))
        head = Atom(name, tuple(Var(n, agg.loc) for n in injected)
                    + (Aggregate(agg.kind, agg.target, (), agg.loc),), agg.loc)
        self.rules.extend(self.rule(Rule((head,), body, agg.loc)))
        return name

    def _domain(self, names: list[str], rule: Rule, loc) -> Atom:
        """Declare `@dom<n>(names)`, the values the rest of the rule gives injected variables
        that the aggregate's body does not bind, and queue its rule; return its atom. A set
        of keys, so the aggregate still ranges over its own body's tuples once per group."""
        from levelflow.tasks.ast import RawDecl

        outer = tuple(lit for lit in rule.body if not any(map(_user, _terms(lit))) and (
            isinstance(lit, Atom) or isinstance(lit, Comparison) and lit.op == "="))
        name = f"@dom{next(self.count)}"
        types = tuple(self._var_type(n, outer, loc) for n in names)
        attrs = tuple(f"a{i}" for i in range(len(names)))
        self.decls.append(RawDecl(name, attrs, types, loc, loc))
        atom = Atom(name, tuple(Var(n, loc) for n in names), loc)
        self.rules.append(Rule((atom,), tuple(_fresh_wildcards(lit, self.count)
                                              for lit in outer), loc))
        return atom

    def _var_type(self, name: str, lits, loc):
        """Return the TypeRef of the first atom attribute holding variable `name`."""
        from levelflow.tasks.ast import TypeRef

        for lit in lits:
            atom = lit.atom if isinstance(lit, Negation) else lit
            if not isinstance(atom, Atom):
                continue
            refs = self.attr_types.get(atom.relation, ())
            for arg, ref in zip(atom.args, refs, strict=False):
                if isinstance(arg, Var) and arg.name == name:
                    return ref
        types = self._primitives(lits)
        return TypeRef(types.get(name, "number"), loc)

    def _primitives(self, lits) -> dict[str, str]:
        """Return the primitive type of each variable an atom or `x = expr` types."""
        from levelflow.tasks.typecheck import TermTyper

        out: dict[str, str] = {}
        for lit in lits:
            if isinstance(lit, Atom):
                for arg, ref in zip(lit.args, self.attr_types.get(lit.relation, ()),
                                    strict=False):
                    if isinstance(arg, Var):
                        out.setdefault(arg.name, self.prims.get(ref.name, ref.name))
        typer = TermTyper(out, lambda *a, **k: None, self.prims)
        for _ in range(3):
            for lit in lits:
                if isinstance(lit, Comparison) and lit.op == "=":
                    for v, e in ((lit.left, lit.right), (lit.right, lit.left)):
                        if isinstance(v, Var) and v.name not in out:
                            got = typer.infer(e) if not isinstance(e, Aggregate) else None
                            if got is not None:
                                out[v.name] = "number" if got == "int" else got
        return out

    def _value_type(self, agg: Aggregate, rule: Rule) -> str:
        """Return the primitive of an aggregate's value (count: number, mean: float)."""
        if agg.kind == "count":
            return "number"
        if agg.kind == "mean":
            return "float"
        from levelflow.tasks.typecheck import TermTyper

        types = self._primitives(agg.body + rule.body)
        got = TermTyper(types, lambda *a, **k: None, self.prims).infer(agg.target)
        return "number" if got in (None, "int", "symbol") else got


def _fresh_wildcards(lit: Literal, count) -> Literal:
    """Return a body literal with each wildcard of a positive atom a fresh variable."""
    if not isinstance(lit, Atom):
        return lit
    return Atom(lit.relation, tuple(Var(f"@w{next(count)}", a.loc) if isinstance(a, Wildcard)
                                    else a for a in lit.args), lit.loc)


def _grounded(body: tuple[Literal, ...]) -> set[str]:
    """Return the variables the body grounds without its aggregates' generated atoms."""
    bound = {a.name for lit in body if isinstance(lit, Atom)
             for a in lit.args if isinstance(a, Var)}
    changed = True
    while changed:
        changed = False
        for lit in body:
            if isinstance(lit, Comparison) and lit.op == "=":
                for v, e in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(v, Var) and v.name not in bound and \
                            not v.name.startswith("@v") and \
                            all(n in bound for n in _var_names(e)):
                        bound.add(v.name)
                        changed = True
    return bound


def lower_aggregates(parsed, report, prims: dict[str, str]):
    """Return Parsed with every aggregate lowered to a generated relation and its rule."""
    if not parsed.aggregates:
        return parsed
    low = Lowering(parsed.decls, report, prims)
    rules = [new for r in parsed.rules for new in (low.rule(r) if r.body or _has(r) else (r,))]
    # A subsumptive body's aggregate too (Soufflé allows it): its two atoms stay first.
    subs = [new for r in parsed.subsumptions for new in low.rule(r)]
    return replace(parsed, decls=parsed.decls + low.decls, rules=rules + low.rules,
                   subsumptions=subs)


def _has(rule: Rule) -> bool:
    return any(_user(a) for h in rule.heads for a in h.args)


def check_aggregated(prec, rules, report) -> None:
    """Report each aggregate over a relation of its own recursive cycle (not stratifiable)."""
    ids, comp = prec.ids, prec.comp_of
    names = list(ids)
    for rule in rules:
        if not is_aggregate_rule(rule):
            continue
        h = ids.get(rule.heads[0].relation)
        for _, atom, _ in rule.body_atoms():
            a = ids.get(atom.relation)
            if h is None or a is None or comp[a] != comp[h]:
                continue
            cycle = [names[m] for m in prec.comps[comp[h]] if not names[m].startswith("@")]
            report(rule.loc, f"aggregate over '{atom.relation}' inside a recursive cycle with "
                             f"{', '.join(repr(c) for c in cycle)} (the program is not "
                             "stratifiable)")
            break
