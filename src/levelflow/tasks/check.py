"""Semantic checks turning a parsed file into a Program, or the first problem in source order.

Every check reports (loc, message) into one list; at the end the problem with the smallest
line:col is raised, so the user always sees the earliest problem whatever pass found it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from levelflow.tasks.aggregates import check_aggregated, lower_aggregates
from levelflow.tasks.ast import (
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Const,
    Decl,
    Loc,
    Negation,
    Program,
    Rule,
    Term,
    Var,
    Wildcard,
)
from levelflow.tasks.choice import lower_choices
from levelflow.tasks.directives import check_limits, ignored_note
from levelflow.tasks.eqrel import eqrel_rules
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.functor_binding import bind_functors
from levelflow.tasks.functor_check import (
    check_functors,
    number_autoinc,
    pattern_warnings,
    subterms,
)
from levelflow.tasks.io_check import check_ios
from levelflow.tasks.lower import lower_rule
from levelflow.tasks.ordinals import ORD, declare_ord, lower_ord, ordinals_input
from levelflow.tasks.parser import Parsed
from levelflow.tasks.ranges import name_ranges
from levelflow.tasks.records import lower_program as lower_records
from levelflow.tasks.regpath import expand_paths
from levelflow.tasks.rule_graph import precedence
from levelflow.tasks.strata import Precedence
from levelflow.tasks.subsume import SUB, add_pair_decls, check_strata, order_rules, subsumed
from levelflow.tasks.subtypes import check_program_subtypes
from levelflow.tasks.symbol_plus import concat_symbols
from levelflow.tasks.typecheck import (
    INT64_MAX,
    INT64_MIN,
    UNKNOWN,
    TermTyper,
    comparable,
    describe,
    fits,
    fold,
    plain_fact,
    plain_kinds,
    primitive_of,
    resolve_types,
    show,
)


class Problems:
    """The problems found so far; `first()` is the one to show.

    When parsing stopped at a syntax error, only the statements before it are checked, and a
    problem that the rest of the file could fix (a relation or type declared further down) is
    dropped: the syntax error itself is reported instead, unless an earlier problem stands.
    """

    __slots__ = ("items", "partial")

    def __init__(self, syntax_error: DatalogError | None = None) -> None:
        self.items: list[tuple[int, int, int, Loc, str]] = []
        self.partial = syntax_error is not None
        if syntax_error is not None and syntax_error.loc is not None:
            self(syntax_error.loc, syntax_error.what)

    def __call__(self, loc: Loc, what: str, *, needs_rest: bool = False) -> None:
        if not (needs_rest and self.partial):
            self.items.append((loc.line, loc.col, len(self.items), loc, what))

    def first(self) -> DatalogError | None:
        """Return the earliest problem as a DatalogError, or None when there is none."""
        if not self.items:
            return None
        _, _, _, loc, what = min(self.items)
        return DatalogError(what, loc)


def check(parsed: Parsed, file: str) -> Program:
    """Return the checked Program; raise DatalogError naming the earliest problem."""
    report = Problems(parsed.error)
    if parsed.eqrels:
        parsed.rules.extend(eqrel_rules(parsed, report))
    types = resolve_types(parsed.types, report)
    parsed, paths, closures = expand_paths(parsed, report, types)
    if parsed.functors:  # a call of an undeclared one is refused by functors.call_type
        parsed.rules = bind_functors(parsed, types, report)
    parsed, ord_constants = declare_ord(parsed)  # its constants: before anything moves
    parsed = lower_aggregates(parsed, report, types)
    decls = _check_decls(parsed, types, report)
    decls, parsed.rules, parsed.subsumptions = lower_records(parsed, types, decls, report)
    decls, parsed.rules = lower_choices(parsed, decls, report)
    pair_decls = add_pair_decls(parsed.subsumptions, decls, report)
    subs = tuple(_check_rule(rule, pair_decls, report, types) for rule in parsed.subsumptions
                 if SUB + subsumed(rule) in pair_decls)
    ios = [io for io in parsed.ios if io.kind != "limitsize"]
    inputs, outputs, more_outputs, printsize = check_ios(ios, decls, report)
    if ord_constants is not None:  # the symbol table `ord` reads: tasks/ordinals.py
        inputs[ORD] = ordinals_input(ord_constants, decls, inputs)
    plain, fast = plain_kinds(decls), parsed.fast
    rules = tuple(rule if id(rule) in fast and plain_fact(rule, plain)
                  else _check_rule(rule, decls, report, types)
                  for rule in parsed.rules)
    if parsed.types:
        check_program_subtypes(parsed, types, rules, report)
    if parsed.surface:
        rules = tuple(lower_rule(rule) for rule in rules)
    if parsed.surface:
        subs = tuple(lower_rule(rule) for rule in subs)
    if ord_constants is not None:  # `ord(t)` as a join with the symbol table
        rules, subs = lower_ord(rules), lower_ord(subs)
    prec = precedence(decls, rules + tuple(order_rules(subs)))
    check_strata(prec, subs, report)
    check_aggregated(prec, rules, report)
    _check_stratified(prec, rules, report)
    rules = number_autoinc(prec, rules, report, fast)
    limits = check_limits([io for io in parsed.ios if io.kind == "limitsize"], prec, report)
    error = report.first()
    if error is not None:
        raise error
    return Program(file, decls, inputs, outputs, printsize, rules, more_outputs,
                   paths=paths, closures=closures, precedence=prec, limits=limits,
                   notes=ignored_note(parsed, file) + pattern_warnings(rules + subs),
                   subsumptions=subs)


def _check_decls(parsed: Parsed, types: dict[str, str], report: Problems) -> dict[str, Decl]:
    decls: dict[str, Decl] = {}
    for d in parsed.decls:
        if d.name in decls:
            first = decls[d.name].loc
            report(d.name_loc,
                   f"relation '{d.name}' is already declared at {first.line}:{first.col}")
            continue
        prims = tuple(primitive_of(t.name, t.loc, types, report) for t in d.types)
        decls[d.name] = Decl(d.name, d.attrs, prims, d.loc)
    return decls


# The .input/.output options levelflow implements (Soufflé's file options without rfc4180 and
# the like; `table=` for IO=spark).
_walk = subterms


def _vars(term: Term) -> Iterator[Var]:
    return (t for t in _walk(term) if isinstance(t, Var))


def _check_constants(term: Term, report: Problems) -> None:
    for t in _walk(term):
        if isinstance(t, Const):
            if t.kind == "number" and not INT64_MIN <= t.value <= INT64_MAX:
                report(t.loc, f"integer constant {t.value} does not fit in 64 bits")
            elif t.kind == "unsigned" and not 0 <= t.value < 2**64:
                report(t.loc, f"unsigned constant {t.value} does not fit in 64 bits")
            elif t.kind == "float" and not math.isfinite(t.value):
                report(t.loc, f"float constant {t.value} is not finite")


def _atom_ok(atom: Atom, decls: dict[str, Decl], report: Problems) -> Decl | None:
    """Return the atom's Decl when the relation is declared with the atom's arity."""
    decl = decls.get(atom.relation)
    if decl is None:
        report(atom.loc, f"relation '{atom.relation}' is not declared", needs_rest=True)
        return None
    if decl.arity != len(atom.args):
        report(atom.loc, f"relation '{atom.relation}' has arity {decl.arity} but is used with "
                         f"{len(atom.args)} argument{'s' if len(atom.args) != 1 else ''}")
        return None
    return decl


def _check_rule(rule: Rule, decls: dict[str, Decl], report: Problems,
                types: dict[str, str]) -> Rule:
    """Report the rule's problems; return it with a fact's constant expressions folded."""
    for head in rule.heads:
        for arg in head.args:
            for t in _walk(arg):
                if isinstance(t, Wildcard):
                    report(t.loc, "wildcard '_' is not allowed in a rule head")
    for lit in rule.body:
        terms = lit.atom.args if isinstance(lit, Negation) else (
            lit.args if isinstance(lit, Atom) else (lit.left, lit.right))
        for arg in terms:
            for t in _walk(arg):
                if isinstance(t, Wildcard) and isinstance(lit, Comparison):
                    report(t.loc, "wildcard '_' is not allowed in a comparison")
                elif isinstance(t, BinOp | Call):
                    for w in ((t.left, t.right) if isinstance(t, BinOp) else t.args):
                        if isinstance(w, Wildcard):
                            report(w.loc, "wildcard '_' is not allowed in arithmetic")
            _check_constants(arg, report)
    for head in rule.heads:
        for arg in head.args:
            _check_constants(arg, report)
    rule = name_ranges(concat_symbols(rule, decls))
    if rule.is_fact:
        return _check_fact(rule, decls, report)
    check_functors(rule, report)
    _check_types(rule, decls, report, types)
    _check_grounded(rule, report)
    return rule


def _check_fact(rule: Rule, decls: dict[str, Decl], report: Problems) -> Rule:
    head = rule.heads[0]
    decl = _atom_ok(head, decls, report)
    args: list[Term] = []
    for arg in head.args:
        bad = next((t for t in _walk(arg) if isinstance(t, Var)), None)
        if bad is not None:
            report(bad.loc, f"fact argument '{bad.name}' is not a constant")
            args.append(arg)
            continue
        const = fold(arg, report)
        args.append(const if const is not None else arg)
        if const is not None:
            _check_constants(const, report)
    if decl is not None:
        for k, (arg, attr, ty) in enumerate(zip(args, decl.attrs, decl.types, strict=True)):
            if not isinstance(arg, Const):
                continue
            if not fits(ty, _const_type(arg), arg):
                report(arg.loc, f"type mismatch: attribute '{attr}' of '{decl.name}' is {ty} "
                                f"but {describe(arg, _const_type(arg))}")
            elif ty == "float" and arg.kind == "number":
                # An integer literal is polymorphic (Soufflé 2); store it as the float it denotes.
                args[k] = Const(float(arg.value), "float", arg.loc)
    return Rule((Atom(head.relation, tuple(args), head.loc),), (), rule.loc)


def _const_type(c: Const) -> str:
    return "int" if c.kind == "number" else c.kind


def _atoms(rule: Rule) -> Iterator[Atom]:
    """Yield the rule's atoms in source order: heads, then positive and negated body atoms."""
    yield from rule.heads
    for _, atom, _ in rule.body_atoms():
        yield atom


def _check_types(rule: Rule, decls: dict[str, Decl], report: Problems,
                 types: dict[str, str]) -> None:
    var_types: dict[str, str] = {}
    first_seen: dict[str, Loc] = {}
    checked: list[tuple[Atom, Decl]] = []
    for atom in _atoms(rule):
        decl = _atom_ok(atom, decls, report)
        if decl is None:
            continue
        checked.append((atom, decl))
        for arg, attr, ty in zip(atom.args, decl.attrs, decl.types, strict=True):
            if not isinstance(arg, Var) or ty == UNKNOWN:
                continue
            prev = var_types.get(arg.name)
            if prev is None:
                var_types[arg.name] = ty
                first_seen[arg.name] = arg.loc
            elif prev != ty:
                at = first_seen[arg.name]
                report(arg.loc, f"type mismatch: variable '{arg.name}' is {ty} here (attribute "
                                f"'{attr}' of '{atom.relation}') but {prev} at {at.line}:{at.col}")
    typer = TermTyper(var_types, report, types)
    comparisons = [lit for lit in rule.body if isinstance(lit, Comparison)]
    # `x = expr` gives x the type of expr when no atom typed x; repeat for chains of such.
    silent = TermTyper(var_types, lambda loc, what, needs_rest=False: None, types)
    changed = True
    while changed:
        changed = False
        for c in comparisons:
            if c.op != "=":
                continue
            for var, other in ((c.left, c.right), (c.right, c.left)):
                if isinstance(var, Var) and var.name not in var_types:
                    ty = silent.infer(other)
                    if ty is not None:
                        var_types[var.name] = ty
                        changed = True
    for atom, decl in checked:
        for arg, attr, ty in zip(atom.args, decl.attrs, decl.types, strict=True):
            if isinstance(arg, Var | Wildcard):
                continue
            got = typer.infer(arg)
            if not fits(ty, got, arg):
                report(arg.loc, f"type mismatch: attribute '{attr}' of '{atom.relation}' is {ty} "
                                f"but {describe(arg, got)}")
    for c in comparisons:
        left, right = typer.infer(c.left), typer.infer(c.right)
        if c.op.lstrip("!") in ("contains", "match"):
            for term, ty in ((c.left, left), (c.right, right)):
                if ty not in (None, "symbol"):
                    report(term.loc, f"type mismatch: '{c.op.lstrip('!')}' takes symbols, but "
                                     f"{describe(term, ty)}")
            continue
        if not comparable(left, right):
            report(c.loc, f"type mismatch: cannot compare {_kind(c.left, left)} with "
                          f"{_kind(c.right, right)}")


def _kind(term: Term, ty: str | None) -> str:
    ty = "number" if ty == "int" else ty
    return f"{ty} {show(term)}" if isinstance(term, Const | Var) else f"a {ty} expression"


def _check_grounded(rule: Rule, report: Problems) -> None:
    bound: set[str] = set()
    for lit in rule.body:
        if isinstance(lit, Atom):
            bound.update(arg.name for arg in lit.args if isinstance(arg, Var))
    equalities = [lit for lit in rule.body if isinstance(lit, Comparison) and lit.op == "="]
    changed = True
    while changed:
        changed = False
        for c in equalities:
            for var, other in ((c.left, c.right), (c.right, c.left)):
                if (isinstance(var, Var) and var.name not in bound
                        and all(v.name in bound for v in _vars(other))):
                    bound.add(var.name)
                    changed = True
    uses: list[Term] = [arg for head in rule.heads for arg in head.args]
    for lit in rule.body:
        if isinstance(lit, Atom):
            uses.extend(arg for arg in lit.args if isinstance(arg, BinOp | Call | Cast))
        elif isinstance(lit, Negation):
            uses.extend(lit.atom.args)
        else:
            uses.extend((lit.left, lit.right))
    for term in uses:
        for var in _vars(term):
            if var.name not in bound:
                report(var.loc, f"variable '{var.name}' is not grounded (no positive body atom "
                                "binds it)")


def _check_stratified(prec: Precedence, rules: tuple[Rule, ...], report: Problems) -> None:
    """Report each negation of a relation in the same recursive component as the rule's head."""
    ids, comp = prec.ids, prec.comp_of
    for rule in rules:
        for i, atom, negated in rule.body_atoms():
            if not negated or atom.relation not in ids:
                continue
            neg = ids[atom.relation]
            for head in rule.heads:
                h = ids.get(head.relation)
                if h is None or comp[h] != comp[neg]:
                    continue
                cycle = "itself" if h == neg else f"'{head.relation}'"
                report(rule.body[i].loc, f"relation '{atom.relation}' is negated inside a "
                                         f"recursive cycle with {cycle} (the program is not "
                                         "stratifiable)")
