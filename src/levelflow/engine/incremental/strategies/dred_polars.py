"""Rank-based delete-and-rederive for one share of a task, inside one process (a Spark task).

dred.py's algorithm (its docstring states it and the rank invariant) over PolarsDRed's operations:
the share's state is in memory, so every step is a local join and the whole update is part of
one Spark job. Constant: the rules, the lower relations' new version and change, the base facts'
change. Produced: the share's new state, and per relation the ranked tuples removed (with their
old ranks) and added (with their new ranks); a tuple re-derived at a new rank is in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from levelflow.engine import rule_body
from levelflow.engine.guard import check_cancelled
from levelflow.engine.incremental.strategies.arranged import (
    RANK,
    Arranged,
    OldTuples,
    arrange,
    extended,
    live_rows,
    pairs_differing,
    state_of,
)
from levelflow.engine.incremental.strategies.arranged_lookups import (
    LiveLookups,
    Members,
    member_lookups,
)
from levelflow.engine.incremental.strategies.closure_epoch import (
    ClosureEpoch,
    closure_edges,
    planned_epoch,
)
from levelflow.engine.incremental.strategies.dred import delete_and_rederive
from levelflow.engine.incremental.strategies.rewrites import (
    rederive_rule,
    stand_in_decls,
    support_rule,
)
from levelflow.engine.plans.closure import run_closure
from levelflow.engine.plans.columnar import body_rows, empty_frame, head_rows
from levelflow.engine.plans.few_rows import without
from levelflow.engine.plans.fixpoint import Relation, Share, TaskOutcome, iterate, run_task
from levelflow.engine.rules import CompileError, reads_own, rule_heads
from levelflow.tasks.ast import Decl, Rule


@dataclass(slots=True)
class Inputs:
    """What one epoch brings a task's share: the lower relations and base facts, new and Δ."""

    rules: tuple[Rule, ...]  # the task's rules with a body (symbols encoded)
    names: tuple[str, ...]  # the task's relations
    decls: Mapping[str, Decl]
    lower_new: Mapping[str, pl.DataFrame]
    lower_plus: Mapping[str, pl.DataFrame]
    lower_minus: Mapping[str, pl.DataFrame]
    facts_new: Mapping[str, pl.DataFrame]  # base and program facts of the task's relations
    facts_plus: Mapping[str, pl.DataFrame]
    facts_minus: Mapping[str, pl.DataFrame]
    share: Share | None = None


@dataclass(slots=True)
class Outcome:
    """An update's result: the new state, the ranked tuples removed and added, rounds run."""

    state: Arranged
    removed: dict[str, pl.DataFrame]
    added: dict[str, pl.DataFrame]
    rounds: int
    # Per relation, which removed and which added rows are a net change (a tuple gone or new,
    # not re-ranked), where the update knows it (None: dred_share finds them by a join).
    net: dict[str, tuple[np.ndarray, np.ndarray] | None] | None = None



def _cols(df: pl.DataFrame) -> list[str]:
    return [c for c in df.columns if c != RANK]


def _in_share(inp: Inputs, name: str, df: pl.DataFrame) -> pl.DataFrame:
    return df if inp.share is None or not df.height else inp.share(name, df)


def _heads(rule: Rule, decls, frames, names, first=None, ops=None
           ) -> list[tuple[str, pl.DataFrame]]:
    """Return (relation, head tuples) for each head of `rule` among `names`."""
    body, types = (body_rows(rule, decls, frames, first=first) if ops is None
                   else rule_body.body_rows(ops, rule, decls, frames, first))
    return [(h.relation, head_rows(body, types, h, decls[h.relation]))
            for h in rule_heads(rule, names)]


def _through_lower(inp: Inputs, deltas: Mapping[str, pl.DataFrame],
                   frames: Mapping[str, pl.DataFrame]) -> dict[str, list[pl.DataFrame]]:
    """Return per relation the heads of derivations through a lower relation's delta."""
    out: dict[str, list[pl.DataFrame]] = {n: [] for n in inp.names}
    for rule in inp.rules:
        atoms = rule.body_atoms()
        for i, atom, neg in atoms:
            d = deltas.get(atom.relation)
            if neg or atom.relation in out or d is None or not d.height:
                continue
            at = {j: frames[a.relation] for j, a, _ in atoms}
            at[i] = d
            for name, heads in _heads(rule, inp.decls, at, inp.names, first=i):
                out[name].append(heads)
    return out


def _candidates(olds: dict[str, OldTuples], inp: Inputs, seeds: dict) -> dict:
    """Return per relation the distinct old tuples among the seeds not yet suspect, ranked."""
    return {n: old.among(_in_share(inp, n, pl.concat(seeds[n]))) if seeds[n]
            else old.ranked.clear() for n, old in olds.items()}


def _rank_last(df: pl.DataFrame) -> pl.DataFrame:
    """Return ranked tuples shaped as a ranked stand-in: the columns, the rank as c<arity>."""
    return df.rename({RANK: f"c{len(df.columns) - 1}"})


def _supported(olds: dict[str, OldTuples], inp: Inputs, cands: dict) -> dict:
    """Return per relation the candidates still facts or derivable from smaller-rank tuples."""
    decls = stand_in_decls(inp.decls, inp.names)
    out: dict[str, list[pl.DataFrame]] = {n: [] for n in inp.names}
    for n, c in cands.items():
        facts = inp.facts_new.get(n)
        if c.height and facts is not None and facts.height:
            out[n].append(c.drop(RANK).join(facts, on=_cols(c), how="semi"))
    live: dict[str, pl.DataFrame] = {}
    # Non-recursive rules first (their checks join no state), and a candidate one rule
    # supports is not checked by the next: one derivation is enough.
    left = dict(cands)
    for rule in sorted(inp.rules, key=lambda r: reads_own(r, inp.names)):
        head = rule.heads[0]
        c = left[head.relation]
        if out[head.relation] and c.height:
            c = c.join(out[head.relation][-1], on=_cols(c), how="anti")
            left[head.relation] = c
        if not c.height:
            continue
        prefixed, live_at, other_at = support_rule(rule, inp.names)
        frames, lookups = {0: _rank_last(c)}, {}
        for pos, n in live_at.items():
            spec = olds[n].lookup(prefixed.body[pos])
            if spec is not None:
                lookups[pos], frames[pos] = spec, _rank_last(olds[n].ranked)
                continue
            if n not in live:
                live[n] = _rank_last(olds[n].live())
            frames[pos] = live[n]
        for pos, n in other_at.items():
            frames[pos] = inp.lower_new[n]
        try:
            (_, heads), = _heads(prefixed, decls, frames, (head.relation,), first=0,
                                 ops=LiveLookups(frames, lookups))
        except CompileError:
            continue  # a head the prefix cannot bind: no support found, the tuple is suspect
        out[head.relation].append(heads)
    return out


class _Kept:
    """The tuples each relation keeps after the deletion phase: the old frame (tombstones
    included where the tuples pack), its sorted keys and rows; the live tuples are built only
    where a join reads a relation whole."""

    def __init__(self, split: Mapping[str, tuple]) -> None:
        self.split = split
        self._live: dict[str, pl.DataFrame] = {}

    def frame(self, name: str) -> pl.DataFrame:
        return self.split[name][0].drop(RANK)

    def keys(self, name: str) -> np.ndarray | None:
        return self.split[name][2]

    def live(self, name: str) -> pl.DataFrame:
        """Return the relation's kept tuples, tombstones left out."""
        if name not in self._live:
            ranked, _, keys, rows = self.split[name]
            self._live[name] = live_rows(ranked, keys, rows).drop(RANK)
        return self._live[name]


class _Frames(Mapping):
    """Relation name -> the tuples a join reads: the kept ones (live), else the lower
    relations' new version; each kept relation built on first use."""

    def __init__(self, inp: Inputs, kept: _Kept) -> None:
        self.inp, self.kept = inp, kept

    def __getitem__(self, name: str) -> pl.DataFrame:
        return self.kept.live(name) if name in self.kept.split else self.inp.lower_new[name]

    def __iter__(self):
        return iter({**self.inp.lower_new, **self.kept.split})

    def __len__(self) -> int:
        return len({**self.inp.lower_new, **self.kept.split})


def _rederived(inp: Inputs, rule: Rule, suspects: pl.DataFrame, kept: _Kept) -> pl.DataFrame:
    """Return the suspects of the rule's head that it derives from the kept and new tuples."""
    head = rule.heads[0]
    decls = stand_in_decls(inp.decls, inp.names)
    atoms = rule.body_atoms()
    frames = _Frames(inp, kept)
    lookups = member_lookups(rule, inp.names, {n: kept.keys(n) for n in inp.names}, 1)
    # An atom Members searches by key reads the frame with its tombstones (no copy).
    at = {i + 1: kept.frame(a.relation) if i + 1 in lookups else frames[a.relation]
          for i, a, _ in atoms}
    at[0] = suspects
    try:
        (_, heads), = _heads(rederive_rule(rule, head), decls, at, (head.relation,), first=0,
                             ops=Members(at, lookups))
        return heads
    except CompileError:
        pass  # a head expression the prefix cannot bind: evaluate the rule plainly
    at = {i: frames[a.relation] for i, a, _ in atoms}
    (_, heads), = _heads(rule, inp.decls, at, (head.relation,))
    return heads.join(suspects, on=heads.columns, how="semi")


class PolarsDRed:
    """DRed's operations over one share's Polars frames (dred.DRedOps): its old tuples marked
    suspect in place (arranged.OldTuples), every step a local join."""

    def __init__(self, state: Arranged, inp: Inputs) -> None:
        self.inp, self.names, self.rules = inp, inp.names, inp.rules
        self.olds = {n: OldTuples(state.ranked[n], state.keys[n], state.rows[n])
                     for n in inp.names}
        self.old = {**{n: old_version(inp, n) for n in inp.lower_new},
                    **{n: state.ranked[n].drop(RANK) for n in inp.names}}
        # A support check reads the new lower relations, so a tuple it kept may lean on a lower
        # tuple inserted this epoch: a new suspect's heads are found through old and new ones.
        self.either = {**{n: pl.concat([self.old[n], inp.lower_plus[n]])
                          if n in inp.lower_plus else self.old[n] for n in inp.lower_new},
                       **{n: self.old[n] for n in inp.names}}
        self.split: dict[str, tuple] = {}  # per relation OldTuples.split(), set by keep
        self.kept: _Kept | None = None

    def empty(self, frame: pl.DataFrame) -> bool:
        return not frame.height

    def check_cancel(self) -> None:
        # A worker's update is cancelled with its Spark job; one in the driver checks the flag.
        check_cancelled()

    def removed_facts(self, name: str) -> list[pl.DataFrame]:
        return [self.inp.facts_minus[name]] if name in self.inp.facts_minus else []

    def inserted_facts(self, name: str) -> list[pl.DataFrame]:
        return [self.inp.facts_plus[name]] if name in self.inp.facts_plus else []

    def through_lower(self, deleting: bool) -> dict[str, list[pl.DataFrame]]:
        if deleting:
            return _through_lower(self.inp, self.inp.lower_minus, self.old)
        return _through_lower(self.inp, self.inp.lower_plus, _Frames(self.inp, self.kept))

    def candidates(self, name: str, seeds: list[pl.DataFrame]) -> pl.DataFrame:
        old = self.olds[name]
        return old.among(_in_share(self.inp, name, pl.concat(seeds))) if seeds \
            else old.ranked.clear()

    def supported(self, cands: dict) -> dict[str, list[pl.DataFrame]]:
        return _supported(self.olds, self.inp, cands)

    def mark_lost(self, name: str, cand: pl.DataFrame, kept: list[pl.DataFrame]
                  ) -> pl.DataFrame:
        lost = cand.drop(RANK)
        if kept and lost.height:
            lost = lost.join(pl.concat(kept).unique(), on=lost.columns, how="anti")
        self.olds[name].mark(lost)
        return lost

    def through_suspect(self, rule: Rule, pos: int, fresh: pl.DataFrame):
        at = {k: self.either[a.relation] for k, a, _ in rule.body_atoms()}
        at[pos] = fresh
        return _heads(rule, self.inp.decls, at, self.names, first=pos)

    def keep(self) -> dict[str, pl.DataFrame]:
        self.split = {n: old.split() for n, old in self.olds.items()}
        self.kept = _Kept(self.split)
        return {n: old.suspects for n, old in self.olds.items()}

    def still_facts(self, name: str, suspects: pl.DataFrame) -> list[pl.DataFrame]:
        facts = self.inp.facts_new.get(name)
        return [] if facts is None else [suspects.join(facts, on=suspects.columns, how="semi")]

    def rederived(self, rule: Rule, suspects: pl.DataFrame) -> pl.DataFrame:
        return _rederived(self.inp, rule, suspects, self.kept)


# A deletion of at least RECOMPUTE_FRACTION of what the task reads, in a share of at most
# RECOMPUTE_ROWS tuples, recomputes the share instead: there the support checks' rounds cost
# more than materializing (about 7 ms a round of small joins; 10% of a 1,000-edge graph's
# edges deleted: 74-91 ms against 19-29; 10% of a 1,000-edge R-MAT graph's, 87k tuples: 60 ms
# against 35). Larger shares, or smaller deletions, keep DRed: a recompute costs the share.
RECOMPUTE_FRACTION = 0.05
RECOMPUTE_ROWS = 200_000


def update(state: Arranged, inp: Inputs, recompute_rows: int = RECOMPUTE_ROWS) -> Outcome:
    """Return the share's state after the epoch's change, with what it removed and added."""
    if _recompute_cheaper(state, inp, recompute_rows):
        return _recomputed(state, inp)
    closure = _closure_epoch(state, inp)
    return _dred(state, inp) if closure is None else Outcome(*closure.run())


def _dred(state: Arranged, inp: Inputs) -> Outcome:
    """Return the epoch by delete-and-rederive over the share's frames."""
    names = inp.names
    top = state.top()
    ops = PolarsDRed(state, inp)
    seeds, rounds = delete_and_rederive(ops)
    split, kept = ops.split, ops.kept
    rels = {}
    for n in names:
        rel = Relation(inp.decls[n], empty_frame(inp.decls[n]),
                       (lambda n=n: kept.live(n)) if split[n][2] is not None else kept.frame(n),
                       split[n][2])
        # The seeds not kept are the first round: new_tuples looks them up by key.
        rel.advance(rel.new_tuples([_in_share(inp, n, df) for df in seeds[n]]))
        rels[n] = rel
    found = TaskOutcome(rounds=[{n: rel.recent for n, rel in rels.items()}],
                        rows={n: rel.recent.height for n, rel in rels.items()})
    iterate([r for r in inp.rules if reads_own(r, names)], rels, inp.decls, inp.lower_new, found)
    added = _ranked_above(found, names, top)
    state = state_of({n: extended(ranked, keys, rows, added[n])
                       for n, (ranked, _, keys, rows) in split.items()})
    return Outcome(state, {n: split[n][1] for n in names}, added, rounds + found.iterations)


def _closure_epoch(state: Arranged, inp: Inputs) -> ClosureEpoch | None:
    """Return the epoch of a left-linear closure over dense tables of the sources it touches
    (closure_epoch), when an edge is deleted; else None. It costs 0.5-0.9x DRed over frames
    off cycles (bench_shapes at 1M pairs: a layered DAG's 10-edge deletions 0.04 s against
    0.06, its 10% change 0.19 s against 0.43; R-MAT's the same) and 2-7x less on them
    (random graph, 40-57k suspects, 0.07-0.17 s against 0.2-0.28; rings of components,
    140-530k, 0.13-0.33 s against 0.5-1.3)."""
    edge = closure_edges(inp.rules, inp.names)
    if edge is None:
        return None
    (name,) = inp.names
    minus = inp.lower_minus.get(edge)
    if minus is None or not minus.height or any(
            name in facts and facts[name].height
            for facts in (inp.facts_new, inp.facts_plus, inp.facts_minus)):
        return None
    return planned_epoch(state, name, old_version(inp, edge), inp.lower_new[edge], minus,
                          inp.lower_plus.get(edge, minus.clear()), inp.share)


def _ranked_above(found: TaskOutcome, names, top: int) -> dict[str, pl.DataFrame]:
    """Return a fixpoint's tuples ranked by its rounds, above every rank up to `top`."""
    return {n: found.relation(n, ranked=True).with_columns(pl.col(RANK) + (top + 1))
            for n in names}


def deleted_rows(inp: Inputs) -> int:
    """Return how many lower and own base tuples the epoch deletes."""
    return sum(df.height for df in (*inp.lower_minus.values(), *inp.facts_minus.values()))


def _recompute_cheaper(state: Arranged, inp: Inputs, recompute_rows: int) -> bool:
    """Return whether the share is small and the deletion large enough to recompute it."""
    deleted = deleted_rows(inp)
    read = sum(df.height for df in (*inp.lower_new.values(), *inp.facts_new.values()))
    size = sum(state.size(n) for n in state.ranked)
    return deleted > 0 and size <= recompute_rows and deleted >= RECOMPUTE_FRACTION * read


def _recomputed(state: Arranged, inp: Inputs) -> Outcome:
    """Return the share recomputed from the new inputs, every tuple ranked by the recompute's
    rounds (a valid ranking of the whole new state: a kept tuple's old rank may have no
    derivation below it any more). The change is the (tuple, rank) pairs that differ: a tuple
    kept at its rank is not sent back. A pair can come back after an earlier epoch removed it;
    the Spark-side copy (arranged.Log) cancels the two."""
    # A left-linear closure is recomputed by the native closure operator (BFS layers, the
    # same ranks): 2-9x faster than semi-naive rounds at 1M pairs (bench_shapes' graphs).
    evaluate = run_task if closure_edges(inp.rules, inp.names) is None else run_closure
    out = evaluate(inp.rules, inp.names, inp.decls, inp.lower_new, inp.facts_new, inp.share)
    new = arrange({n: out.relation(n, ranked=True) for n in inp.names})
    removed, added, net = {}, {}, {}
    for n in inp.names:
        removed[n], added[n], net[n] = pairs_differing(state, new, n)
    return Outcome(new, removed, added, out.iterations, net)


def old_version(inp: Inputs, name: str) -> pl.DataFrame:
    """Return a lower relation's old version: new minus its insertions, plus its deletions."""
    new, plus, minus = inp.lower_new[name], inp.lower_plus.get(name), inp.lower_minus.get(name)
    if plus is not None and plus.height:
        new = without(new, plus)
    if minus is not None and minus.height:
        new = pl.concat([new, minus])
    return new
