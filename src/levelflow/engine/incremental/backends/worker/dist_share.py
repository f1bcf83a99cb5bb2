"""The Python side of a distributed task's epoch: one partition of one barrier Spark job.

A task kept under the distributed plan (plans/distributed.py) is hash-partitioned over P
Python workers: per copy of each relation (plans/routing.py) the rows a partition owns. A
bootstrap leaves each partition's copies on its executor (plans/resident.py, `KeptPartition`);
an epoch is one barrier job whose partition i finds partition i's copies under the epoch's
starting token, takes the lower relations' change routed to the copies it owns, and runs
dred.py's phases with every partition at once: each phase joins only rows a partition owns
(a rule's variant reads copies partitioned on its pivot, a lower relation without it
replicated) and sends what it derives to the tuples' owners over the exchange (exchange.py),
so every step moves only delta tuples. A phase whose rows bind a head (support checks,
re-derivation) sends those few rows to every partition, each joining them with its own copies.
The insertion phase is the plan's own supersteps (`Partition.iterate`) resumed from what the
deletion kept, ranked above the task's top rank. Only the removed and added ranked tuples
of each relation's primary copy go back. A partition whose copies are missing answers MISS,
all partitions together, and the driver runs the epoch again with the copies shipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from levelflow.engine.incremental.strategies.dred import delete_and_rederive
from levelflow.engine.incremental.strategies.rewrites import (
    rederive_rule,
    stand_in_decls,
    support_rule,
)
from levelflow.engine.plans import resident
from levelflow.engine.plans.columnar import body_rows, empty_frame, frame_schema, head_rows
from levelflow.engine.plans.distributed import RANK, KeptPartition, Partition, route
from levelflow.engine.plans.exchange import Exchange
from levelflow.engine.plans.fixpoint import Relation, TaskOutcome
from levelflow.engine.plans.layout import Layout
from levelflow.engine.plans.routing import Routing
from levelflow.engine.plans.worker import batch, output_schema, source_frames
from levelflow.engine.rules import CompileError, reads_own, rule_heads
from levelflow.tasks.ast import Decl, Rule

STATS_REL, TOP_REL, MISS_REL = -1, -2, -3  # as dred_share's: dred_job reads both alike
_CHANGE_FIELDS = (pa.field("_op", pa.int32()), pa.field("_net", pa.bool_()))
_SUMS = -1  # the exchange section that carries a vector of counts


@dataclass(frozen=True, slots=True)
class DistSpec:
    """What every partition of a distributed epoch is told (pickled to the workers)."""

    rules: tuple[Rule, ...]  # the task's rules with a body, `@base:r` stand-ins included
    names: tuple[str, ...]
    decls: dict[str, Decl]
    sources: tuple[tuple[str, str], ...]  # per `_src`: (relation, plus|minus|new|state)
    facts: dict[str, list[tuple]]  # the program's own facts, per relation of the task
    routing: Routing
    parts: int
    lineage: str
    old_token: str | None
    new_token: str
    token: str  # this job's: each partition presents it to its peers (exchange.py)
    timeout: float
    rendezvous: tuple[str, int] | None = None  # the driver's (exchange.Rendezvous)


@dataclass(slots=True)
class _Part:
    """Rows of one relation at this partition (its primary copy's owner), the total over
    every partition, and (fresh suspects) the same rows at the owners of each copy."""

    frame: pl.DataFrame
    total: int
    copies: dict[int, pl.DataFrame] | None = None


def _tuple_cols(df: pl.DataFrame) -> list[str]:
    return [c for c in df.columns if c != RANK]


def _rank_last(df: pl.DataFrame) -> pl.DataFrame:
    return df.rename({RANK: f"c{len(df.columns) - 1}"})


def _minus(df: pl.DataFrame, gone: pl.DataFrame) -> pl.DataFrame:
    """Return df without the tuples of `gone` (compared on gone's columns)."""
    if not df.height or not gone.height:
        return df
    return df.join(gone.unique(), on=gone.columns, how="anti", nulls_equal=True)


def _among(df: pl.DataFrame, keep: pl.DataFrame) -> pl.DataFrame:
    if not df.height or not keep.height:
        return df.clear()
    return df.join(keep.unique(), on=keep.columns, how="semi", nulls_equal=True)


class Net:
    """The collective steps of an epoch over the exchange: every partition calls each of them
    in the same order (dred.py's phases decide by totals every partition shares)."""

    def __init__(self, exchange: Exchange, routing: Routing, decls) -> None:
        self.ex, self.routing, self.decls = exchange, routing, decls
        self.parts, self.me = exchange.parts, exchange.me

    def total(self, count: int) -> int:
        """Return the sum over every partition of `count`."""
        return sum(a for a, _ in self.ex.swap({}, (count, 0))[1])

    def highest(self, value: int) -> int:
        """Return the highest `value` of every partition."""
        return max(a for a, _ in self.ex.swap({}, (value, 0))[1])

    def sums(self, counts: list[int]) -> list[int]:
        """Return the element-wise sums over every partition of `counts`."""
        frame = pl.DataFrame({"v": counts}, schema={"v": pl.Int64})
        got, _ = self.ex.swap({p: {_SUMS: [frame]} for p in range(self.parts)}, (0, 0))
        if not counts:
            return []
        return np.sum([df["v"].to_numpy() for df in got[_SUMS]], axis=0).tolist()

    def to_copies(self, frames: Mapping[int, list[pl.DataFrame]]) -> dict[int, pl.DataFrame]:
        """Send rows (copy id -> frames) to the owners of that copy; return what we own."""
        out: dict = {}
        for copy, pieces in frames.items():
            column = self.routing.copies[copy][1]
            for df in pieces:
                route(out, df, copy, column, self.parts)
        got, _ = self.ex.swap(out, (0, 0))
        return {c: pl.concat(fs, how="vertical_relaxed") for c, fs in got.items() if fs}

    def to_primary(self, derived: Mapping[str, list[pl.DataFrame]]) -> dict[str, pl.DataFrame]:
        """Send each relation's tuples to its primary copy's owners; return ours, distinct."""
        primary = self.routing.primary
        got = self.to_copies({primary[n]: [f for f in fs if f.height]
                              for n, fs in derived.items()})
        return {n: got[primary[n]].unique() if primary[n] in got else
                empty_frame(self.decls[n]) for n in derived}

    def to_all_copies(self, name: str, frame: pl.DataFrame) -> dict[int, pl.DataFrame]:
        """Send a relation's tuples to the owners of each of its copies; return ours per copy."""
        copies = self.routing.copies_of(name)
        got = self.to_copies({c: [frame] for c in copies})
        return {c: got.get(c, frame.clear()) for c in copies}

    def everywhere(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Return every partition's rows of `frame`, at every partition."""
        got, _ = self.ex.swap({p: {0: [frame]} for p in range(self.parts)}, (0, 0))
        return pl.concat(got[0], how="vertical_relaxed") if got.get(0) else frame.clear()


class DistDRed:
    """DRed's operations (dred.DRedOps) over the partitions of a distributed task: each step
    joins the rows this partition owns and sends what it finds to their owners."""

    def __init__(self, spec: DistSpec, net: Net, old: dict[int, pl.DataFrame],
                 lower: dict[int, dict[str, pl.DataFrame]]) -> None:
        self.spec, self.net = spec, net
        self.names, self.rules = spec.names, spec.rules
        self.routing = spec.routing
        self.old = old  # own copy -> ranked tuples before the epoch
        self.lower = lower  # lower copy -> {"old", "new", "plus", "minus"}
        self.susp = {c: df.drop(RANK).clear() for c, df in old.items()}
        self.kept: dict[int, pl.DataFrame] = {}  # own copy -> S' (ranked), set by keep
        self.program_facts = {n: pl.DataFrame(rows, schema=frame_schema(spec.decls[n]),
                                              orient="row")
                              for n, rows in spec.facts.items()}
        self._variants = {}
        for v in self.routing.variants:
            self._variants.setdefault((v.rule, v.delta), v)
            self._variants.setdefault((v.rule, "any"), v)
        self._rule_index = {id(r): i for i, r in enumerate(self.rules)}
        self._replicated: dict[str, pl.DataFrame] = {}

    def _reads(self, rule: Rule, delta=None) -> dict[int, int]:
        r = self._rule_index[id(rule)]
        v = self._variants.get((r, delta)) or self._variants[(r, "any")]
        return dict(v.reads)

    def _frames(self, rule: Rule, reads: Mapping[int, int], own: str, low: str
                ) -> dict[int, pl.DataFrame]:
        """Return per body position this partition's rows of the atom's copy: own relations
        `own` ("old": every old tuple, "kept": S'), lower ones version `low`."""
        out = {}
        for i, atom, _ in rule.body_atoms():
            c = reads[i]
            if atom.relation in self.names:
                out[i] = (self.old if own == "old" else self.kept)[c].drop(RANK)
            elif low == "either":  # old and inserted: a support kept may lean on either
                parts = self.lower[c]
                if "either" not in parts:
                    parts["either"] = pl.concat([parts["old"], parts["plus"]],
                                                how="vertical_relaxed") \
                        if parts["plus"].height else parts["old"]
                out[i] = parts["either"]
            else:
                out[i] = self.lower[c][low]
        return out

    def _heads(self, rule, decls, frames, first) -> list[tuple[str, pl.DataFrame]]:
        body, types = body_rows(rule, decls, frames, first=first)
        return [(h.relation, head_rows(body, types, h, decls[h.relation]))
                for h in rule_heads(rule, self.names)]

    def empty(self, frame: _Part) -> bool:
        return frame.total == 0

    def check_cancel(self) -> None:
        pass  # a partition is cancelled with its Spark job

    def removed_facts(self, name: str) -> list:
        return []  # base facts are the lower relation `@base:r` here

    def inserted_facts(self, name: str) -> list:
        return []

    def through_lower(self, deleting: bool) -> dict[str, list[pl.DataFrame]]:
        derived: dict[str, list[pl.DataFrame]] = {n: [] for n in self.names}
        kind = "minus" if deleting else "plus"
        for rule in self.rules:
            reads = self._reads(rule)
            frames = None
            for i, atom, neg in rule.body_atoms():
                if neg or atom.relation in self.names:
                    continue
                delta = self.lower[reads[i]][kind]
                if not delta.height:
                    continue
                if frames is None:
                    frames = self._frames(rule, reads, "old" if deleting else "kept",
                                          "old" if deleting else "new")
                for name, heads in self._heads(rule, self.spec.decls,
                                               {**frames, i: delta}, i):
                    derived[name].append(heads)
        return {n: [df] for n, df in self.net.to_primary(derived).items()}

    def candidates(self, name: str, seeds: list[pl.DataFrame]) -> _Part:
        p = self.routing.primary[name]
        seeds = [s for s in seeds if s.height]
        found = self.old[p].clear()
        if seeds:
            found = _minus(_among(self.old[p], pl.concat(seeds).unique()), self.susp[p])
        return _Part(found, self.net.total(found.height))

    def supported(self, cands: dict[str, _Part]) -> dict[str, list[pl.DataFrame]]:
        decls = stand_in_decls(self.spec.decls, self.names)
        out: dict[str, list[pl.DataFrame]] = {n: [] for n in self.names}
        left = {}
        for n, c in cands.items():
            facts = self.program_facts.get(n)
            if facts is not None and c.frame.height:
                out[n].append(_among(c.frame.drop(RANK), facts))
            left[n] = c.frame
        for rule in sorted(self.rules, key=lambda r: reads_own(r, self.names)):
            head = rule.heads[0].relation
            c = left[head]
            if out[head]:
                c = _minus(c, pl.concat(out[head]))
            asked = self.net.everywhere(_rank_last(c))  # every partition's candidates
            if not asked.height:
                left[head] = c
                continue
            prefixed, _, _ = support_rule(rule, self.names)
            reads = self._reads(rule)
            frames = {0: asked}
            pos = 1
            for k, lit in enumerate(rule.body):
                atom = getattr(lit, "atom", lit)
                if k in reads:
                    c_id = reads[k]
                    if getattr(atom, "relation", None) in self.names and lit is atom:
                        frames[pos] = _rank_last(self.live(c_id))
                        pos += 2  # the atom and its rank comparison
                        continue
                    frames[pos] = self.lower[c_id]["new"]
                pos += 1
            try:
                ((_, heads),) = self._heads(prefixed, decls, frames, 0)
            except CompileError:
                heads = empty_frame(self.spec.decls[head])
            found = self.net.to_primary({head: [heads]})[head]
            out[head].append(found)
            left[head] = _minus(c, found)
        return out

    def live(self, copy: int) -> pl.DataFrame:
        """Return an own copy's old tuples not suspect, ranked."""
        return _minus(self.old[copy], self.susp[copy])

    def mark_lost(self, name: str, cand: _Part, kept: list[pl.DataFrame]) -> _Part:
        lost = cand.frame.drop(RANK)
        kept = [k for k in kept if k.height]
        if kept and lost.height:
            lost = _minus(lost, pl.concat(kept))
        copies = self.net.to_all_copies(name, lost)
        for c, rows in copies.items():
            if rows.height:
                self.susp[c] = pl.concat([self.susp[c], rows], how="vertical_relaxed")
        return _Part(lost, self.net.total(lost.height), copies)

    def through_suspect(self, rule: Rule, pos: int, fresh: _Part):
        reads = self._reads(rule, pos)
        frames = self._frames(rule, reads, "old", "either")
        frames[pos] = fresh.copies[reads[pos]]
        derived: dict[str, list[pl.DataFrame]] = {}
        for name, heads in self._heads(rule, self.spec.decls, frames, pos):
            derived.setdefault(name, []).append(heads)
        return list(self.net.to_primary(derived).items())

    def keep(self) -> dict[str, _Part]:
        self.kept = {c: self.live(c) for c in self.old}
        primary = self.routing.primary
        totals = self.net.sums([self.susp[primary[n]].height for n in self.names])
        return {n: _Part(self.susp[primary[n]], t) for n, t in zip(self.names, totals,
                                                                     strict=True)}

    def still_facts(self, name: str, suspects: _Part) -> list[pl.DataFrame]:
        facts = self.program_facts.get(name)
        return [] if facts is None else [_among(suspects.frame, facts)]

    def rederived(self, rule: Rule, suspects: _Part) -> pl.DataFrame:
        head = rule.heads[0]
        if head.relation not in self._replicated:
            self._replicated[head.relation] = self.net.everywhere(suspects.frame)
        asked = self._replicated[head.relation]
        reads = self._reads(rule)
        frames = self._frames(rule, reads, "kept", "new")
        try:
            shifted = {i + 1: df for i, df in frames.items()}
            ((_, heads),) = self._heads(rederive_rule(rule, head),
                                        stand_in_decls(self.spec.decls, self.names),
                                        {**shifted, 0: asked}, 0)
        except CompileError:  # a head the prefix cannot bind: the rule plainly, then matched
            ((_, heads),) = self._heads(rule, self.spec.decls, frames, None)
            heads = _among(heads, asked)
        return self.net.to_primary({head.relation: [heads]})[head.relation]


def _applied(kept: KeptPartition, change: tuple) -> KeptPartition:
    """Return a partition after an epoch's stored change (per copy: removed and added ranked
    tuples, the lower relations' Δ+ and Δ-)."""
    removed, added, plus, minus = change
    copies = {c: pl.concat([_minus(df, removed[c]) if c in removed else df,
                            *([added[c]] if c in added else [])], how="vertical_relaxed")
              for c, df in kept.copies.items()}
    lower = {c: _lower_new(df, plus.get(c), minus.get(c)) for c, df in kept.lower.items()}
    return KeptPartition(copies, lower)


def _lower_new(old: pl.DataFrame, plus, minus) -> pl.DataFrame:
    if minus is not None and minus.height:
        old = _minus(old, minus)
    if plus is not None and plus.height:
        old = pl.concat([old, plus], how="vertical_relaxed")
    return old


def _placed(spec: DistSpec, net: Net, data: pl.DataFrame | None, sliced: bool
            ) -> dict[str, dict[int, pl.DataFrame]]:
    """Return kind -> copy -> this partition's rows of each packed source, routed to the
    copies of its relation. `sliced`: each partition read a slice (sent to the owners, one
    exchange); else every partition read all of it and keeps what it owns."""
    schemas = [{**frame_schema(spec.decls[n]), **({RANK: pl.Int64} if kind == "state" else {})}
               for n, kind in spec.sources]
    frames = source_frames(data, schemas) if data is not None and data.height else \
        [pl.DataFrame(schema=s) for s in schemas]
    routing = spec.routing
    out: dict = {}
    for (name, kind), frame in zip(spec.sources, frames, strict=True):
        for copy in routing.copies_of(name):
            key = (kind, copy)
            column = routing.copies[copy][1]
            if sliced:
                route(out, frame, key[1] + _offset(kind, routing), column, net.parts)
            else:
                mine = frame if column is None else frame.filter(
                    pl.col(f"c{column}").hash(seed=7) % net.parts == net.me)
                out.setdefault(kind, {})[copy] = mine
    if not sliced:
        return out
    got, _ = net.ex.swap(out, (0, 0))
    placed: dict = {}
    for (name, kind), schema in zip(spec.sources, schemas, strict=True):
        for copy in routing.copies_of(name):
            pieces = got.get(copy + _offset(kind, routing), [])
            placed.setdefault(kind, {})[copy] = pl.concat(pieces, how="vertical_relaxed") \
                if pieces else pl.DataFrame(schema=schema)
    return placed


_KINDS = ("plus", "minus", "new", "state")


def _offset(kind: str, routing: Routing) -> int:
    """Return the section id offset of a source kind (copy ids are below len(copies))."""
    return _KINDS.index(kind) * len(routing.copies)


def epoch_partition(spec: DistSpec, batches: Iterable[pa.RecordBatch]
                    ) -> Iterator[pa.RecordBatch]:
    """Yield this partition's change (or MISS) from its slice of the packed input (a
    mapInArrow barrier stage)."""
    batches = list(batches)  # read to the end (plans/worker.py says why)
    data = pl.from_arrow(pa.Table.from_batches(batches)) if batches else None
    yield from _epoch(spec, data, sliced=True)


def epoch_direct(spec: DistSpec, packed: bytes) -> bytes:
    """Return this partition's change (or MISS) as an Arrow IPC stream, from the whole packed
    input carried with the job (a barrier RDD job)."""
    data = pl.read_ipc_stream(packed) if packed else None
    schema = output_schema(spec.names, spec.decls, _CHANGE_FIELDS)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for out in _epoch(spec, data, sliced=False):
            writer.write_batch(out)
    return sink.getvalue().to_pybytes()


def _epoch(spec: DistSpec, data: pl.DataFrame | None, sliced: bool
           ) -> Iterator[pa.RecordBatch]:
    schema = output_schema(spec.names, spec.decls, _CHANGE_FIELDS)
    ex = Exchange.open(spec.token, spec.timeout, spec.rendezvous)
    try:
        net = Net(ex, spec.routing, spec.decls)
        placed = _placed(spec, net, data, sliced)
        start = _start(spec, net, placed)
        if start is None:
            yield _stat(MISS_REL, 1, schema)
            return
        old, lower = start
        out = _update(spec, net, old, lower)
    finally:
        ex.close()
    removed, added, rounds, top, state = out
    yield from _changes(spec, removed, added, schema)
    yield _stat(STATS_REL, rounds, schema)
    yield _stat(TOP_REL, top, schema)
    copies_removed = {c: df for c, df in state[0].items() if df.height}
    copies_added = {c: df for c, df in state[1].items() if df.height}
    plus = {c: df for c, df in placed.get("plus", {}).items() if df.height}
    minus = {c: df for c, df in placed.get("minus", {}).items() if df.height}
    new = KeptPartition({c: pl.concat([_minus(df, state[0][c]), state[1][c]],
                                      how="vertical_relaxed") for c, df in old.items()},
                        {c: parts["new"] for c, parts in lower.items()})
    shipped = "state" in placed
    resident.store(spec.lineage, net.me, spec.new_token, new,
                   None if shipped else spec.old_token,
                   None if shipped else (copies_removed, copies_added, plus, minus))


def _start(spec: DistSpec, net: Net, placed: dict):
    """Return (own copy -> old ranked tuples, lower copy -> its versions), or None when a
    partition (any: they agree) misses its copies."""
    routing = spec.routing
    own = [c for c, (n, _) in enumerate(routing.copies) if n in spec.names]
    low = [c for c, (n, _) in enumerate(routing.copies) if n not in spec.names]

    def rows(kind: str, c: int) -> pl.DataFrame:
        got = placed.get(kind, {}).get(c)
        return got if got is not None else empty_frame(spec.decls[routing.copies[c][0]])

    if "state" in placed:
        old = {c: placed["state"][c] for c in own}
        lower = {}
        for c in low:
            new, plus, minus = rows("new", c), rows("plus", c), rows("minus", c)
            lower[c] = {"new": new, "plus": plus, "minus": minus,
                        "old": pl.concat([_minus(new, plus), minus], how="vertical_relaxed")
                        if plus.height or minus.height else new}
        return old, lower
    kept = None if spec.old_token is None else resident.lookup(
        spec.lineage, net.me, spec.old_token, apply=_applied)
    if not isinstance(kept, KeptPartition):
        kept = None
    if net.total(int(kept is None)):
        return None
    lower = {}
    for c in low:
        base, plus, minus = kept.lower.get(c, rows("new", c)), rows("plus", c), rows("minus", c)
        lower[c] = {"old": base, "plus": plus, "minus": minus,
                    "new": _lower_new(base, plus, minus)}
    return dict(kept.copies), lower


def _update(spec: DistSpec, net: Net, old: dict, lower: dict):
    """Return per relation the removed and added ranked tuples at their primary owner, the
    rounds, this partition's top rank after, and per copy (removed, added) ranked rows."""
    ops = DistDRed(spec, net, old, lower)
    top = net.highest(max((int(df[RANK].max()) for df in old.values() if df.height),
                          default=0))
    seeds, rounds = delete_and_rederive(ops)
    part = _resumed(spec, net, ops, seeds, lower)
    part.iterate()
    routing = spec.routing
    removed_copies = {c: _among(old[c], ops.susp[c]) for c in old}
    added_copies = {c: pl.concat([df.with_columns(pl.lit(top + 1 + k, pl.Int64).alias(RANK))
                                  for k, df in enumerate(part.found[c])],
                                 how="vertical_relaxed") for c in old}
    removed = {n: removed_copies[routing.primary[n]] for n in spec.names}
    added = {n: added_copies[routing.primary[n]] for n in spec.names}
    mine = [int(df[RANK].max()) for df in (*ops.kept.values(), *added_copies.values())
            if df.height]
    return (removed, added, rounds + part.outcome.iterations, max(mine, default=0),
            (removed_copies, added_copies))


def _resumed(spec: DistSpec, net: Net, ops: DistDRed, seeds: dict, lower: dict) -> Partition:
    """Return the plan's Partition over S' with the seeds as its first delta (not iterated)."""
    layout = Layout(rules=spec.rules, names=spec.names, decls=spec.decls, sources=(),
                    facts={}, key=None, parts=spec.parts, routing=spec.routing)
    part = Partition(layout, spec.routing, net.ex)
    part.lower = {c: v["new"] for c, v in lower.items()}
    sent: dict[int, list[pl.DataFrame]] = {}
    for n in spec.names:
        rows = [s for s in seeds[n] if s.height]
        if rows:
            distinct = pl.concat(rows, how="vertical_relaxed").unique()
            for c in spec.routing.copies_of(n):
                sent.setdefault(c, []).append(distinct)
    got = net.to_copies(sent)
    first = {}
    for c, kept in ops.kept.items():
        name = spec.routing.copies[c][0]
        rel = Relation(spec.decls[name], empty_frame(spec.decls[name]), kept.drop(RANK))
        new = rel.new_tuples([got[c]] if c in got else [])
        rel.advance(new)
        part.rels[c] = rel
        part.found[c] = [new]
        if c == spec.routing.primary[name]:
            first[name] = new
    part.outcome = TaskOutcome(rounds=[first],
                               rows={n: part.rels[spec.routing.primary[n]].full().height
                                     for n in spec.names})
    return part


def _changes(spec: DistSpec, removed: dict, added: dict, schema: pa.Schema
             ) -> Iterator[pa.RecordBatch]:
    """Yield the removed (`_op` -1) and added (+1) ranked tuples of every relation, each
    marked `_net` when its tuple is gone (or new), not re-ranked."""
    for r, name in enumerate(spec.names):
        for op, df, other in ((-1, removed[name], added[name]), (1, added[name], removed[name])):
            if not df.height:
                continue
            cols = _tuple_cols(df)
            mark = other.select(cols).unique().with_columns(pl.lit(False).alias("_net"))
            df = df.join(mark, on=cols, how="left", nulls_equal=True).with_columns(
                pl.col("_net").fill_null(True))
            out = {f"o{r}_{c}": df[c].to_arrow() for c in cols}
            out.update(_op=pa.array(np.full(df.height, op, np.int32)),
                       _net=df["_net"].to_arrow(), _it=df[RANK].to_arrow())
            yield batch(out, df.height, r, schema)


def _stat(rel: int, value: int, schema: pa.Schema) -> pa.RecordBatch:
    return batch({"_it": pa.array([value], pa.int64())}, 1, rel, schema)
