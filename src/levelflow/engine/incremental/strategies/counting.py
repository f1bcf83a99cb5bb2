"""Counting, written once: which delta terms a non-recursive rule's change is the sum of.

A tuple's count is its number of derivations: one per base fact, per program fact, and per row
a rule body yields. For a rule R :- A1, ..., An the change is the telescoping sum over changed
atoms k of  new(A1..Ak-1) × Δ(Ak) × old(Ak+1..An);  a negated atom !A contributes -Δ of A's
projection on its non-wildcard positions (an insertion deletes). Tuples whose count crosses
zero are the net Δ±. The backends evaluate the terms: `counting_spark` over DataFrames,
`counting_polars` over Polars frames (in the driver, over the counts it keeps).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from levelflow.engine.incremental.strategies.rewrites import as_positive
from levelflow.tasks.ast import Atom, Rule, Wildcard

# Each changed atom gives two terms: its gains (deleting False) add, its losses subtract.
SIGNS = ((False, 1), (True, -1))


@dataclass(frozen=True, slots=True)
class DeltaTerms:
    """A changed atom of a rule: the terms new(A1..Ai-1) × Δ±(Ai) × old(Ai+1..An)."""

    rule: Rule  # the rule to evaluate: the changed atom made positive if it was negated
    pos: int  # the changed atom's body position, which reads its Δ
    atom: Atom
    negated: bool
    others: tuple[tuple[int, str, bool], ...]  # (position, relation, reads its new version)


def delta_terms(rule: Rule, changed: Callable[[str], bool]) -> Iterator[DeltaTerms]:
    """Yield the terms of each atom of `rule` (one with a body) whose relation `changed`."""
    atoms = rule.body_atoms()
    for i, atom, neg in atoms:
        if changed(atom.relation):
            yield DeltaTerms(as_positive(rule, i) if neg else rule, i, atom, neg,
                             tuple((j, a.relation, j < i) for j, a, _ in atoms if j != i))


def versions_read(rules) -> set[str]:
    """Return the relations some delta term of `rules` reads whole (a version, not a Δ): every
    atom's of a body of two atoms or more, and a negated atom's with a wildcard (its
    projection's change is checked against the version)."""
    out = set()
    for rule in rules:
        atoms = rule.body_atoms()
        if len(atoms) > 1:
            out |= {a.relation for _, a, _ in atoms}
        out |= {a.relation for _, a, neg in atoms
                if neg and any(isinstance(t, Wildcard) for t in a.args)}
    return out
