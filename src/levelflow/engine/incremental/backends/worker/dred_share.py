"""The Python side of an arranged task's epoch: the share's state, the update, the change out.

Runs in a PySpark worker. A share's state (its ranked tuples, sorted keys and symbol dictionary)
stays on the executor between epochs, under a token naming the epoch that made it
(plans/resident.py: this worker process's memory, then a file every Python worker of the
executor reads). A from-scratch run of the task leaves it there too. The entry also
keeps the lower relations the state was derived from, so an epoch ships only their change. A
share whose state is not there under the expected token answers MISS, and the driver runs the
epoch again with the state and the lower relations shipped. Only the removed and added tuples
go back to the JVM.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl
import pyarrow as pa

from levelflow.engine.incremental.strategies import closure_bits
from levelflow.engine.incremental.strategies.arranged import (
    RANK,
    Arranged,
    applied,
    arrange,
    reranked,
)
from levelflow.engine.incremental.strategies.closure_epoch import closure_edges
from levelflow.engine.incremental.strategies.closure_labels import Labels, ranked_anew, sent
from levelflow.engine.incremental.strategies.dred_polars import (
    RECOMPUTE_ROWS,
    Inputs,
    Outcome,
    deleted_rows,
    old_version,
    update,
)
from levelflow.engine.plans import resident
from levelflow.engine.plans.columnar import frame_schema
from levelflow.engine.plans.encode import decode, dictionary, encode, encoded_program
from levelflow.engine.plans.few_rows import without
from levelflow.engine.plans.worker import (
    batch,
    output_schema,
    share_filter,
    shares_of,
    source_frames,
)
from levelflow.tasks.ast import Decl, Rule

STATS_REL = -1  # `_it` holds the rounds run
TOP_REL = -2  # `_it` holds the share's highest rank after the update
MISS_REL = -3  # the share's state was not on this executor
LABELS_REL = -4  # `_it` is 1 when the share's stored ranks are labels (closure_labels.py)


@dataclass(frozen=True, slots=True)
class Spec:
    """What the workers need for one arranged epoch of a task (pickled to them)."""

    rules: tuple[Rule, ...]
    names: tuple[str, ...]
    decls: dict[str, Decl]
    sources: tuple[tuple[str, str], ...]  # per `_src`: (relation, new|plus|minus|fnew|..|state)
    facts: dict[str, list[tuple]]  # the program's own facts, per relation of the task
    key: dict[str, int] | None  # partitioned: the carried position per relation
    parts: int
    lineage: str  # names the task's state on the executors
    old_token: str | None  # the state version this epoch starts from
    new_token: str
    recompute_rows: int = RECOMPUTE_ROWS  # dred_polars.update's: a deletion may recompute
    labels: bool = False  # the task's stored ranks may be labels: send the net change only
    relabel: bool = False  # the stored copy shipped (if one is) holds labels: rank it anew


@dataclass(slots=True)
class RankedShare:
    """One share's state as kept on an executor: encoded tuples, the lower relations it was
    derived from, and their symbol dictionary."""

    state: Arranged
    symbols: pl.Series
    lower: dict[str, pl.DataFrame]  # every lower relation's version (encoded), as of the state
    labels: Labels = field(default_factory=dict)  # where the stored ranks differ (closures)
    # The ranks are labels, not valid ranks (closure_bits): a deletion by DRed ranks anew first.
    stale: bool = False


# Per output row besides the relation: `_op` (-1 removed, +1 added), `_net` (a net change).
_CHANGE_FIELDS = (pa.field("_op", pa.int32()), pa.field("_net", pa.bool_()))


def _cached(spec: Spec, share: int) -> RankedShare | None:
    """Return the share's state under the epoch's starting token, or None."""
    if spec.old_token is None:
        return None
    found = resident.lookup(spec.lineage, share, spec.old_token, apply=_applied)
    if not isinstance(found, (RankedShare, tuple)):  # none, or a counted task's (counting_share)
        return None
    if isinstance(found, tuple):
        found = _as_entry(found)
        resident.remember(spec.lineage, share, spec.old_token, found)
    return found


def _as_entry(found: RankedShare | tuple) -> RankedShare:
    """Return a stored state as a RankedShare (a from-scratch run leaves (ranked, symbols,
    lower))."""
    if isinstance(found, RankedShare):
        return found
    ranked, symbols, lower = found
    return RankedShare(arrange(ranked), symbols, lower)


def _applied(entry: RankedShare | tuple, change: tuple) -> RankedShare:
    """Return the entry after an epoch's stored change (removed, added, lower Δ+, lower Δ-,
    whether the stored ranks are labels: then its labels follow as the epoch's did, whether
    the ranks are stale after it)."""
    removed, added, plus, minus, labels, stale = change
    entry = _as_entry(entry)
    state = applied(entry.state, removed, added)
    after = sent(entry.state, Outcome(state, removed, added, 0), entry.labels)[1] \
        if labels else entry.labels
    return RankedShare(state, entry.symbols, lower_now(entry.lower, plus, minus), after, stale)


def sources_of(part: pl.DataFrame, spec: Spec) -> dict[str, dict[str, pl.DataFrame]]:
    """Return kind -> relation -> frame from one share's packed input rows (a shipped
    state's frames carry their ranks)."""
    schemas = [{**frame_schema(spec.decls[n]), **({RANK: pl.Int64} if kind == "state" else {})}
               for n, kind in spec.sources]
    out: dict[str, dict[str, pl.DataFrame]] = {}
    for (name, kind), frame in zip(spec.sources, source_frames(part, schemas), strict=True):
        out.setdefault(kind, {})[name] = frame
    return out


def _symbols_of(spec: Spec, src: dict) -> pl.Series:
    frames = [(spec.decls[n], df) for kind in src.values() for n, df in kind.items()]
    facts = [(spec.decls[n], pl.DataFrame(rows, schema=frame_schema(spec.decls[n]),
                                          orient="row")) for n, rows in spec.facts.items()]
    return dictionary(frames + facts, spec.rules)


def _recoded(entry: RankedShare, symbols: pl.Series, decls: dict) -> RankedShare:
    """Return the entry's state re-encoded under a larger dictionary (codes keep their order)."""
    def recode(frames):
        return {n: encode(decode(df, decls[n], entry.symbols), decls[n], symbols)
                for n, df in frames.items()}

    live = {n: entry.state.live(n) for n in entry.state.ranked}
    return RankedShare(arrange(recode(live)), symbols, recode(entry.lower))


def _entry(spec: Spec, share: int, src: dict) -> tuple[RankedShare | None, bool]:
    """Return the share's starting state, its dictionary covering this epoch's symbols, and
    whether it is the stored version itself (not shipped, not re-encoded)."""
    needed = _symbols_of(spec, src)
    shipped = src.get("state")
    if shipped is not None:
        ranked = {n: encode(shipped[n], spec.decls[n], needed) for n in spec.names}
        if spec.key is not None:
            keep = share_filter(spec, share)
            ranked = {n: keep(n, df) for n, df in ranked.items()}
        lower = {n: encode(df, spec.decls[n], needed) for n, df in src["new"].items()}
        return RankedShare(arrange(ranked), needed, lower), False
    entry = _cached(spec, share)
    if entry is None:
        return None, False
    if needed is None or needed.is_in(entry.symbols.implode()).all():  # None: symbols stay text
        return entry, True
    symbols = pl.concat([entry.symbols, needed]).unique().sort()
    return _recoded(entry, symbols, spec.decls), False


def lower_now(lower: dict, plus: dict, minus: dict) -> dict[str, pl.DataFrame]:
    """Return the lower relations' new versions: the kept ones with the epoch's net change
    (its Δ- gone, its Δ+ added)."""
    out = {}
    for n, df in lower.items():
        if n in minus and minus[n].height:
            df = without(df, minus[n])
        if n in plus and plus[n].height:
            df = pl.concat([df, plus[n]])
        out[n] = df
    return out


def _inputs(spec: Spec, share: int, src: dict, entry: RankedShare) -> Inputs:
    """Return the update's inputs, symbols encoded with the share's dictionary."""
    decls, symbols = spec.decls, entry.symbols

    def coded(kind: str) -> dict[str, pl.DataFrame]:
        return {n: encode(df, decls[n], symbols) for n, df in src.get(kind, {}).items()}

    facts_new = coded("fnew")
    for n, rows in spec.facts.items():
        own = encode(pl.DataFrame(rows, schema=frame_schema(decls[n]), orient="row"),
                     decls[n], symbols)
        facts_new[n] = pl.concat([facts_new[n], own]) if n in facts_new else own
    plus, minus = coded("plus"), coded("minus")
    # Shipped with the state, the lower relations are new already; else the kept ones change.
    lower = entry.lower if "state" in src else lower_now(entry.lower, plus, minus)
    rules, coded_decls = encoded_program(spec.rules, decls, symbols)
    return Inputs(rules, spec.names, coded_decls, lower, plus, minus, facts_new,
                  coded("fplus"), coded("fminus"),
                  share_filter(spec, share) if spec.key is not None else None)


def _marked(df: pl.DataFrame, other: pl.DataFrame, net=None) -> pl.DataFrame:
    """Return df with `_net`: whether its tuple is absent from `other` (a net change), from
    the update's `net` flags where it has them."""
    if net is not None:
        return df.with_columns(pl.Series("_net", net, pl.Boolean))
    cols = [c for c in df.columns if c != RANK]
    mark = other.select(cols).unique().with_columns(pl.lit(False).alias("_net"))
    return df.join(mark, on=cols, how="left").with_columns(pl.col("_net").fill_null(True))


def _changes(spec: Spec, out, symbols: pl.Series, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the removed (`_op` -1) and added (+1) ranked tuples of every relation, decoded."""
    for r, name in enumerate(spec.names):
        decl = spec.decls[name]
        net = (out.net or {}).get(name) or (None, None)
        for op, df, other, flags in ((-1, out.removed[name], out.added[name], net[0]),
                                     (1, out.added[name], out.removed[name], net[1])):
            if not df.height:
                continue
            df = decode(_marked(df, other, flags), decl, symbols)
            cols = {f"o{r}_{c}": df[c].to_arrow() for c in frame_schema(decl)}
            cols.update(_op=pa.array(np.full(df.height, op, np.int32)),
                        _net=df["_net"].to_arrow(), _it=df[RANK].to_arrow())
            yield batch(cols, df.height, r, schema)


def _stat(rel: int, value: int, schema: pa.Schema) -> pa.RecordBatch:
    return batch({"_it": pa.array([value], pa.int64())}, 1, rel, schema)


def update_partition(spec: Spec, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Yield each share's change (or MISS) from its packed input batches."""
    return partition_rows(spec, batches, _share_change, _CHANGE_FIELDS)


def direct_share(spec: Spec, packed: bytes, share: int) -> bytes:
    """Return one share's change (or MISS) as an Arrow IPC stream (a direct epoch)."""
    return direct_rows(spec, packed, share, _share_change, _CHANGE_FIELDS)


def driver_share(spec: Spec, packed: pl.DataFrame) -> pl.DataFrame:
    """Return the one share's change (or MISS) from its packed input, run in the driver."""
    return frame_rows(spec, packed, 0, _share_change, _CHANGE_FIELDS)


def partition_rows(spec, batches: Iterable[pa.RecordBatch], change, fields: tuple
                   ) -> Iterator[pa.RecordBatch]:
    """Yield `change(spec, share, rows, schema)` of each share's packed input batches, the
    output schema having the `fields` besides the relations'."""
    schema = output_schema(spec.names, spec.decls, fields)
    for share, rows in shares_of(batches):
        yield from change(spec, share, rows, schema)


def frame_rows(spec, rows: pl.DataFrame, share: int, change, fields: tuple) -> pl.DataFrame:
    """Return partition_rows' output of one share as a frame, from its packed input rows (a
    share run in the driver's process: nothing serialized)."""
    schema = output_schema(spec.names, spec.decls, fields)
    return pl.from_arrow(pa.Table.from_batches(list(change(spec, share, rows, schema)), schema))


def direct_rows(spec, packed: bytes, share: int, change, fields: tuple) -> bytes:
    """Return partition_rows' output of one share as an Arrow IPC stream, from the epoch's
    packed input as an IPC stream (a direct epoch: input and output travel with the job)."""
    schema = output_schema(spec.names, spec.decls, fields)
    rows = pl.read_ipc_stream(packed)
    sink = pa.BufferOutputStream()
    # Compressed: a result comes back through Spark at about 10 ms a MB, and an epoch's
    # change compresses 16x (3.9M tuples: 124.5 MB, 7.7 MB with LZ4, written faster too).
    options = pa.ipc.IpcWriteOptions(compression="lz4")
    with pa.ipc.new_stream(sink, schema, options=options) as writer:
        for out in change(spec, share, rows, schema):
            writer.write_batch(out)
    return sink.getvalue().to_pybytes()


def _share_change(spec: Spec, share: int, rows: pl.DataFrame, schema: pa.Schema
                  ) -> Iterator[pa.RecordBatch]:
    """Yield one share's removed and added tuples and its statistics, or MISS."""
    src = sources_of(rows, spec)
    entry, stored = _entry(spec, share, src)
    if entry is None:
        yield _stat(MISS_REL, 1, schema)
        return
    inputs = _inputs(spec, share, src, entry)
    if spec.labels and spec.relabel and "state" in src:
        entry = replace(entry, labels={}, stale=True)  # the stored copy's ranks are its labels
    done = _epoch(spec, entry, inputs)
    out = done.out
    yield from _changes(spec, done.sending, entry.symbols, schema)
    yield _stat(STATS_REL, out.rounds, schema)
    yield _stat(TOP_REL, out.state.top(), schema)
    yield _stat(LABELS_REL, int(bool(done.labels) or done.stale), schema)
    # After the rows went out (its file write would compete with them), before the task
    # ends: the next epoch's job cannot start before this share is stored. Stored as this
    # epoch's change to the version it started from, when that version is the stored one
    # (and was not ranked anew: a process catching up could not follow that).
    change = (out.removed, out.added, inputs.lower_plus, inputs.lower_minus, spec.labels,
              done.stale) if stored and not done.ranked_anew else None
    resident.store(spec.lineage, share, spec.new_token,
                   RankedShare(out.state, entry.symbols, dict(inputs.lower_new), done.labels,
                               done.stale),
                   spec.old_token, change)


@dataclass(slots=True)
class _Done:
    """A share's epoch: the update's outcome, what the worker sends of it, the labels after it,
    whether the ranks are stale then, and whether the state was ranked anew first."""

    out: Outcome
    sending: Outcome
    labels: Labels
    stale: bool
    ranked_anew: bool = False


def _epoch(spec: Spec, entry: RankedShare, inp: Inputs) -> _Done:
    """Return the share's epoch: a labelled closure's over bit matrices where they fit
    (closure_bits), else the update, a stale state ranked anew first if it deletes."""
    if not spec.labels:
        out = update(entry.state, inp, spec.recompute_rows)
        return _Done(out, out, entry.labels, False)
    found = _bits_epoch(entry, inp)
    if found is not None:
        return _Done(found[0], found[0], found[1], True)
    anew = entry.stale and deleted_rows(inp) > 0
    if anew:  # DRed needs valid ranks
        entry = _ranked_anew(entry, inp)
    out = update(entry.state, inp, spec.recompute_rows)
    sending, labels = sent(entry.state, out, entry.labels)
    return _Done(out, sending, labels, entry.stale, anew)


def _bits_epoch(entry: RankedShare, inp: Inputs) -> tuple[Outcome, Labels] | None:
    """Return a closure's epoch over bit matrices, and its labels after; None where its edges
    do not change or the matrices do not fit. Insertions too: semi-naive rounds took 0.02-0.08
    s for 10 edges on bench_shapes' random graph at 1M pairs, the matrices 0.01-0.03."""
    edge = closure_edges(inp.rules, inp.names)
    if edge is None:
        return None
    deletes, inserts = (df is not None and df.height > 0
                        for df in (inp.lower_minus.get(edge), inp.lower_plus.get(edge)))
    if not deletes and not inserts:
        return None
    (name,) = inp.names
    found = closure_bits.epoch(entry.state, name, old_version(inp, edge), inp.lower_new[edge],
                               entry.labels, inp.share,
                               None if deletes else closure_bits.INSERT_LEVELS)
    if found is None:
        return None
    removed, added, state, labels = found
    net = {name: (np.ones(removed[name].height, bool), np.ones(added[name].height, bool))}
    return Outcome(state, removed, added, 0, net), labels


def _ranked_anew(entry: RankedShare, inp: Inputs) -> RankedShare:
    """Return a closure state whose ranks are labels (shipped, or stale) ranked anew from its
    edges, every tuple's stored label kept where it differs from its rank."""
    (name,) = inp.names
    state = entry.state
    if name in entry.labels:  # the stored copy: every tuple at its label
        state = reranked(state, name, *entry.labels[name])
    edges = old_version(inp, closure_edges(inp.rules, inp.names))
    state, labels = ranked_anew(state, inp.rules, inp.names, inp.decls, edges, inp.share)
    return RankedShare(state, entry.symbols, entry.lower, labels)
