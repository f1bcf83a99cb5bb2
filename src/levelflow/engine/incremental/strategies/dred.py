"""Delete-and-rederive with ranks, written once over the operations a backend supplies.

Every maintained tuple carries a rank (`_it`): the round it was found in. Invariant: a tuple
of rank r > 0 has a derivation from tuples of rank < r (facts and rules over lower relations
give rank 0). That is what Soufflé's incremental mode records with `@iteration`.

1. Suspects (`find_suspects`). Candidates are the old tuples that lose a derivation: removed
   base facts, heads of derivations through a lower relation's Δ-, then heads of derivations
   through a new suspect. A candidate stays if it is still a base or program fact, or has a
   derivation from the new lower relations and own tuples of smaller rank that are not
   suspect; the others become suspects. By induction on rank every non-suspect tuple is still
   derivable, and one that leaned on a tuple which later turns suspect is a candidate again in
   the next round. Plain DRed deletes everything downstream of a removed fact; in a dense
   closure that is most of the relation, here it is the tuples that really lost their support.
2. S' = old - suspects (`DRedOps.keep`).
3. Re-derive suspects from S' and the new lower relations (the rule's body prefixed with the
   suspect tuple, so only its bindings are joined), plus insertion seeds: Δ+ of lower
   relations and base facts (`insert_seeds`).
4. The engine's semi-naive fixpoint from stable S' (`DRedOps.resume`). Round k of it gets rank
   top + 1 + k, where top is the highest rank of any relation of the task (the relations of a
   task derive from each other, so they share one rank scale), so the invariant holds for the
   next epoch.

The backends: `dred_spark.SparkDRed` over DataFrames (the task's relations on Spark, each step
a job) and `dred_polars.PolarsDRed` over one share's `arranged` state in a Python worker.
A frame here is whatever the backend holds rows in; the algorithm only asks whether it is empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from levelflow.engine.rules import reads_own
from levelflow.tasks.ast import Rule

Frame = Any  # the backend's rows: a DataFrame and its row count, a Polars frame


class DRedOps(Protocol):
    """What a backend supplies: the joins and set operations of each phase over its frames."""

    names: Sequence[str]  # the task's relations
    rules: Sequence[Rule]  # its rules with a body

    def empty(self, frame: Frame) -> bool:
        """Return whether the frame holds no row."""

    def check_cancel(self) -> None:
        """Raise if the update was cancelled (the elastic switch fired)."""

    def removed_facts(self, name: str) -> list[Frame]:
        """Return the relation's base facts removed this epoch (the first candidates)."""

    def through_lower(self, deleting: bool) -> dict[str, list[Frame]]:
        """Return per relation the heads of derivations through a lower relation's change:
        its Δ- over the old versions (`deleting`), else its Δ+ over S' and the new ones."""

    def candidates(self, name: str, seeds: list[Frame]) -> Frame:
        """Return the distinct old tuples among `seeds` not yet suspect, with their ranks."""

    def supported(self, cands: dict[str, Frame]) -> dict[str, list[Frame]]:
        """Return per relation the candidates still facts or derivable from smaller ranks."""

    def mark_lost(self, name: str, cand: Frame, kept: list[Frame]) -> Frame:
        """Mark the candidates not `kept` as suspect and return them."""

    def through_suspect(self, rule: Rule, pos: int, fresh: Frame
                        ) -> Iterable[tuple[str, Frame]]:
        """Return (relation, heads) of the rule's old derivations whose atom `pos` reads a
        new suspect."""

    def keep(self) -> dict[str, Frame]:
        """Set S' = old - suspects per relation; return the suspects per relation."""

    def inserted_facts(self, name: str) -> list[Frame]:
        """Return the relation's base facts inserted this epoch."""

    def still_facts(self, name: str, suspects: Frame) -> list[Frame]:
        """Return those suspects still base or program facts."""

    def rederived(self, rule: Rule, suspects: Frame) -> Frame:
        """Return the suspects of the rule's head it derives from S' and the new lower
        relations."""


def find_suspects(ops: DRedOps) -> int:
    """Mark the old tuples that may have lost every derivation as suspect; return the rounds."""
    names = ops.names
    recursive = [r for r in ops.rules if reads_own(r, names)]
    seeds = {n: ops.removed_facts(n) for n in names}
    for n, heads in ops.through_lower(deleting=True).items():
        seeds[n] += heads
    cands = {n: ops.candidates(n, seeds[n]) for n in names}
    rounds = 0
    while not all(ops.empty(c) for c in cands.values()):
        ops.check_cancel()
        rounds += 1
        kept = ops.supported(cands)
        fresh = {n: ops.mark_lost(n, c, kept[n]) for n, c in cands.items()}
        # The next candidates: heads of old derivations that use a new suspect.
        nxt: dict[str, list[Frame]] = {n: [] for n in names}
        for rule in recursive:
            for j, atom, neg in rule.body_atoms():
                if neg or atom.relation not in fresh or ops.empty(fresh[atom.relation]):
                    continue
                for name, heads in ops.through_suspect(rule, j, fresh[atom.relation]):
                    nxt[name].append(heads)
        cands = {n: ops.candidates(n, nxt[n]) for n in names}
    return rounds


def insert_seeds(ops: DRedOps, suspects: dict[str, Frame]) -> dict[str, list[Frame]]:
    """Return per relation what the fixpoint restarts from: inserted base facts, suspects
    still facts or re-derived from S' and the new lower relations, and the heads of
    derivations through the lower relations' insertions."""
    seeds: dict[str, list[Frame]] = {n: [] for n in ops.names}
    for n in ops.names:
        seeds[n] += ops.inserted_facts(n)
        if not ops.empty(suspects[n]):
            seeds[n] += ops.still_facts(n, suspects[n])
    for rule in ops.rules:
        head = rule.heads[0].relation
        if not ops.empty(suspects[head]):
            seeds[head].append(ops.rederived(rule, suspects[head]))
    for n, heads in ops.through_lower(deleting=False).items():
        seeds[n] += heads
    return seeds


def delete_and_rederive(ops: DRedOps) -> tuple[dict[str, list[Frame]], int]:
    """Return the insertion seeds and the rounds of phases 1-3; the backend resumes its
    fixpoint from S' and the seeds (phase 4), ranking above its top."""
    rounds = find_suspects(ops)
    suspects = ops.keep()
    ops.check_cancel()
    seeds = insert_seeds(ops, suspects)
    ops.check_cancel()
    return seeds, rounds
