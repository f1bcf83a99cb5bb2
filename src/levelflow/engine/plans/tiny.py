"""When a fixpoint runs its rounds one tuple at a time, and how their tuples go back to frames.

A stretch starts at a round whose delta (all relations) has at most ENTER tuples and runs
TupleRounds until a delta exceeds LEAVE, a round visits more than VISITS tuples (a scan that
frames do better: frames from then on) or nothing is new. Its tuples then join the frame
relations (keys, stable, recent) and the outcome, ranked by their rounds. The tuple state is
kept between stretches; what frame rounds found in between is added to it on the next entry.
The first entry copies the relations into tuple sets, so a fixpoint holding more than
ENTRY_ROWS tuples then (a warm epoch over a large relation) stays on frames.
Constant: the rules, the lower relations. Changes: the tuple state, the frames found since.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import polars as pl

from levelflow.engine.guard import check_cancelled
from levelflow.engine.plans.columnar import frame_schema
from levelflow.engine.plans.tuple_terms import runs_tuples
from levelflow.engine.plans.tuples import Own, TupleRounds
from levelflow.tasks.ast import Decl

ENTER = 32
LEAVE = 512
VISITS = 100_000
# Entering copies the relations a task holds and reads into tuple sets: past this many tuples
# (or a resumed relation whose stable part is not built) that copy costs more than frame rounds.
ENTRY_ROWS = 20_000
NO_FRAMES = MappingProxyType({})  # a round run one tuple at a time, in TaskOutcome.rounds

# A stretch of rounds checks the task's limit (and a driver task its cancel flag) this often:
# a round costs microseconds, a check a dict's sum.
CHECK_EVERY = 256


class TinyRounds:
    """The tuple-at-a-time side of one fixpoint (fixpoint.iterate asks it when to run)."""

    __slots__ = ("rules", "rels", "decls", "lower", "outcome", "state", "since", "off", "limit")

    def __init__(self, rules, rels: Mapping, decls: Mapping[str, Decl],
                 lower: Mapping[str, pl.DataFrame], outcome, limit=None) -> None:
        self.rules, self.rels, self.decls = rules, rels, decls
        self.lower, self.outcome = lower, outcome
        self.limit = limit  # checked every CHECK_EVERY rounds (guard.Limit; Watched: cancel)
        self.state: TupleRounds | None = None
        self.since: dict[str, list[pl.DataFrame]] = {n: [] for n in rels}
        self.off = not runs_tuples(rules)  # functors stay on frames, as both backends run them

    def usable(self) -> bool:
        """Return whether the next round should run one tuple at a time."""
        if self.off or sum(r.recent.height for r in self.rels.values()) > ENTER:
            return False
        if self.state is None and not self._cheap_to_enter():
            self.off = True
            return False
        return True

    def _cheap_to_enter(self) -> bool:
        """Return whether the tuples a first entry copies are at most ENTRY_ROWS."""
        heights = [r.height() for r in self.rels.values()]
        if None in heights:
            return False
        read = {a.relation for rule in self.rules for _, a, _ in rule.body_atoms()}
        lower = sum(self.lower[n].height for n in read if n not in self.rels)
        return sum(heights) + lower <= ENTRY_ROWS

    def missed(self, found: Mapping[str, pl.DataFrame]) -> None:
        """Note a frame round's new tuples (the tuple state takes them on its next entry)."""
        if self.state is not None:
            for name, df in found.items():
                if df.height:
                    self.since[name].append(df)

    def _enter(self) -> TupleRounds:
        if self.state is None:
            own = {n: Own(set(r.full().rows()), r.recent.rows()) for n, r in self.rels.items()}
            read = {a.relation for rule in self.rules for _, a, _ in rule.body_atoms()}
            lower = {n: self.lower[n].select(list(frame_schema(self.decls[n]))).rows()
                     for n in read if n not in own}
            self.state = TupleRounds(self.rules, self.decls, own, lower)
            return self.state
        for name, own in self.state.own.items():
            own.add([t for df in self.since[name] for t in df.rows()])
            own.recent, own.recent_set = self.rels[name].recent.rows(), None
            self.since[name] = []
        return self.state

    def stretch(self) -> None:
        """Run rounds one tuple at a time while they stay tiny; hand their tuples back."""
        state, outcome = self._enter(), self.outcome
        first = outcome.iterations

        def check() -> None:  # every CHECK_EVERY rounds: cancelled, or past the limit
            check_cancelled()
            if self.limit is not None:
                self.limit.check(sum(outcome.rows.values())
                                 + sum(len(own.log) for own in state.own.values()))
        last, self.off = state.run(first, LEAVE, VISITS, CHECK_EVERY, check)
        outcome.iterations = last
        outcome.rounds.extend([NO_FRAMES] * (last - first))
        self._hand_back({name: own.taken() for name, own in state.own.items()})

    def _hand_back(self, found: Mapping[str, tuple[list, list[int]]]) -> None:
        """Add a stretch's tuples (and the round of each) to the frame relations and the
        outcome: the last round's are their recent."""
        for name, rel in self.rels.items():
            schema = frame_schema(self.decls[name])
            tuples, ranks = found[name]
            rows = pl.DataFrame(tuples, schema=schema, orient="row")
            self.outcome.rows[name] += rows.height
            if rows.height:
                self.outcome.ranked.setdefault(name, []).append(
                    rows.with_columns(pl.Series("_it", ranks, pl.Int64)))
                rel.new_tuples([rows])  # remembers their keys; all of them are new
            last = len(self.state.own[name].recent)
            rel.advance(rows.head(rows.height - last))
            rel.advance(rows.tail(last) if last else rows.clear())
