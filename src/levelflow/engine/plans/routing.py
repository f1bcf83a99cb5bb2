"""Where the distributed plan keeps each relation: hash-partitioned copies, and each rule's pivot.

A recursive task's relations are split over P Python workers. Every rule variant (a base rule,
or a recursive rule with its delta at one of its own atoms) is joined on one pivot variable of
that atom: each atom holding the pivot reads a copy of its relation hash-partitioned on the
pivot's column, so the join is local to each partition; a lower relation without it is
replicated to every partition (an own relation without it: the plan does not apply). A derived
tuple goes to the owner of each copy of its relation (by the hash of that copy's column), which
drops what it already holds: the next round's delta, per copy, the same on every copy. So each
round moves only new candidate tuples, as BigDatalog's and RaSQL's co-partitioned recursion
does; the join order and the rounds are fixpoint.py's. Pure: no Spark, no Polars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from levelflow.engine.plans.plan_error import PlanError
from levelflow.engine.rules import reads_own
from levelflow.tasks.ast import Atom, Decl, Rule, Var

Copy = tuple[str, "int | None"]  # (relation, hashed column), None: replicated


@dataclass(frozen=True, slots=True)
class Variant:
    """One way a rule runs: its delta atom (None: a base rule) and the copy each atom reads."""

    rule: int  # index into the task's rules with a body
    delta: int | None  # body position reading the delta
    reads: tuple[tuple[int, int], ...]  # (body position, copy id)
    own: tuple[int, ...]  # body positions of the task's own relations, in order


@dataclass(frozen=True, slots=True)
class Routing:
    """The copies a distributed task keeps and the variants that read them."""

    copies: tuple[Copy, ...]  # copy id -> (relation, column)
    variants: tuple[Variant, ...]
    primary: dict[str, int]  # own relation -> the copy its tuples are output from

    def copies_of(self, name: str) -> list[int]:
        """Return the ids of a relation's copies."""
        return [i for i, (n, _) in enumerate(self.copies) if n == name]


def _columns(atom: Atom, var: str) -> list[int]:
    return [j for j, a in enumerate(atom.args) if isinstance(a, Var) and a.name == var]


def _pivot(rule: Rule, names, candidates: list[str]) -> tuple[str, dict[int, int | None]] | None:
    """Return (pivot variable, body position -> hashed column or None) of the candidate that
    replicates fewest atoms; None if every candidate would replicate an own relation."""
    best = None
    for var in candidates:
        cols: dict[int, int | None] = {}
        for i, atom, _ in rule.body_atoms():
            found = _columns(atom, var)
            if not found and atom.relation in names:
                break
            cols[i] = found[0] if found else None
        else:
            replicated = sum(c is None for c in cols.values())
            if best is None or replicated < best[0]:
                best = (replicated, var, cols)
    return None if best is None else (best[1], best[2])


def _vars(atom: Atom) -> list[str]:
    out = []
    for a in atom.args:
        if isinstance(a, Var) and not a.name.startswith("_") and a.name not in out:
            out.append(a.name)
    return out


def routing(rules: tuple[Rule, ...], names: tuple[str, ...], decls: Mapping[str, Decl],
            task: str) -> Routing:
    """Return the task's routing; PlanError (one line naming the task) where it has none."""
    if any(decls[n].arity == 0 for n in names):
        raise PlanError(f"task {task}: the distributed plan does not apply (a nullary "
                        f"relation has no column to partition on)")
    if any(decls[n].choice for n in names):
        raise PlanError(f"task {task}: the distributed plan does not apply (choice-domain "
                        f"keeps its choices in one process)")
    copies: list[Copy] = []

    def copy(c: Copy) -> int:
        if c not in copies:
            copies.append(c)
        return copies.index(c)

    variants = []
    for r, rule in enumerate(rules):
        atoms = [(i, a) for i, a, neg in rule.body_atoms() if not neg]
        own = tuple(i for i, a in atoms if a.relation in names)
        deltas = own if reads_own(rule, names) else (None,)
        for d in deltas:
            if d is None:
                cands = [v for _, a in atoms for v in _vars(a)]
            else:
                cands = _vars(rule.body[d])
            found = _pivot(rule, names, list(dict.fromkeys(cands)))
            if found is None:
                line = f" at line {rule.loc.line}" if rule.loc else ""
                raise PlanError(f"task {task}: the distributed plan does not apply (the rule"
                                f"{line} joins its own relations on no one variable)")
            _, cols = found
            reads = tuple((i, copy((atom.relation, cols[i]))) for i, atom, _ in rule.body_atoms())
            variants.append(Variant(r, d, reads, own))
    for n in names:  # a relation no variant reads still needs one copy to live in
        if not any(c[0] == n for c in copies):
            copy((n, 0))
    primary = {n: next(i for i, c in enumerate(copies) if c[0] == n) for n in names}
    return Routing(tuple(copies), tuple(variants), primary)
