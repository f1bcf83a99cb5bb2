"""`eqrel` relations lowered to rules: the smallest equivalence relation holding what the
program puts in (its facts, input and rules), as Soufflé keeps one in a union-find.

    r(x, x) :- r(x, _).          reflexive over its elements
    r(y, y) :- r(_, y).
    r(y, x) :- r(x, y).          symmetric
    r(x, z) :- r(x, y), r(y, z). transitive
"""

from __future__ import annotations

from levelflow.tasks.ast import Atom, Loc, Rule, Var, Wildcard
from levelflow.tasks.parser import Parsed
from levelflow.tasks.typecheck import Report


def eqrel_rules(parsed: Parsed, report: Report) -> list[Rule]:
    """Return the rules making each eqrel relation an equivalence; report a bad declaration."""
    decls = {d.name: d for d in reversed(parsed.decls)}  # the first declaration of a name
    out: list[Rule] = []
    for name, loc in parsed.eqrels:
        d = decls[name]
        if len(d.types) != 2 or d.types[0].name != d.types[1].name:
            report(loc, f"eqrel relation '{name}' must have two attributes of one type")
            continue
        out.extend(_rules(name, loc))
    return out


def _rules(name: str, loc: Loc) -> list[Rule]:
    x, y, z = (Var(v, loc) for v in ("x", "y", "z"))

    def r(a, b) -> Atom:
        return Atom(name, (a, b), loc)

    return [Rule((r(x, x),), (r(x, Wildcard(loc)),), loc),
            Rule((r(y, y),), (r(Wildcard(loc), y),), loc),
            Rule((r(y, x),), (r(x, y),), loc),
            Rule((r(x, z),), (r(x, y), r(y, z)), loc)]
