"""`ord(s)`: the symbol's number in a symbol table, as Soufflé's symbol table numbers symbols.

The table is levelflow's, deterministic and kept in the state: first the program's string
constants in order of first appearance (rules and facts, in program order, each left to right),
then the symbols of the input facts as they are read (`.input` relations in directive order,
each file line by line, fields left to right; a Parquet or table input's symbols in text order),
then each epoch's new symbols in the order of its inserted facts. Numbers start at 0 and a symbol
keeps its number for good, whatever is deleted later. Soufflé's documented example (the
`arguments` page: `ord("Homer") < ord("Bart")` as Homer appears first) comes out the same.

Each `ord(t)` is lowered, once its rule is checked (so a wrong argument is a type error of
`ord`), to a fresh variable `@ord<k>` and the atom `@ord(t, @ord<k>)` in the rule's body (a
fact's before checking: it becomes a rule); `@ord` is a generated input relation whose tuples
the engine supplies (engine/ordinals.py: read with the inputs, an epoch's new symbols added),
so every plan, from scratch and in epochs, joins it like any relation. A symbol that is no
program constant and no input fact (one made by `cat`, `substr`, `to_string`, ...) has no
number there: an `ord` of it derives nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from levelflow.tasks.ast import (
    IO,
    Aggregate,
    Atom,
    BinOp,
    Call,
    Cast,
    Comparison,
    Const,
    Loc,
    Negation,
    RawDecl,
    Record,
    Rule,
    Term,
    TypeRef,
    Var,
)
from levelflow.tasks.user_functors import map_term

ORD = "@ord"  # (symbol, number): the symbol table's rows


@dataclass(frozen=True, slots=True)
class OrdinalsInput(IO):
    """The generated `.input @ord`: the program's constants in order and the inputs whose
    symbols follow them (relation name, directive, positions of its symbol attributes)."""

    constants: tuple[str, ...] = ()
    sources: tuple[tuple[str, IO, object], ...] = field(default=(), compare=False)


def _has_ord(term: Term) -> bool:
    if isinstance(term, Call):
        return term.name == "ord" or any(map(_has_ord, term.args))
    if isinstance(term, Aggregate):
        return (term.target is not None and _has_ord(term.target)) or \
            any(_lit_has_ord(lit) for lit in term.body)
    return any(_has_ord(t) for t in _subterms(term))


def _subterms(term: Term) -> tuple:
    if isinstance(term, BinOp):
        return (term.left, term.right)
    if isinstance(term, Cast):
        return (term.term,)
    if isinstance(term, Record):
        return term.args
    return ()


def _lit_has_ord(lit) -> bool:
    if isinstance(lit, Atom):
        return any(map(_has_ord, lit.args))
    if isinstance(lit, Negation):
        return any(map(_has_ord, lit.atom.args))
    if isinstance(lit, Comparison):
        return _has_ord(lit.left) or _has_ord(lit.right)
    return False


def uses_ord(rules) -> bool:
    """Return whether any rule calls `ord`."""
    return any(_lit_has_ord(lit) for rule in rules for lit in (*rule.heads, *rule.body))


class _Lowering:
    """Replaces `ord(t)` by fresh variables, collecting the `@ord` atoms each body needs."""

    def __init__(self) -> None:
        self.count = 0

    def term(self, term: Term, atoms: list) -> Term:
        if isinstance(term, Aggregate):  # lowered (tasks/aggregates.py): its body is the rule's
            target = self.term(term.target, atoms) if term.target is not None else None
            return Aggregate(term.kind, target, term.body, term.loc)
        term = map_term(term, lambda t: self.term(t, atoms))
        if isinstance(term, Call) and term.name == "ord" and len(term.args) == 1:
            var = Var(f"@ord{self.count}", term.loc)
            self.count += 1
            atoms.append(Atom(ORD, (term.args[0], var), term.loc))
            return var
        return term

    def literal(self, lit, atoms: list):
        if isinstance(lit, Atom):
            return Atom(lit.relation, tuple(self.term(a, atoms) for a in lit.args), lit.loc)
        if isinstance(lit, Negation):
            return Negation(self.literal(lit.atom, atoms), lit.loc)
        if isinstance(lit, Comparison):
            return Comparison(lit.op, self.term(lit.left, atoms), self.term(lit.right, atoms),
                              lit.loc)
        return lit

    def body(self, body) -> list:
        atoms: list[Atom] = []
        out = [self.literal(lit, atoms) for lit in body]
        return out + atoms

    def rule(self, rule: Rule) -> Rule:
        if not _lit_rule(rule):
            return rule
        atoms: list[Atom] = []
        heads = tuple(self.literal(h, atoms) for h in rule.heads)
        body = self.body(rule.body)
        return Rule(heads, tuple(body) + tuple(atoms), rule.loc)


def _lit_rule(rule: Rule) -> bool:
    return any(_lit_has_ord(lit) for lit in (*rule.heads, *rule.body))


def program_constants(rules) -> tuple[str, ...]:
    """Return the string constants of the rules in order of first appearance."""
    seen: dict[str, None] = {}

    def walk(term) -> None:
        if isinstance(term, Const):
            if term.kind == "symbol":
                seen.setdefault(term.value, None)
        elif isinstance(term, Aggregate):
            if term.target is not None:
                walk(term.target)
            for lit in term.body:
                lit_walk(lit)
        elif isinstance(term, Call):
            for a in term.args:
                walk(a)
        else:
            for t in _subterms(term):
                walk(t)

    def lit_walk(lit) -> None:
        if isinstance(lit, Atom):
            for a in lit.args:
                walk(a)
        elif isinstance(lit, Negation):
            lit_walk(lit.atom)
        elif isinstance(lit, Comparison):
            walk(lit.left)
            walk(lit.right)

    for rule in rules:
        for lit in (*rule.heads, *rule.body):
            lit_walk(lit)
    return tuple(seen)


def declare_ord(parsed):
    """Return Parsed with `@ord` declared and the facts that call `ord` lowered to rules, and
    the program's string constants in order (None when no rule calls `ord`)."""
    if not uses_ord(parsed.rules) and not uses_ord(parsed.subsumptions):
        return parsed, None
    constants = program_constants(parsed.rules)
    low = _Lowering()
    rules = [low.rule(r) if r.is_fact else r for r in parsed.rules]
    loc = Loc(parsed.rules[0].loc.file if parsed.rules else "", 0, 0)
    decl = RawDecl(ORD, ("s", "n"), (TypeRef("symbol", loc), TypeRef("number", loc)), loc, loc)
    return replace(parsed, rules=rules, decls=list(parsed.decls) + [decl]), constants


def lower_ord(rules) -> tuple[Rule, ...]:
    """Return checked rules with every `ord(t)` lowered to a join with `@ord`."""
    low = _Lowering()
    return tuple(low.rule(r) for r in rules)


def ordinals_input(constants: tuple[str, ...], decls: dict, inputs: dict) -> OrdinalsInput:
    """Return the `.input @ord` of a program with these constants and input directives."""
    sources = tuple((name, io, decls[name]) for name, io in inputs.items()
                    if name != ORD and name in decls and symbol_columns(decls[name]))
    return OrdinalsInput("input", ORD, (("IO", "ordinals"),), None, constants=constants,
                         sources=sources)


def symbol_columns(decl) -> tuple[int, ...]:
    """Return the positions of a declaration's plain symbol attributes (not records)."""
    return tuple(i for i, t in enumerate(decl.types)
                 if t == "symbol" and not (decl.shapes and decl.shapes[i]))
