"""Types: user types resolved to primitives, and the primitive type of every term in a rule.

A term's type is one of the PRIMITIVES, "int" (an integer constant, which fits number,
unsigned and float as in Soufflé 2) or None (unknown: an unbound variable, reported elsewhere).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Protocol

from levelflow.tasks import functors
from levelflow.tasks.ast import (
    PRIMITIVES,
    Aggregate,
    BinOp,
    Call,
    Cast,
    Const,
    Decl,
    Loc,
    Rule,
    Term,
    TypeDef,
    Var,
    Wildcard,
)
from levelflow.tasks.strata import strongly_connected

NUMERIC = ("number", "unsigned", "float")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UNKNOWN = "?"  # the primitive of an attribute whose type could not be resolved (already reported)


class Report(Protocol):
    """Where problems go; `needs_rest` marks one that later text could fix (a missing name)."""

    def __call__(self, loc: Loc, what: str, *, needs_rest: bool = False) -> None: ...


def primitive_of(name: str, loc: Loc, resolved: dict[str, str], report: Report) -> str:
    """Return the primitive a type name stands for, or UNKNOWN after reporting it at loc."""
    if name in PRIMITIVES:
        return name
    if name in resolved:
        return resolved[name]
    report(loc, f"unknown type '{name}'", needs_rest=True)
    return UNKNOWN


def resolve_types(defs: list[TypeDef], report: Report) -> dict[str, str]:
    """Return each user type's primitive (UNKNOWN when it cannot be resolved, after reporting)."""
    by_name: dict[str, TypeDef] = {}
    for d in defs:
        if d.name in PRIMITIVES:
            report(d.loc, f"cannot redefine the primitive type '{d.name}'")
        elif d.name in by_name:
            first = by_name[d.name].loc
            report(d.loc, f"type '{d.name}' is already defined at {first.line}:{first.col}")
        else:
            by_name[d.name] = d
    names = list(by_name)
    ids = {name: i for i, name in enumerate(names)}
    succ = [[ids[b.name] for b in by_name[name].bases if b.name in ids] for name in names]
    resolved: dict[str, str] = {}
    # Tarjan emits a type after every type it is defined from, so bases resolve first.
    for comp in strongly_connected(len(names), succ):
        if len(comp) > 1 or comp[0] in succ[comp[0]]:
            for i in comp:
                d = by_name[names[i]]
                report(d.loc, f"type '{d.name}' is defined in terms of itself")
                resolved[d.name] = UNKNOWN
            continue
        d = by_name[names[comp[0]]]
        if d.kind in ("record", "adt"):  # held as symbols (tasks/record_values.py)
            resolved[d.name] = "symbol"
            continue
        prims = [primitive_of(base.name, base.loc, resolved, report) for base in d.bases]
        known = sorted(set(prims) - {UNKNOWN})
        if UNKNOWN in prims:
            resolved[d.name] = UNKNOWN
        elif len(known) > 1:
            report(d.loc, f"union type '{d.name}' mixes the primitive types {' and '.join(known)}")
            resolved[d.name] = UNKNOWN
        else:
            resolved[d.name] = known[0]
    return resolved


def show(term: Term) -> str:
    """Return a short source-like rendering of a term for messages."""
    if isinstance(term, Const):
        if term.kind == "symbol":
            text = term.value if len(term.value) <= 30 else term.value[:27] + "..."
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return repr(term.value)
    if isinstance(term, Var):
        return term.name
    if isinstance(term, Wildcard):
        return "_"
    return "expression"


def fits(declared: str, got: str | None, term: Term) -> bool:
    """Return True when a term of type `got` may stand at an attribute of type `declared`."""
    if got is None or declared == UNKNOWN or declared == got:
        return True
    if got == "int" and declared in NUMERIC:
        return not (declared == "unsigned" and isinstance(term, Const) and term.value < 0)
    return False


def comparable(a: str | None, b: str | None) -> bool:
    """Return True when terms of types a and b may be compared."""
    if a is None or b is None or a == b:
        return True
    return (a == "int" and b in NUMERIC) or (b == "int" and a in NUMERIC)


def describe(term: Term, got: str | None) -> str:
    """Return how a mismatching term is named in a message."""
    if isinstance(term, Const):
        if term.kind == "number" and isinstance(term.value, int) and term.value < 0:
            return f"the constant {show(term)} is negative"
        article = "an" if term.kind == "unsigned" else "a"
        return f"the constant {show(term)} is {article} {term.kind}"
    if isinstance(term, Var):
        return f"the variable '{term.name}' is {got}"
    return f"the expression is {got}"


class TermTyper:
    """Infers term types from variable types, reporting arithmetic on symbols or mixed types."""

    __slots__ = ("vars", "report", "types")

    def __init__(self, var_types: dict[str, str], report: Report,
                 types: dict[str, str] | None = None) -> None:
        self.vars = var_types
        self.report = report
        self.types = types or {}  # user type -> primitive, for casts

    def infer(self, term: Term) -> str | None:
        """Return the type of `term` (None if unknown), reporting bad arithmetic once."""
        if isinstance(term, Var):
            return self.vars.get(term.name)
        if isinstance(term, Const):
            return "int" if term.kind == "number" else term.kind
        if isinstance(term, Wildcard):
            return None
        if isinstance(term, Call):
            types = [self.infer(a) for a in term.args]
            try:
                return functors.call_type(term.name, types)
            except functors.FunctorTypeError as e:
                unsupported = isinstance(e, functors.FunctorUnsupported)
                self.report(term.loc, str(e) if unsupported else f"type mismatch: {e}")
                return None
        if isinstance(term, Cast):
            return self.cast(term)
        if isinstance(term, Aggregate):
            return self.aggregate(term)
        left = self.infer(term.left)
        right = self.infer(term.right)
        if left == "symbol" or right == "symbol":
            self.report(term.loc, f"arithmetic '{term.op}' on a symbol")
            return None
        if term.op in functors.INTEGRAL_OPS and "float" in (left, right):
            self.report(term.loc, f"type mismatch: '{term.op}' takes number or unsigned, "
                                  "not float")
            return None
        if left is None or left == "int":
            return right if right is not None else left
        if right is None or right == "int" or right == left:
            return left
        self.report(term.loc, f"type mismatch: arithmetic '{term.op}' mixes {left} and {right}")
        return None

    def aggregate(self, term: Aggregate) -> str | None:
        """Return an aggregate's type: count a number, mean a float, else its value's type."""
        if term.kind == "count":
            return "number"
        got = self.infer(term.target)
        if got == "symbol":
            self.report(term.loc, f"type mismatch: '{term.kind}' takes numbers, not symbols")
            return None
        if term.kind == "mean":
            return "float"
        return "number" if got == "int" else got

    def cast(self, term: Cast) -> str | None:
        """Return the primitive of `as(x, T)`, reporting a cast that would change primitive."""
        target = primitive_of(term.type, term.type_loc, self.types, self.report)
        inner = self.infer(term.term)
        if target == UNKNOWN:
            return None
        if inner is None or inner == target or (inner == "int" and target in NUMERIC):
            return target
        if {inner, target} == {"number", "unsigned"}:  # the same 64 bits, read the other way
            return target
        self.report(term.loc, f"as(..., {term.type}) casts a {inner} to {target}: only casts "
                              "within one primitive type are supported")
        return None


def fold(term: Term, report: Report) -> Const | None:
    """Return a constant expression evaluated to a Const (C-style / and %), or None on error."""
    if isinstance(term, Const):
        return term
    if isinstance(term, Call):
        return fold_call(term, report)
    if isinstance(term, Cast):
        return fold(term.term, report)
    if not isinstance(term, BinOp):
        return None
    left = fold(term.left, report)
    right = fold(term.right, report)
    if left is None or right is None:
        return None
    if left.kind == "symbol" or right.kind == "symbol":
        report(term.loc, f"arithmetic '{term.op}' on a symbol")
        return None
    kinds = (left.kind, right.kind)
    kind = "float" if "float" in kinds else "unsigned" if "unsigned" in kinds else "number"
    a, b, op = left.value, right.value, term.op
    if op not in ("+", "-", "*", "/", "%"):
        if kind == "float" and op in functors.INTEGRAL_OPS:
            report(term.loc, f"type mismatch: '{op}' takes number or unsigned, not float")
            return None
        value = functors.binary(op, a, b, kind)
        if value is None:
            report(term.loc, f"'{op}' has no value here (overflow or undefined)")
            return None
        return Const(functors.unsigned_value(value) if kind == "unsigned" else value, kind,
                     term.loc)
    if op in ("/", "%") and b == 0:
        report(term.loc, "division by zero")
        return None
    if kind == "unsigned":  # wraps modulo 2^64, as C's unsigned arithmetic does
        return Const(functors.unsigned_value(functors.unsigned_arith(op, a, b)), kind, term.loc)
    value = functors.c_arith(op, a, b, kind == "float")
    if kind == "number" and not INT64_MIN <= value <= INT64_MAX:
        # Checked at every step, so integers stay small enough to convert to float later.
        report(term.loc, f"integer overflow: {value} does not fit in 64 bits")
        return None
    return Const(float(value) if kind == "float" else value, kind, term.loc)


def fold_call(call: Call, report: Report) -> Const | None:
    """Return a functor over constants evaluated to a Const, or None after reporting why not."""
    args = [fold(a, report) for a in call.args]
    if any(a is None for a in args):
        return None
    kinds = ["int" if a.kind == "number" else a.kind for a in args]
    try:
        kind = functors.call_type(call.name, kinds)
    except functors.FunctorTypeError as e:
        report(call.loc, f"type mismatch: {e}")
        return None
    if call.name in ("range", "autoinc"):
        report(call.loc, f"'{call.name}' cannot stand in a fact")
        return None
    source = "number" if kinds and kinds[0] == "int" else (kinds[0] if kinds else None)
    value = functors.apply(call.name, [a.value for a in args], source, kind or "number")
    if value is None:
        report(call.loc, f"'{call.name}' has no value here (overflow or undefined)")
        return None
    return Const(value, "number" if kind == "unsigned" else kind, call.loc)
_PLAIN = {"number": "number", "unsigned": "number", "symbol": "symbol", "float": "float"}


def plain_kinds(decls: dict[str, Decl]) -> dict[str, tuple[list[str], tuple[int, ...]]]:
    """Return per relation the constant kinds a plain fact has, and its unsigned positions."""
    return {name: ([_PLAIN.get(t, "") for t in d.types],
                   tuple(i for i, t in enumerate(d.types) if t == "unsigned"))
            for name, d in decls.items()}


def plain_fact(rule: Rule, plain: dict) -> bool:
    """Return True for a lexer-fast fact whose constants fit their attributes as they are.

    Its integers have at most 18 digits and its floats are finite (the lexer's pattern), so
    kinds and unsigned signs are all there is to check; anything else takes `_check_rule`,
    which says what is wrong."""
    head = rule.heads[0]
    want = plain.get(head.relation)
    if want is None:
        return False
    kinds, unsigned = want
    args = head.args
    # The kinds in one C-level pass: this runs once per inline fact.
    if list(map(_kind, args)) != kinds:
        return False
    return not unsigned or all(args[i].value >= 0 for i in unsigned)


_kind = attrgetter("kind")
