"""Soufflé's subtype order on user types, and the rule check it implies.

Each type stands for a set of *leaves*: a subtype `.type A <: B` (or `.number_type A`) is a leaf
of its own inside every type above it; a union `.type U = A | B` and an alias `.type U = A` hold
their members' leaves; a primitive holds everything of its kind (None below). So A <: B exactly
when A's leaves are within B's, and a value of two types lies in the intersection.

As in Soufflé, a variable takes the intersection of the types of the positive body atoms that
bind it (no value can be in two disjoint subtypes), and where it is written (a head) or looked up
without binding (a negation), that type must lie within the attribute's. Constants and
arithmetic have their primitive type only and are checked by `typecheck` alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from levelflow.tasks.ast import Atom, Cast, Loc, Rule, TypeDef, Var
from levelflow.tasks.parser import Parsed
from levelflow.tasks.typecheck import UNKNOWN, Report

Leaves = frozenset[str] | None  # None: the whole primitive


class Subtypes:
    """The leaves of every user type; `within` and `meet` answer for type names."""

    __slots__ = ("leaves",)

    def __init__(self, defs: Iterable[TypeDef], resolved: dict[str, str]) -> None:
        by_name = {d.name: d for d in defs if resolved.get(d.name, UNKNOWN) != UNKNOWN}
        below: dict[str, list[str]] = {}
        for d in by_name.values():
            if d.kind == "subtype":
                below.setdefault(d.bases[0].name, []).append(d.name)
        self.leaves: dict[str, Leaves] = {}

        def leaves(name: str, seen: frozenset[str]) -> Leaves:
            if name in self.leaves:
                return self.leaves[name]
            d = by_name.get(name)
            if d is None or name in seen:  # a primitive, or unresolved (reported already)
                return None
            seen = seen | {name}
            out: set[str] = set()
            if d.kind in ("subtype", "record", "adt"):  # a record type is a leaf of its own
                out.add(name)
                parts = [leaves(s, seen) for s in below.get(name, ())]
            else:
                parts = [leaves(b.name, seen) for b in d.bases]
            if any(p is None for p in parts):
                result: Leaves = None
            else:
                result = frozenset(out.union(*parts))
            self.leaves[name] = result
            return result

        for name in by_name:
            leaves(name, frozenset())

    def of(self, name: str) -> Leaves:
        """Return the leaves of a type name (None for a primitive or an unknown name)."""
        return self.leaves.get(name)


def check_subtypes(rule: Rule, attr_types: dict[str, tuple[str, ...]], subtypes: Subtypes,
                   report: Report) -> None:
    """Report each variable bound to disjoint types, or used where its type does not fit."""
    var_type: dict[str, tuple[str, Leaves, Loc | None]] = {}
    for _, atom, negated in rule.body_atoms():
        if negated:
            continue
        for arg, ty in _typed_args(atom, attr_types):
            if not isinstance(arg, Var):
                continue
            have = var_type.get(arg.name)
            mine = subtypes.of(ty)
            if have is None:
                var_type[arg.name] = (ty, mine, arg.loc)
                continue
            name, leaves, at = have
            if leaves is None or (mine is not None and mine <= leaves):
                var_type[arg.name] = (ty, mine, arg.loc)
            elif mine is not None and not (leaves <= mine):
                meet = leaves & mine
                if not meet:
                    report(arg.loc, f"type mismatch: variable '{arg.name}' is {ty} here but "
                                    f"{name} at {at.line}:{at.col} (no value is of both types)")
                    continue
                var_type[arg.name] = (f"{name} & {ty}", meet, at)
    negated = [atom for _, atom, neg in rule.body_atoms() if neg]
    for atom in list(rule.heads) + negated:
        for arg, ty in _typed_args(atom, attr_types):
            want = subtypes.of(ty)
            if want is None:
                continue
            got_name, got = _arg_type(arg, var_type, subtypes)
            if got_name is None or (got is not None and got <= want):
                continue
            report(arg.loc, f"type mismatch: {_shown(arg)} is {got_name} but the attribute of "
                            f"'{atom.relation}' is {ty} ({got_name} is not a subtype of {ty})")


def _typed_args(atom: Atom, attr_types: dict[str, tuple[str, ...]]):
    types = attr_types.get(atom.relation)
    if types is None or len(types) != len(atom.args):
        return ()
    return zip(atom.args, types, strict=True)


def _arg_type(arg, var_type, subtypes: Subtypes) -> tuple[str | None, Leaves]:
    """Return the (name, leaves) of a head or negated argument; name None when unknown."""
    if isinstance(arg, Cast):
        known = arg.type in subtypes.leaves  # an unknown name is reported by typecheck
        return (arg.type, subtypes.of(arg.type)) if known else (None, None)
    if isinstance(arg, Var) and arg.name in var_type:
        name, leaves, _ = var_type[arg.name]
        return name, leaves
    return None, None


def _shown(arg) -> str:
    return f"variable '{arg.name}'" if isinstance(arg, Var) else "the cast"


def check_program_subtypes(parsed: Parsed, types: dict[str, str], rules: tuple[Rule, ...],
                           report: Report) -> None:
    """Report variables whose user types clash (Soufflé's subtype rules: tasks/subtypes.py)."""
    subtypes = Subtypes(parsed.types, types)
    attr_types: dict[str, tuple[str, ...]] = {}
    for d in parsed.decls:
        attr_types.setdefault(d.name, tuple(t.name for t in d.types))
    for rule in rules:
        if not rule.is_fact:
            check_subtypes(rule, attr_types, subtypes, report)
