"""Path atoms `[EXPR](a, b)` expanded into ordinary rules over generated relations.

Each subexpression other than a (possibly inverted) relation becomes a relation named
`@<kind><n>`: a name the lexer never produces, so no user rule can define or read it. The
closure `e+` is `@plus<n>(x, y) :- E(x, y).  @plus<n>(x, y) :- @plus<n>(x, z), E(z, y).`, a
task of its own that the plans layer runs with a native operator (plans/closure.py); `e*` and
`e?` add the identity over the nodes of the relations in `e`; inverses are pushed down to the
relations (`^(a . b)` = `^b . ^a`), so an inverse is only an atom with its arguments swapped.
Equal subexpressions (by their text) share one relation, across rules. A relation whose only
rule is `v(x, y) :- [e+](x, y).` is itself the closure (no copy of a generated one).
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import replace

from levelflow.tasks.ast import Atom, Loc, PathAtom, PathExpr, Rule, Var, Wildcard
from levelflow.tasks.typecheck import UNKNOWN, primitive_of

_KINDS = {".": "seq", "|": "alt", "+": "plus", "*": "star", "?": "opt"}
# A rule's top-level alternatives are expanded into at most this many rules (else relations).
MAX_INLINE_RULES = 8


def show(expr: PathExpr) -> str:
    """Return the expression's text in canonical form (the key equal subexpressions share)."""
    op = expr.op
    if op == "rel":
        return expr.name
    if op in (".", "|"):
        inner = [show(p) if p.op not in (".", "|") or (op == "." and p.op == ".")
                 else f"({show(p)})" for p in expr.parts]
        return f" {op} ".join(inner)
    part = expr.parts[0]
    text = show(part) if part.op not in (".", "|") else f"({show(part)})"
    return "^" + text if op == "^" else text + op


def normal(expr: PathExpr, inverse: bool = False) -> PathExpr:
    """Return the expression with inverses pushed down to its relations."""
    op = expr.op
    if op == "rel":
        return PathExpr("^", (expr,), loc=expr.loc) if inverse else expr
    if op == "^":
        return normal(expr.parts[0], not inverse)
    parts = tuple(normal(p, inverse) for p in expr.parts)
    if op == "." and inverse:
        parts = parts[::-1]
    if op in (".", "|"):  # flatten a . (b . c) into one chain
        parts = tuple(q for p in parts for q in (p.parts if p.op == op else (p,)))
    return PathExpr(op, parts, loc=expr.loc)


def relations_in(expr: PathExpr) -> list[str]:
    """Return the relations the expression names, in order of first appearance."""
    if expr.op == "rel":
        return [expr.name]
    out: list[str] = []
    for p in expr.parts:
        out += [n for n in relations_in(p) if n not in out]
    return out


class Expander:
    """Turns path atoms into atoms; collects the generated declarations and rules."""

    def __init__(self, raw_decls, report, heads: Counter, prims: dict[str, str]) -> None:
        self.raw = {d.name: d for d in raw_decls}
        self.report = report
        self.prims = prims  # user type -> its primitive (typecheck.resolve_types)
        self.typed: dict[PathExpr, tuple | None] = {}  # types() per expression, checked once
        self.heads = heads  # relation -> the rules (facts included) whose head it is
        self.closures: set[str] = set()
        self.names: dict[str, str] = {}  # canonical text -> generated relation
        self.decls: list = []
        self.rules: list[Rule] = []
        self.paths: list[tuple[str, str]] = []

    def rule(self, rule: Rule) -> list[Rule]:
        """Return the rule(s) replacing `rule`: each path atom replaced by an ordinary atom."""
        if not any(isinstance(lit, PathAtom) for lit in rule.body):
            return [rule]
        direct = self.direct_closure(rule)
        if direct is not None:
            return direct
        # A path atom's top level is inlined: a chain becomes atoms joined on fresh variables
        # (named `1p`, `2p`..., which no program can write) and alternatives become rules, so
        # a view is one task, not one per subexpression.
        fresh = itertools.count(1)
        options = [self.inline(lit, fresh) if isinstance(lit, PathAtom) else [(lit,)]
                   for lit in rule.body]
        if sum(len(o) > 1 for o in options) and _product(options) > MAX_INLINE_RULES:
            options = [[(self.atom(normal(lit.expr), *lit.args, lit.loc),)]
                       if isinstance(lit, PathAtom) else [(lit,)] for lit in rule.body]
        return [replace(rule, body=tuple(itertools.chain.from_iterable(combo)))
                for combo in itertools.product(*options)]

    def inline(self, lit: PathAtom, fresh) -> list[tuple[Atom, ...]]:
        """Return the alternatives (each a tuple of atoms) holding lit's expression."""
        expr = normal(lit.expr)
        self.types(expr)  # the whole expression's type check: its top level has no relation
        alts = expr.parts if expr.op == "|" else (expr,)
        return [self.chain(alt, *lit.args, lit.loc, fresh) for alt in alts]

    def chain(self, expr: PathExpr, a, b, loc, fresh) -> tuple[Atom, ...]:
        """Return the atoms of a concatenation between terms a and b (one atom otherwise)."""
        if expr.op != ".":
            return (self.atom(expr, a, b, loc),)
        inner = [Var(f"{next(fresh)}p", expr.loc) for _ in expr.parts[1:]]
        ends = [a, *inner, b]
        return tuple(self.atom(p, ends[k], ends[k + 1], loc) for k, p in enumerate(expr.parts))

    def direct_closure(self, rule: Rule) -> list[Rule] | None:
        """Return the closure rules of `v(x, y) :- [e+](x, y).` when that is v's only rule."""
        (head, *more), body = rule.heads, rule.body
        lit = body[0]
        if more or len(body) != 1 or self.heads[head.relation] != 1:
            return None
        expr = normal(lit.expr)
        x, y = lit.args
        if not (expr.op == "+" and isinstance(x, Var) and isinstance(y, Var)
                and x.name != y.name and head.args == (x, y)):
            return None
        self.types(expr)
        self.names.setdefault(show(expr), head.relation)  # later `[e+]` atoms read v itself
        self.closures.add(head.relation)
        self.paths.append((head.relation, show(expr)))
        return self._rules(head.relation, expr)

    def atom(self, expr: PathExpr, a, b, loc: Loc | None) -> Atom:
        """Return an atom over terms a, b that holds exactly when expr(a, b) does."""
        if expr.op == "rel":
            self.types(expr)
            return Atom(expr.name, (a, b), expr.loc or loc)
        if expr.op == "^":
            rel = expr.parts[0]
            self.types(rel)
            return Atom(rel.name, (b, a), rel.loc or loc)
        return Atom(self.relation(expr), (a, b), expr.loc or loc)

    def types(self, expr: PathExpr):
        """Return the (source, target) TypeRefs of expr; None (reported) if a relation is bad."""
        if expr not in self.typed:
            self.typed[expr] = self._types(expr)
        return self.typed[expr]

    def _types(self, expr: PathExpr):
        op = expr.op
        if op == "rel":
            decl = self.raw.get(expr.name)
            if decl is None:
                self.report(expr.loc, f"relation '{expr.name}' is not declared", needs_rest=True)
                return None
            if len(decl.types) != 2:
                self.report(expr.loc, f"relation '{expr.name}' has arity {len(decl.types)}; "
                                      "a path expression needs binary relations")
                return None
            return decl.types[0], decl.types[1]
        got = [self.types(p) for p in expr.parts]
        if any(t is None for t in got):
            return None
        clash = self.clash(expr, [tuple(self.prim(t) for t in ends) for ends in got])
        if clash:  # reported here, naming the expression: the rules made of it name only `1p`
            self.report(expr.loc, f"type mismatch in path expression '{show(expr)}': {clash}")
        if op == "^":
            return got[0][1], got[0][0]
        if op == ".":
            return got[0][0], got[-1][1]
        return got[0]

    def prim(self, ref) -> str:
        """Return the primitive of a TypeRef (UNKNOWN if unresolved: reported elsewhere)."""
        return primitive_of(ref.name, ref.loc, self.prims, lambda *a, **k: None)

    def clash(self, expr: PathExpr, ends: list[tuple[str, str]]) -> str | None:
        """Return why the parts' (source, target) primitives cannot make expr, or None."""
        def differ(a: str, b: str) -> bool:
            return UNKNOWN not in (a, b) and a != b

        op, parts = expr.op, expr.parts
        pairs = zip(parts, ends, strict=True)
        if op == ".":
            for (p, (_, end)), (q, (start, _)) in itertools.pairwise(pairs):
                if differ(end, start):
                    return f"'{show(p)}' ends at {end} but '{show(q)}' starts at {start}"
        elif op == "|":
            (p, first), *rest = pairs
            for q, other in rest:
                if any(differ(a, b) for a, b in zip(first, other, strict=True)):
                    return (f"'{show(p)}' goes {first[0]} -> {first[1]} but '{show(q)}' "
                            f"goes {other[0]} -> {other[1]}")
        elif op == "+" and differ(*ends[0]):
            return f"'{show(parts[0])}' goes {ends[0][0]} -> {ends[0][1]}, so it cannot repeat"
        elif op in "*?":
            return self.identity_clash(parts[0])
        return None

    def identity_clash(self, expr: PathExpr) -> str | None:
        """Return why the identity that `e*` and `e?` add (every node of e's relations paired
        with itself) is ill-typed: a relation whose ends differ. (Relations of one type each
        but different types make e itself ill-typed, reported at e.)"""
        for rel in relations_in(expr):
            got = self.types(PathExpr("rel", name=rel, loc=expr.loc))
            ends = [self.prim(t) for t in got or ()]
            if len(set(ends) - {UNKNOWN}) > 1:
                return (f"its identity pairs each node of '{rel}' with itself, and '{rel}' "
                        f"goes {ends[0]} -> {ends[1]}")
        return None

    def relation(self, expr: PathExpr) -> str:
        """Return the generated relation holding expr, creating its declaration and rules."""
        key = show(expr)
        if key in self.names:
            return self.names[key]
        types = self.types(expr)
        name = f"@{_KINDS[expr.op]}{len(self.decls) + 1}"
        self.names[key] = name
        self._declare(name, types, expr.loc)
        self.paths.append((name, key))
        if expr.op == "+":
            self.closures.add(name)
        self.rules += self._rules(name, expr)
        return name

    def _declare(self, name: str, types, loc: Loc, arity: int = 2) -> None:
        from levelflow.tasks.ast import RawDecl, TypeRef

        types = types or (TypeRef("number", loc),) * arity  # the bad relation was reported
        self.decls.append(RawDecl(name, ("x", "y")[:len(types)], tuple(types), loc, loc))

    def _rules(self, name: str, expr: PathExpr) -> list[Rule]:
        loc = expr.loc
        x, y, z = Var("x", loc), Var("y", loc), Var("z", loc)
        head = Atom(name, (x, y), loc)
        op, parts = expr.op, expr.parts
        if op == "|":  # one rule per alternative, a chain inlined as its atoms
            fresh = itertools.count(1)
            return [Rule((head,), self.chain(p, x, y, loc, fresh), loc) for p in parts]
        if op == ".":
            ends = [x] + [Var(f"z{k}", loc) for k in range(1, len(parts))] + [y]
            body = tuple(self.atom(p, ends[k], ends[k + 1], loc) for k, p in enumerate(parts))
            return [Rule((head,), body, loc)]
        if op == "+":
            step = (Atom(name, (x, z), loc), self.atom(parts[0], z, y, loc))
            return [Rule((head,), (self.atom(parts[0], x, y, loc),), loc),
                    Rule((head,), step, loc)]
        # e* = e+ or identity, e? = e or identity, the identity over the relations' nodes
        inner = PathExpr("+", parts, loc=loc) if op == "*" else parts[0]
        loop = Rule((Atom(name, (x, x), loc),), (Atom(self.nodes(expr), (x,), loc),), loc)
        return [Rule((head,), (self.atom(inner, x, y, loc),), loc), loop]

    def nodes(self, expr: PathExpr) -> str:
        """Return the generated unary relation of the nodes of the relations expr names."""
        rels = relations_in(expr)
        key = "nodes(" + ", ".join(rels) + ")"
        if key in self.names:
            return self.names[key]
        name = f"@nodes{len(self.decls) + 1}"
        self.names[key] = name
        loc = expr.loc
        first = self.types(PathExpr("rel", name=rels[0], loc=loc))
        self._declare(name, first[:1] if first else None, loc, 1)
        self.paths.append((name, key))
        x, w = Var("x", loc), Wildcard(loc)
        for rel in rels:
            for args in ((x, w), (w, x)):
                self.rules.append(Rule((Atom(name, (x,), loc),), (Atom(rel, args, loc),), loc))
        return name


def _product(options: list[list]) -> int:
    """Return how many rules the options per literal expand into."""
    out = 1
    for o in options:
        out *= len(o)
    return out


def expand_paths(parsed, report, prims: dict[str, str]):
    """Return (Parsed with path atoms replaced and generated relations added, (relation,
    expression) per generated relation, the closure relations); prims maps user types to
    primitives."""
    if not any(isinstance(lit, PathAtom) for r in parsed.rules if r.body for lit in r.body):
        return parsed, (), frozenset()  # most programs: no pass over their facts
    heads = Counter(h.relation for r in parsed.rules for h in r.heads)
    ex = Expander(parsed.decls, report, heads, prims)
    rules = [new for r in parsed.rules for new in (ex.rule(r) if r.body else (r,))]
    out = replace(parsed, decls=parsed.decls + ex.decls, rules=rules + ex.rules)
    return out, tuple(ex.paths), frozenset(ex.closures)
