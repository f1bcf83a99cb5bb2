"""Aggregates lowered to the core before checking: each becomes a generated relation.

`p(x, c) :- q(x), c = count : { r(x, _) }.` becomes

    @agg1(x, <count>) :- r(x, @w1).            -- a group-by over its body, per injected x
    p(x, c) :- q(x), @agg1(x, c).
    p(x, c) :- q(x), !@agg1(x, _), c = 0.      -- count and sum of an empty group are 0

The variables of an aggregate are first sorted into Soufflé's scopes (tasks/aggregate_scope.py:
min/max witnesses grounded by a copy of the body, local variables renamed apart), so here
the injected ones (Soufflé's word) are those of the aggregate that the rest of the rule also
uses. Every other variable is local. A wildcard of the body becomes a fresh variable, so the
aggregate ranges over the body's tuples as Soufflé's does, not over its distinct values. Nested
aggregates lower the same way inside the generated rule. The head argument `<count>` is an
`Aggregate` with an empty body: the engine groups the rule's body rows by the other head
arguments (engine/rules.py `head_rows`).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from levelflow.tasks.aggregate_scope import (
    all_terms,
    grounded,
    literal_terms,
    map_literal,
    map_term,
    scope_rule,
    user_aggregate,
    var_names,
)
from levelflow.tasks.ast import (
    Aggregate,
    Atom,
    Comparison,
    Const,
    Literal,
    Negation,
    Rule,
    Term,
    Var,
    Wildcard,
)

ZERO = {"float": Const(0.0, "float"), "number": Const(0, "number")}


def is_aggregate_rule(rule: Rule) -> bool:
    """Return whether a rule computes a lowered aggregate (an `Aggregate` head argument)."""
    return bool(rule.body) and any(isinstance(a, Aggregate) for h in rule.heads for a in h.args)


class Lowering:
    """Generated relations and rules so far; `report` takes (loc, message)."""

    def __init__(self, raw_decls, report, prims: dict[str, str], source=()) -> None:
        self.report = report
        self.source = source  # the program's rules, for their recursive cycles
        self.prec = None
        self.prims = prims
        self.attr_types = {d.name: d.types for d in raw_decls}  # relation -> TypeRefs
        self.decls: list = []
        self.rules: list[Rule] = []
        self.count = itertools.count(1)
        self.typed: dict[int, tuple[Aggregate, str]] = {}  # id -> (aggregate, its value's)

    def fresh(self, name: str) -> str:
        """Return a variable name no program can write, after `name`."""
        return f"{name}@{next(self.count)}"

    def rule(self, rule: Rule) -> list[Rule]:
        """Return the rules that replace `rule` (itself when it holds no aggregate)."""
        if not any(user_aggregate(a) for h in rule.heads for a in h.args) and not any(
                user_aggregate(t) for lit in rule.body for t in literal_terms(lit)):
            return [rule]
        rule = scope_rule(rule, self.fresh, self.report)
        found: list[tuple[Aggregate, Var]] = []

        def take(agg: Aggregate) -> Term:
            found.append((agg, Var(f"@v{next(self.count)}", agg.loc)))
            return found[-1][1]

        new_heads = tuple(Atom(h.relation, tuple(a if isinstance(a, Aggregate) and not a.body
                                                 else map_term(a, take) for a in h.args), h.loc)
                          for h in rule.heads)
        body = tuple(map_literal(lit, take) for lit in rule.body)
        outer_terms = [t for h in new_heads for a in h.args for t in all_terms(a)]
        outer_terms += [t for lit in body for a in literal_terms(lit) for t in all_terms(a)]
        others = {t.name for t in outer_terms if isinstance(t, Var)}
        # an aggregate's value is grounded (Soufflé's analysis); a sibling aggregate's
        # variables are its own (local there)
        ground = grounded(body, {var.name for _, var in found})
        variants: list[tuple[Literal, ...]] = [body]
        for agg, var in found:
            own = var_names(agg.target) if agg.target is not None else []
            own += [n for lit in agg.body for t in literal_terms(lit) for n in var_names(t)]
            # a witness of count, sum or mean, reported by scope_rule, is left out
            injected = [n for n in dict.fromkeys(own) if n in others and n in ground]
            rel = self._generate(agg, injected, rule)
            args = tuple(Var(n, agg.loc) for n in injected)
            zeros = injected and agg.kind in ("count", "sum")  # an empty group is 0, not nothing
            if zeros and is_aggregate_rule(rule):  # nested: a second rule would split its group
                rel, zeros = self._total(rel, injected, rule, agg), False
            hit = Atom(rel, args + (var,), agg.loc)
            nxt = [v + (hit,) for v in variants]
            if zeros:
                miss = Negation(Atom(rel, args + (Wildcard(agg.loc),), agg.loc), agg.loc)
                zero = ZERO["float" if self._value_type(agg, rule.body) == "float" else "number"]
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
        loose = [n for n in injected if n not in grounded(body)]
        if loose:  # `sum y : { c(y), y < n }`: n comes from outside only
            body = (self._domain(loose, rule, agg),) + body
        types = [self._var_type(n, body + rule.body, agg.loc) for n in injected]
        types.append(TypeRef(self._value_type(agg, rule.body), agg.loc))
        attrs = tuple(f"a{i}" for i in range(len(types)))
        self.decls.append(RawDecl(name, attrs, tuple(types), agg.loc, agg.loc))
        head = Atom(name, tuple(Var(n, agg.loc) for n in injected)
                    + (Aggregate(agg.kind, agg.target, (), agg.loc),), agg.loc)
        self.rules.extend(self.rule(Rule((head,), body, agg.loc)))
        return name

    def _total(self, rel: str, injected: list[str], rule: Rule, agg: Aggregate) -> str:
        """Declare `@tot<n>` and queue its rules: the count or sum `rel` per key, and 0 for each
        key the rest of the enclosing aggregate's body gives whose group is empty (the rule
        `!rel(keys, _), c = 0` of a plain rule would split that aggregate's group in two)."""
        from levelflow.tasks.ast import RawDecl

        loc = agg.loc
        dom = self._domain(injected, rule, agg)
        decl = next(d for d in self.decls if d.name == rel)
        name = f"@tot{next(self.count)}"
        self.decls.append(RawDecl(name, decl.attrs, decl.types, loc, loc))
        keys = tuple(Var(n, loc) for n in injected)
        value = Var(self.fresh("c"), loc)
        zero = ZERO["float" if self._value_type(agg, rule.body) == "float" else "number"]
        self.rules.append(Rule((Atom(name, keys + (value,), loc),),
                               (Atom(rel, keys + (value,), loc),), loc))
        self.rules.append(Rule((Atom(name, keys + (replace(zero, loc=loc),), loc),),
                               (dom, Negation(Atom(rel, keys + (Wildcard(loc),), loc), loc)),
                               loc))
        return name

    def _domain(self, names: list[str], rule: Rule, agg: Aggregate) -> Atom:
        """Declare `@dom<n>(names)`, the values the rest of the rule gives injected variables
        that the aggregate's body does not bind, and queue its rule; return its atom. A set
        of keys, so the aggregate still ranges over its own body's tuples once per group. The
        rule's atoms and equalities other than the aggregate's own make it (another
        aggregate's value among them, lowered there)."""
        from levelflow.tasks.ast import RawDecl

        loc = agg.loc
        outer = tuple(lit for lit in rule.body if not _holds(lit, agg) and (
            isinstance(lit, Atom) or isinstance(lit, Comparison) and lit.op == "="))
        cycle = set().union(*(self._cycle_of(h.relation) for h in rule.heads))
        if cycle:  # keys from below the rule's own cycle, when they give every name: more
            # keys than the rule needs (each still grouped over the body alone), but no cycle
            # through the aggregate, which reads no relation of it (Soufflé's is stratified)
            lower = _below(outer, cycle)
            if set(names) <= grounded(lower):
                outer = lower
        name = f"@dom{next(self.count)}"
        types = tuple(self._var_type(n, outer, loc) for n in names)
        attrs = tuple(f"a{i}" for i in range(len(names)))
        self.decls.append(RawDecl(name, attrs, types, loc, loc))
        atom = Atom(name, tuple(Var(n, loc) for n in names), loc)
        self.rules.extend(self.rule(Rule((atom,), tuple(_fresh_wildcards(lit, self.count)
                                                        for lit in outer), loc)))
        return atom

    def _cycle_of(self, relation: str) -> set[str]:
        """Return the relations of `relation`'s recursive cycle, itself among them (none when
        it is in none); an aggregate's body is read by the rule holding it."""
        if self.prec is None:
            from levelflow.tasks.rule_graph import precedence

            self.prec = precedence(self.attr_types, [
                Rule(r.heads, r.body + tuple(_inner_atoms(r)), r.loc)
                for r in self.source if r.body or _has(r)])
        prec, k = self.prec, self.prec.ids.get(relation)
        if k is None or not prec.recursive(prec.comp_of[k]):
            return set()
        names = list(prec.ids)
        return {names[m] for m in prec.comps[prec.comp_of[k]]}

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
                            got = typer.infer(e) if not user_aggregate(e) else \
                                self._term_type(e, out, lits)
                            if got is not None:
                                out[v.name] = "number" if got == "int" else got
        return out

    def _term_type(self, term: Term, types: dict[str, str], lits) -> str | None:
        """Return a term's primitive, each aggregate in it read as its value's type."""
        from levelflow.tasks.typecheck import TermTyper

        named = dict(types)

        def typed(agg: Aggregate) -> Term:
            name = f"@t{len(named)}"
            named[name] = self._value_type(agg, lits)
            return Var(name, agg.loc)

        return TermTyper(named, lambda *a, **k: None, self.prims).infer(map_term(term, typed))

    def _value_type(self, agg: Aggregate, lits) -> str:
        """Return the primitive of an aggregate's value: count a number, mean a float, sum,
        min and max their target's (an aggregate in the target or in the body that binds it
        typed the same way). `lits` are the literals around the aggregate."""
        if agg.kind == "count":
            return "number"
        if agg.kind == "mean":
            return "float"
        known = self.typed.get(id(agg))
        if known is not None and known[0] is agg:
            return known[1]
        # the literal holding the aggregate is left out: typing it would type this again
        ctx = agg.body + tuple(lit for lit in lits if not _holds(lit, agg))
        got = self._term_type(agg.target, self._primitives(ctx), ctx)
        out = "number" if got in (None, "int", "symbol") else got
        self.typed[id(agg)] = (agg, out)
        return out


def _inner_atoms(rule: Rule) -> list[Atom]:
    """Return the atoms, positive or negated, of the aggregates a rule holds (nested too)."""
    terms = [a for h in rule.heads for a in h.args]
    terms += [t for lit in rule.body for t in literal_terms(lit)]
    return [lit.atom if isinstance(lit, Negation) else lit
            for term in terms for t in all_terms(term) if isinstance(t, Aggregate)
            for lit in t.body if isinstance(lit, Atom | Negation)]


def _below(lits: tuple[Literal, ...], cycle: set[str]) -> tuple[Literal, ...]:
    """Return the atoms of relations outside `cycle` and the equalities they ground."""
    out = [lit for lit in lits if isinstance(lit, Atom) and lit.relation not in cycle]
    bound = grounded(tuple(out))
    rest = [lit for lit in lits if isinstance(lit, Comparison)]
    changed = True
    while changed:
        changed = False
        for lit in list(rest):
            free = {n for t in (lit.left, lit.right) for n in var_names(t)} - bound
            if len(free) > 1 or free and not any(
                    isinstance(side, Var) and side.name in free for side in (lit.left, lit.right)):
                continue
            out.append(lit)
            rest.remove(lit)
            bound |= free
            changed = True
    return tuple(out)


def _holds(lit: Literal, agg: Aggregate) -> bool:
    """Return whether a literal holds the aggregate `agg` itself (not an equal one)."""
    return any(t is agg for term in literal_terms(lit) for t in all_terms(term))


def _fresh_wildcards(lit: Literal, count) -> Literal:
    """Return a body literal with each wildcard of a positive atom a fresh variable."""
    if not isinstance(lit, Atom):
        return lit
    return Atom(lit.relation, tuple(Var(f"@w{next(count)}", a.loc) if isinstance(a, Wildcard)
                                    else a for a in lit.args), lit.loc)


def lower_aggregates(parsed, report, prims: dict[str, str]):
    """Return Parsed with every aggregate lowered to a generated relation and its rule."""
    if not parsed.aggregates:
        return parsed
    low = Lowering(parsed.decls, report, prims, parsed.rules)
    rules = [new for r in parsed.rules for new in (low.rule(r) if r.body or _has(r) else (r,))]
    # A subsumptive body's aggregate too (Soufflé allows it): its two atoms stay first.
    subs = [new for r in parsed.subsumptions for new in low.rule(r)]
    return replace(parsed, decls=parsed.decls + low.decls, rules=rules + low.rules,
                   subsumptions=subs)


def _has(rule: Rule) -> bool:
    return any(user_aggregate(a) for h in rule.heads for a in h.args)


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
            cycle = ", ".join(repr(names[m]) for m in prec.comps[comp[h]]
                              if not names[m].startswith("@"))
            if atom.relation.startswith("@dom"):  # keys _domain found inside the cycle only
                report(rule.loc, f"aggregate in a recursive rule of {cycle} whose injected "
                                 "variables only that cycle binds: levelflow evaluates it below "
                                 "the cycle, so bind them by a relation outside it too")
            else:
                report(rule.loc, f"aggregate over '{atom.relation}' inside a recursive cycle "
                                 f"with {cycle} (the program is not stratifiable)")
            break
