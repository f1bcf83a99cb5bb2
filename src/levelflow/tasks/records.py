"""Records and ADTs lowered to the core before checking: every value a symbol, every
constructor and pattern a functor (tasks/record_values.py says how a value is held).

    p([x, y]) :- q(x, y).          p(#pack:is(x, y)) :- q(x, y).
    r(x) :- p([x, _]).             r(x) :- p(0r), 0r != "null", x = #get:i(0r, 0).
    e(n) :- t($Num(n)).            e(n) :- t(0r), #get:s(0r, 0) = "Num", n = #get:i(0r, 1).

A record term in a body atom is a pattern (a fresh variable, then its fields taken apart); in
a head or a negation it is a constructor; in `a = [x, y]` it is a constructor when its
variables are bound elsewhere, else a pattern on the other side.
"""

from __future__ import annotations

import itertools

from levelflow.tasks import record_values
from levelflow.tasks.ast import (
    PRIMITIVES,
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Const,
    Literal,
    Negation,
    Record,
    Rule,
    Term,
    Var,
    Wildcard,
)
from levelflow.tasks.typecheck import Report, show

NIL = Const(record_values.NIL, "symbol")


def record_table(defs, resolved: dict[str, str], report: Report) -> tuple:
    """Return the program's record and ADT types as Decl.record_types holds them."""
    aliases = {d.name: d.bases[0].name for d in defs if d.kind == "equiv" and len(d.bases) == 1}
    out = []
    for d in defs:
        if d.kind not in ("record", "adt"):
            continue
        branches = []
        for branch, fields in d.fields:
            branches.append((branch, tuple((f, field_type(t.name, aliases, resolved, defs,
                                                         t.loc, report))
                                           for f, t in fields)))
        out.append((d.name, d.kind, tuple(branches)))
    return tuple(out)


def field_type(name: str, aliases: dict, resolved: dict, defs, loc, report: Report) -> str:
    """Return what a type name holds: a record or ADT type's name, else its primitive."""
    kinds = {d.name: d.kind for d in defs}
    seen = set()
    while name in aliases and kinds.get(name) == "equiv" and name not in seen:
        seen.add(name)
        name = aliases[name]
    if kinds.get(name) in ("record", "adt") or name in PRIMITIVES:
        return name
    if name in resolved:
        return resolved[name]
    report(loc, f"unknown type '{name}'", needs_rest=True)
    return "symbol"


def has_records(rule: Rule) -> bool:
    """Return whether a rule writes a record or ADT term anywhere."""
    atoms = list(rule.heads) + [a for _, a, _ in rule.body_atoms()]
    terms = [t for a in atoms for t in a.args]
    terms += [t for lit in rule.body if isinstance(lit, Comparison) for t in (lit.left, lit.right)]
    return any(_holds_record(t) for t in terms)


def _holds_record(term: Term) -> bool:
    if isinstance(term, Record):
        return True
    if isinstance(term, BinOp):
        return _holds_record(term.left) or _holds_record(term.right)
    if isinstance(term, Call):
        return any(map(_holds_record, term.args))
    return isinstance(term, Cast) and _holds_record(term.term)


class Lowering:
    """Lowers one program's rules; `attr_types` gives per relation each attribute's
    field_type (a record or ADT name, or a primitive)."""

    __slots__ = ("types", "attr_types", "report", "fresh")

    def __init__(self, record_types: tuple, attr_types: dict[str, tuple[str, ...]],
                 report: Report) -> None:
        self.types = {name: (kind, dict(branches)) for name, kind, branches in record_types}
        self.attr_types = attr_types
        self.report = report
        self.fresh = itertools.count()

    def rule(self, rule: Rule) -> Rule:
        """Return the rule with its record and ADT terms lowered (unchanged when it has none)."""
        if not has_records(rule) and not self._consts_at_records(rule):
            if any(_ordered(lit) for lit in rule.body):
                self._refuse_order(rule, self._var_types(rule))
            return rule
        self.fresh = itertools.count()
        vtypes = self._var_types(rule)
        self._refuse_order(rule, vtypes)
        heads = tuple(self._built_atom(h) for h in rule.heads)
        body: list[Literal] = []
        for lit in rule.body:
            if isinstance(lit, Atom):
                args, extra = [], []
                for arg, ty in zip(lit.args, self._types(lit), strict=False):
                    if isinstance(arg, Record):
                        v = self._var(arg)
                        args.append(v)
                        extra += self.match(v, arg, ty)
                    else:
                        args.append(self.build(arg, ty))
                body.append(Atom(lit.relation, tuple(args), lit.loc))
                body += extra
            elif isinstance(lit, Negation):
                body.append(Negation(self._built_atom(lit.atom), lit.loc))
            elif isinstance(lit, Comparison):
                body += self.comparison(lit, vtypes, _bound(rule, lit))
            else:
                body.append(lit)
        return Rule(heads, tuple(body), rule.loc)

    def _refuse_order(self, rule: Rule, vtypes: dict[str, str]) -> None:
        """Report `<`, `>`, `<=`, `>=` between variables holding records or ADTs: Soufflé
        orders only numbers and symbols (a record term there is reported by comparison)."""
        for lit in rule.body:
            if _ordered(lit) and any(isinstance(t, Var) and t.name in vtypes
                                     for t in (lit.left, lit.right)):
                self.report(lit.loc, "records and ADT values compare only with = and !=")

    def _consts_at_records(self, rule: Rule) -> bool:
        """Return whether a constant stands where a record or ADT value must (reported by
        build)."""
        atoms = list(rule.heads) + [a for _, a, _ in rule.body_atoms()]
        return any(isinstance(arg, Const) and ty in self.types
                   for atom in atoms for arg, ty in zip(atom.args, self._types(atom), strict=True))

    def _types(self, atom: Atom) -> tuple[str, ...]:
        types = self.attr_types.get(atom.relation, ())
        return types if len(types) == len(atom.args) else ("",) * len(atom.args)

    def _var_types(self, rule: Rule) -> dict[str, str]:
        out: dict[str, str] = {}
        for atom in list(rule.heads) + [a for _, a, _ in rule.body_atoms()]:
            for arg, ty in zip(atom.args, self._types(atom), strict=True):
                self._type_pattern(arg, ty, out)
        # `r = [x, _]` with r typed: x, and fields further in; `q = r` gives q r's type, so a
        # chain `p = q, q = [x, _]` types x as Soufflé does: repeated until nothing changes.
        equalities = [lit for lit in rule.body if isinstance(lit, Comparison) and lit.op == "="]
        while True:
            known = len(out)
            for lit in equalities:
                for one, other in ((lit.left, lit.right), (lit.right, lit.left)):
                    if isinstance(other, Var) and other.name in out and \
                            isinstance(one, Record | Var):
                        self._type_pattern(one, out[other.name], out)
            if len(out) == known:
                return out

    def _type_pattern(self, term: Term, ty: str, out: dict[str, str]) -> None:
        """Record the record or ADT type of each variable a term of type `ty` holds."""
        if isinstance(term, Var) and ty in self.types:
            out.setdefault(term.name, ty)
        if not isinstance(term, Record) or ty not in self.types:
            return
        kind, branches = self.types[ty]
        fields = branches.get(term.branch[1:] if term.branch.startswith("$") else "", ())
        if len(fields) == len(term.args):
            for arg, (_, ft) in zip(term.args, fields, strict=True):
                self._type_pattern(arg, ft, out)

    def _var(self, near: Term) -> Var:
        return Var(f"{next(self.fresh)}r", near.loc)

    def _built_atom(self, atom: Atom) -> Atom:
        return Atom(atom.relation, tuple(self.build(a, ty) for a, ty in
                                         zip(atom.args, self._types(atom), strict=True)),
                    atom.loc)

    def _fields(self, rec: Record, ty: str) -> tuple | None:
        """Return the (field, type) pairs a record term of type `ty` spells, or None after
        reporting why it cannot be one."""
        if ty not in self.types:
            what = f"of type {ty}" if ty else "here"
            self.report(rec.loc, f"a record or ADT term cannot stand {what}")
            return None
        kind, branches = self.types[ty]
        if kind == "record":
            if rec.branch.startswith("$"):
                self.report(rec.loc, f"'{rec.branch}' is an ADT branch, but {ty} is a record type")
                return None
            fields = branches[""]
        else:
            fields = branches.get(rec.branch[1:]) if rec.branch.startswith("$") else None
            if fields is None:
                self.report(rec.loc, f"'{rec.branch or '[...]'}' is not a branch of the ADT {ty}")
                return None
        if rec.branch != "nil" and len(rec.args) != len(fields):
            name = rec.branch or ty
            self.report(rec.loc, f"{name} has {len(fields)} field{'s' * (len(fields) != 1)} "
                                 f"but is written with {len(rec.args)}")
            return None
        return fields

    def build(self, term: Term, ty: str) -> Term:
        """Return a term as a value of type `ty`: a record term as its constructor."""
        if not isinstance(term, Record):
            if ty in self.types and isinstance(term, Const):
                kind, branches = self.types[ty]
                named = [f"${b}(...)" for b in branches][:3] + ["..."] * (len(branches) > 3)
                spelt = "[...] or nil" if kind == "record" else " or ".join(named)
                self.report(term.loc, f"a value of {ty} is written {spelt}, not {show(term)}")
                return Wildcard(term.loc)  # reported: no value is made of it
            if _holds_record(term):
                self.report(term.loc, "a record or ADT term cannot stand inside an expression")
                return Wildcard(term.loc)
            return term
        fields = self._fields(term, ty)
        if fields is None:  # reported; later passes see no record
            return Wildcard(term.loc)
        if term.branch == "nil":
            return Const(record_values.NIL, "symbol", term.loc)
        wrong = None
        for i, (arg, (_, ft)) in enumerate(zip(term.args, fields, strict=True), 1):
            if isinstance(arg, Wildcard):
                self.report(arg.loc, "'_' cannot stand in a record that is built (a head, a "
                                     "negation or a comparison)")
            elif isinstance(arg, Const) and ft not in self.types:
                what = record_values.constant_problem(arg.value, arg.kind, ft)
                if what is not None:
                    self.report(arg.loc, f"element {i} of {term.branch or ty} is {show(arg)}, "
                                         f"not {what}")
                    wrong = wrong or arg.loc
        if wrong:  # reported there; no value is made of it
            return Wildcard(wrong)
        args = [self.build(a, ft) for a, (_, ft) in zip(term.args, fields, strict=True)]
        codes = "".join(record_values.code_of(ft) for _, ft in fields)
        if term.branch:
            codes = "b" + codes
            args.insert(0, Const(term.branch[1:], "symbol", term.loc))
        if all(isinstance(a, Const) for a in args):
            value = record_values.pack(codes, *(a.value for a in args))
            return Const(value, "symbol", term.loc)
        return Call("#pack:" + codes, tuple(args), term.loc)

    def match(self, v: Var, pattern: Record, ty: str) -> list[Literal]:
        """Return the literals that hold when variable `v` matches the pattern."""
        fields = self._fields(pattern, ty)
        if fields is None:
            return []
        loc = pattern.loc
        if pattern.branch == "nil":
            return [Comparison("=", v, Const(record_values.NIL, "symbol", loc), loc)]
        out: list[Literal] = []
        first = 0
        if pattern.branch:
            tag = Call("#get:s", (v, Const(0, "number", loc)), loc)
            out.append(Comparison("=", tag, Const(pattern.branch[1:], "symbol", loc), loc))
            first = 1
        else:
            out.append(Comparison("!=", v, Const(record_values.NIL, "symbol", loc), loc))
        for i, (sub, (_, ft)) in enumerate(zip(pattern.args, fields, strict=True)):
            if isinstance(sub, Wildcard):
                continue
            code = record_values.code_of(ft)
            get = Call(f"#get:{code}", (v, Const(first + i, "number", sub.loc)), sub.loc)
            if isinstance(sub, Record):
                w = self._var(sub)
                out.append(Comparison("=", w, get, sub.loc))
                out += self.match(w, sub, ft)
            else:
                out.append(Comparison("=", self.build(sub, ft), get, sub.loc))
        return out

    def comparison(self, lit: Comparison, vtypes: dict[str, str], bound: set[str]
                   ) -> list[Literal]:
        """Return a comparison with record terms as constructors or patterns."""
        left, right = lit.left, lit.right
        if not (isinstance(left, Record) or isinstance(right, Record)):
            return [lit]
        if lit.op not in ("=", "!="):
            self.report(lit.loc, "records and ADT values compare only with = and !=")
            return []
        rec, other = (left, right) if isinstance(left, Record) else (right, left)
        ty = vtypes.get(other.name, "") if isinstance(other, Var) else ""
        if not ty:
            self.report(lit.loc, "the type of this record or ADT term is not known: compare it "
                                 "with a variable an atom types")
            return []
        wild = any(isinstance(a, Wildcard) for a in _subterms(rec))
        if lit.op == "!=" or not wild and all(v in bound for v in _vars(rec)):
            return [Comparison(lit.op, other, self.build(rec, ty), lit.loc)]
        return self.match(other, rec, ty)


def _ordered(lit: Literal) -> bool:
    return isinstance(lit, Comparison) and lit.op in ("<", ">", "<=", ">=")


def flat_subsumption(rule: Rule) -> Rule:
    """Return a lowered subsumptive rule (`@sub:r(..) :- r(..), r(..), body`) whose two atoms
    hold a fresh variable for each record term, matched by `v = [..]` after them: the engine
    takes the first two body literals as the dominated and the dominating tuple."""
    fresh = itertools.count()
    eqs: list[Literal] = []

    def flat(atom: Atom) -> Atom:
        args = []
        for arg in atom.args:
            if isinstance(arg, Record):
                arg, record = Var(f"{next(fresh)}s", arg.loc), arg
                eqs.append(Comparison("=", arg, record, record.loc))
            args.append(arg)
        return Atom(atom.relation, tuple(args), atom.loc)

    dominated, dominating = flat(rule.body[0]), flat(rule.body[1])
    if not eqs:
        return rule
    head = Atom(rule.heads[0].relation, dominated.args + dominating.args, rule.heads[0].loc)
    return Rule((head,), (dominated, dominating, *eqs, *rule.body[2:]), rule.loc)


def _subterms(term: Term) -> list[Term]:
    if isinstance(term, Record):
        return [term] + [s for a in term.args for s in _subterms(a)]
    return [term]


def _pattern_vars(term: Term) -> list[str]:
    """Return the variables a pattern binds: its fields that are variables, nested too."""
    if isinstance(term, Var):
        return [term.name]
    if isinstance(term, Record):
        return [v for a in term.args for v in _pattern_vars(a)]
    return []


def _vars(term: Term) -> list[str]:
    if isinstance(term, Var):
        return [term.name]
    if isinstance(term, Record | Call):
        return [v for a in term.args for v in _vars(a)]
    if isinstance(term, BinOp):
        return _vars(term.left) + _vars(term.right)
    return _vars(term.term) if isinstance(term, Cast) else []


def _bound(rule: Rule, skip: Literal | None = None) -> set[str]:
    """Return the variables positive atoms bind (inside patterns too), and the equalities
    other than `skip` after them."""
    bound: set[str] = set()
    for _, atom, negated in rule.body_atoms():
        if not negated:
            for arg in atom.args:
                if isinstance(arg, Var | Record):
                    bound.update(_pattern_vars(arg))
    equalities = [lit for lit in rule.body
                  if isinstance(lit, Comparison) and lit.op == "=" and lit is not skip]
    changed = True
    while changed:
        changed = False
        for c in equalities:
            for one, other in ((c.left, c.right), (c.right, c.left)):
                if isinstance(one, Var | Record) and set(_vars(other)) <= bound:
                    new = set(_pattern_vars(one)) - bound
                    if new:
                        bound |= new
                        changed = True
    return bound


def lower_program(parsed, resolved: dict[str, str], decls: dict, report: Report
                  ) -> tuple[dict, list[Rule], list[Rule]]:
    """Return the Decls with their record shapes, and the rules and the subsumptive rules
    with records lowered."""
    import dataclasses

    table = record_table(parsed.types, resolved, report)
    if not table and not parsed.surface:  # the parser saw no record term
        return decls, parsed.rules, parsed.subsumptions
    aliases = {d.name: d.bases[0].name for d in parsed.types
               if d.kind == "equiv" and len(d.bases) == 1}
    attr_types: dict[str, tuple[str, ...]] = {}
    for raw in parsed.decls:
        if raw.name in decls and raw.name not in attr_types:
            attr_types[raw.name] = tuple(field_type(t.name, aliases, resolved, parsed.types,
                                                    t.loc, lambda *a, **k: None)
                                         for t in raw.types)
    names = {name for name, _, _ in table}
    out = dict(decls)
    for name, types in attr_types.items():
        shapes = tuple(t if t in names else "" for t in types)
        if any(shapes):
            out[name] = dataclasses.replace(decls[name], shapes=shapes, record_types=table)
    lowering = Lowering(table, attr_types, report)
    return out, [lowering.rule(rule) for rule in parsed.rules], \
        [lowering.rule(flat_subsumption(rule)) for rule in parsed.subsumptions]
