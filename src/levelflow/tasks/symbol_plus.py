"""`a + b` on two symbols is their concatenation in Soufflé (`"a" + "b"`, `to_string(x) + "."`):
lowered to `cat(a, b)` before the checks, so every later pass and backend sees a functor."""

from __future__ import annotations

from collections.abc import Mapping

from levelflow.tasks.ast import Atom, BinOp, Call, Const, Decl, Negation, Rule, Term, Var
from levelflow.tasks.typecheck import TermTyper
from levelflow.tasks.user_functors import map_rule, map_term


def _var_types(rule: Rule, decls: Mapping[str, Decl]) -> dict[str, str]:
    """Return the types its atoms give the rule's variables (the first atom wins)."""
    out: dict[str, str] = {}
    atoms = [*rule.heads, *(lit.atom if isinstance(lit, Negation) else lit
                            for lit in rule.body if isinstance(lit, Atom | Negation))]
    for atom in atoms:
        decl = decls.get(atom.relation)
        if decl is not None and len(decl.types) == len(atom.args):
            for arg, ty in zip(atom.args, decl.types, strict=True):
                if isinstance(arg, Var):
                    out.setdefault(arg.name, ty)
    return out


def _has_plus(term: Term) -> bool:
    if isinstance(term, BinOp):
        return term.op == "+" or _has_plus(term.left) or _has_plus(term.right)
    return isinstance(term, Call) and any(map(_has_plus, term.args))


def concat_symbols(rule: Rule, decls: Mapping[str, Decl]) -> Rule:
    """Return the rule with each `+` of two symbols written `cat(...)` (the same rule when it
    has none); anything else is left to the type checks."""
    terms = [a for lit in (*rule.heads, *rule.body) for a in (
        lit.args if isinstance(lit, Atom) else lit.atom.args if isinstance(lit, Negation)
        else (lit.left, lit.right))]
    if not any(map(_has_plus, terms)):
        return rule
    typer = TermTyper(_var_types(rule, decls), lambda *a, **k: None)

    def symbol(term: Term) -> bool:
        if isinstance(term, Const):
            return term.kind == "symbol"
        return not isinstance(term, BinOp) and typer.infer(term) == "symbol"

    def lower(term: Term) -> Term:
        term = map_term(term, lower)
        if isinstance(term, BinOp) and term.op == "+" and symbol(term.left) \
                and symbol(term.right):
            return Call("cat", (term.left, term.right), term.loc)
        return term
    return map_rule(rule, lower)
