"""The Python side of the distributed plan: one partition of a task's fixpoint, in supersteps.

Runs in each task of one barrier Spark job (in_spark.run_packed with `layout.routing`). The
partition reads its slice of the packed inputs (any slice: Spark need not hash them), sends
each lower relation's rows to the owners of its copies (routing.py) and keeps the rows it owns;
then every round derives from its own delta over its own copies, sends each candidate tuple to
its owners (exchange.py) and drops what it already holds, as fixpoint.run_task does in one
process: the same tuples, the same rounds (ranks). The rounds stop when no partition had a
delta. Its relations' tuples (their primary copy) go back as in_spark's packed output.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from levelflow.engine.plans import resident
from levelflow.engine.plans.columnar import body_rows, empty_frame, frame_schema, head_rows
from levelflow.engine.plans.exchange import Exchange
from levelflow.engine.plans.fixpoint import Relation, TaskOutcome
from levelflow.engine.plans.layout import Layout
from levelflow.engine.plans.routing import Routing
from levelflow.engine.plans.worker import output_schema, pack_outcome, source_frames
from levelflow.engine.rules import rule_heads

Out = dict[int, dict[int, list[pl.DataFrame]]]  # destination -> copy id -> frames
RANK = "_it"


@dataclass(slots=True)
class KeptPartition:
    """A partition of a distributed task as kept on its executor between epochs (resident.py):
    per copy of an own relation its tuples with their ranks, per copy of a lower relation its
    rows, as of the version the state's token names."""

    copies: dict[int, pl.DataFrame]  # c0.., _it
    lower: dict[int, pl.DataFrame]


def route(out: Out, frame: pl.DataFrame, copy: int, column: int | None, parts: int) -> None:
    """Add a copy's rows to `out` at their owners (every partition for a replicated copy)."""
    if not frame.height:
        return
    if column is None:
        for p in range(parts):
            out.setdefault(p, {}).setdefault(copy, []).append(frame)
        return
    if parts == 1:
        out.setdefault(0, {}).setdefault(copy, []).append(frame)
        return
    dest = frame.select((pl.col(f"c{column}").hash(seed=7) % parts).alias("_to"))["_to"]
    for (p,), rows in frame.with_columns(dest).partition_by("_to", as_dict=True).items():
        out.setdefault(int(p), {}).setdefault(copy, []).append(rows.drop("_to"))


class Partition:
    """One partition's copies of the task's relations and of the lower relations they join."""

    def __init__(self, layout: Layout, routing: Routing, net: Exchange) -> None:
        self.layout, self.routing, self.net = layout, routing, net
        self.parts = net.parts
        self.lower: dict[int, pl.DataFrame] = {}
        self.rels: dict[int, Relation] = {}
        self.outcome = TaskOutcome(rounds=[])
        # Per copy of an own relation, the tuples each round added to it (round = rank): what
        # a kept partition holds between epochs (incremental/backends/worker/dist_share.py).
        self.found: dict[int, list[pl.DataFrame]] = {}

    def _candidates(self, frames: Mapping[int, list[pl.DataFrame]], copy: int) -> pl.DataFrame:
        name = self.routing.copies[copy][0]
        found = frames.get(copy, [])
        return pl.concat(found, how="vertical_relaxed") if found else \
            empty_frame(self.layout.decls[name])

    def _send(self, derived: Mapping[str, list[pl.DataFrame]]) -> Out:
        """Return the derived tuples routed to the owners of each copy of their relation."""
        out: Out = {}
        for name, frames in derived.items():
            frames = [f for f in frames if f.height]
            if not frames:
                continue
            rows = pl.concat(frames).unique()
            for copy in self.routing.copies_of(name):
                route(out, rows, copy, self.routing.copies[copy][1], self.parts)
        return out

    def load(self, lower: Mapping[str, list[pl.DataFrame]], facts: Mapping[str, list]) -> None:
        """Swap the lower relations' rows to their copies' owners; then run round 0 (facts and
        base rules) and swap its tuples likewise."""
        out: Out = {}
        for copy, (name, column) in enumerate(self.routing.copies):
            if name in lower:
                for frame in lower[name]:
                    route(out, frame, copy, column, self.parts)
        got, _ = self.net.swap(out, (0, 0))
        for copy, (name, _) in enumerate(self.routing.copies):
            if name not in self.layout.names:
                self.lower[copy] = self._candidates(got, copy)
        derived: dict[str, list[pl.DataFrame]] = {n: list(facts.get(n, []))
                                                  for n in self.layout.names}
        for v in self.routing.variants:
            if v.delta is not None:
                continue
            rule = self.layout.rules[v.rule]
            if not v.reads and self.net.me != 0:  # a body of no atom: derived once
                continue
            frames = {i: self.lower[c] for i, c in v.reads}
            body, types = body_rows(rule, self.layout.decls, frames, limit=self.layout.limit)
            for head in rule_heads(rule, self.layout.names):
                derived[head.relation].append(
                    head_rows(body, types, head, self.layout.decls[head.relation]))
        got, seen = self.net.swap(self._send(derived), (0, 0))
        first = {}
        for name in self.layout.names:
            for copy in self.routing.copies_of(name):
                rows = self._candidates(got, copy).unique()
                self.rels[copy] = Relation(self.layout.decls[name], rows)
                self.found[copy] = [rows]
            first[name] = self.rels[self.routing.primary[name]].recent
        self.outcome.rounds.append(first)
        self.outcome.rows = {n: df.height for n, df in first.items()}

    def _derive(self) -> dict[str, list[pl.DataFrame]]:
        """Return per relation the candidates this partition's delta derives (one round)."""
        derived: dict[str, list[pl.DataFrame]] = {n: [] for n in self.layout.names}
        for v in self.routing.variants:
            if v.delta is None:
                continue
            copy_at = dict(v.reads)
            if not self.rels[copy_at[v.delta]].recent.height:
                continue
            k = v.own.index(v.delta)
            frames = {}
            for i, c in v.reads:
                if c not in self.rels:
                    frames[i] = self.lower[c]
                elif i == v.delta:
                    frames[i] = self.rels[c].recent
                elif i in v.own[:k]:
                    frames[i] = self.rels[c].stable
                else:
                    frames[i] = self.rels[c].full()
            rule = self.layout.rules[v.rule]
            body, types = body_rows(rule, self.layout.decls, frames, first=v.delta,
                                    limit=self.layout.limit)
            for head in rule_heads(rule, self.layout.names):
                derived[head.relation].append(
                    head_rows(body, types, head, self.layout.decls[head.relation]))
        return derived

    def kept(self) -> KeptPartition:
        """Return what this partition keeps between epochs: each copy's ranked tuples and
        each lower relation's copy."""
        copies = {c: pl.concat([df.with_columns(pl.lit(r, pl.Int64).alias(RANK))
                                for r, df in enumerate(rounds)], rechunk=True)
                  for c, rounds in self.found.items()}
        return KeptPartition(copies, dict(self.lower))

    def _counters(self) -> tuple[int, int]:
        """Return (this partition's delta, over every copy; its primary copies' tuples)."""
        delta = sum(r.recent.height for r in self.rels.values())
        held = sum(self.outcome.rows.values())
        return delta, held

    def iterate(self) -> None:
        """Run rounds until no partition has a delta (every partition stops at the same one)."""
        limit = self.layout.limit
        while True:
            delta, _ = self._counters()
            derived = self._derive() if delta else {}
            got, seen = self.net.swap(self._send(derived), self._counters())
            if not sum(d for d, _ in seen):
                return
            if limit is not None:
                limit.check(sum(h for _, h in seen))
            self.outcome.iterations += 1
            found = {}
            for copy, rel in self.rels.items():
                new = rel.new_tuples(got.get(copy, []))
                rel.advance(new)
                self.found.setdefault(copy, []).append(new)
                name = self.routing.copies[copy][0]
                if copy == self.routing.primary[name]:
                    found[name] = new
                    self.outcome.rows[name] += new.height
            self.outcome.rounds.append(found)


def evaluate_distributed(layout: Layout, batches: Iterable[pa.RecordBatch], timeout: float,
                         rendezvous: tuple[str, int]) -> Iterator[pa.RecordBatch]:
    """Yield this partition's share of the task's relations, from its slice of the inputs, the
    peers' addresses swapped at the driver's `rendezvous` (ExchangeError if a peer is silent
    for `timeout` seconds)."""
    batches = list(batches)  # read to the end (worker.py says why)
    net = Exchange.open(layout.token, timeout, rendezvous)
    try:
        data = pl.from_arrow(pa.Table.from_batches(batches)) if batches else None
        lower: dict[str, list[pl.DataFrame]] = {}
        facts: dict[str, list[pl.DataFrame]] = {}
        if data is not None and data.height:
            frames = source_frames(data, [frame_schema(layout.decls[n])
                                          for n, _ in layout.sources])
            for (name, is_facts), frame in zip(layout.sources, frames, strict=True):
                (facts if is_facts else lower).setdefault(name, []).append(frame)
        if net.me == 0:
            for name, rows in layout.facts.items():
                facts.setdefault(name, []).append(pl.DataFrame(
                    rows, schema=frame_schema(layout.decls[name]), orient="row"))
        part = Partition(layout, layout.routing, net)
        part.load(lower, facts)
        part.iterate()
    finally:
        net.close()
    if layout.keep is not None:  # where the task's epochs find it (dist_share.py)
        lineage, token = layout.keep
        resident.store(lineage, net.me, token, part.kept())
    schema = output_schema(layout.names, layout.decls)
    yield from pack_outcome(part.outcome, layout, schema, None)
