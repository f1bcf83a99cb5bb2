"""A counted task's share: its derivation counts kept warm, updated in Polars.

Runs in the driver's process (counting_job.py), one share. The task's counts (c.., _cnt per
relation) and the lower relations' versions they were derived from stay in memory between
epochs (plans/resident.py, under a token naming the epoch), so an epoch is handed only the
lower relations' change and the task's base facts' change. The update is counting's
(counting_polars.count_changes): the delta terms summed per tuple, joined to the old counts.
Only the touched tuples come out, with their old and new counts. A share without the state
under the expected token answers MISS; it is then handed the lower relations' and base facts'
old versions, from which the old counts are derived again here (no Spark-side counts are read).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from levelflow.engine.incremental.backends.worker.dred_share import (
    MISS_REL,
    Spec,
    frame_rows,
    lower_now,
    sources_of,
)
from levelflow.engine.incremental.strategies.counting import versions_read
from levelflow.engine.incremental.strategies.counting_polars import count_changes
from levelflow.engine.plans import resident
from levelflow.engine.plans.columnar import body_rows, frame_schema, head_rows
from levelflow.engine.plans.worker import batch

COUNT = "_cnt"  # state.COUNT (not imported: this module needs no Spark-side state module)
# Per output row besides the relation: the touched tuple's count before and after the epoch.
FIELDS = (pa.field("_old", pa.int64()), pa.field("_new", pa.int64()))
SHIPPED = ("old", "fold")  # the source kinds of a shipped state


@dataclass(slots=True)
class CountedShare:
    """A counted task's kept state: its counts and the lower relations they count."""

    counts: dict[str, pl.DataFrame]  # relation -> c.., _cnt (every count > 0)
    lower: dict[str, pl.DataFrame]  # lower relation read whole -> its version as of the counts


class LowerRows:
    """counting_polars.Rows over the kept lower relations and an epoch's change to them."""

    def __init__(self, old: dict, plus: dict, minus: dict) -> None:
        self.old, self.plus, self.minus = old, plus, minus
        self.new = lower_now(old, plus, minus)

    def changed(self, name: str) -> bool:
        return any(d.get(name) is not None and d[name].height for d in (self.plus, self.minus))

    def version(self, name: str, new: bool) -> pl.DataFrame:
        return (self.new if new else self.old)[name]

    def change(self, name: str, plus: bool) -> pl.DataFrame:
        got = (self.plus if plus else self.minus).get(name)
        if got is not None:
            return got
        other = (self.minus if plus else self.plus).get(name)  # a relation not kept whole
        return (other if other is not None else self.old[name]).clear()


def scratch_counts(spec: Spec, lower: dict, facts: dict) -> dict[str, pl.DataFrame]:
    """Return each relation's counts from scratch: one per base fact (`facts`), per distinct
    program fact, and per body row of a rule over the `lower` relations."""
    parts: dict[str, list[pl.DataFrame]] = {n: [] for n in spec.names}
    for n in spec.names:
        schema = frame_schema(spec.decls[n])
        if n in facts:
            parts[n].append(facts[n])
        if spec.facts.get(n):
            parts[n].append(pl.DataFrame(spec.facts[n], schema=schema, orient="row").unique())
    for rule in spec.rules:
        frames = {i: lower[a.relation] for i, a, _ in rule.body_atoms()}
        body, types = body_rows(rule, spec.decls, frames)
        for head in rule.heads:
            if head.relation in parts:
                parts[head.relation].append(head_rows(body, types, head,
                                                      spec.decls[head.relation]))
    out = {}
    for n, frames in parts.items():
        cols = list(frame_schema(spec.decls[n]))
        bag = pl.concat(frames) if frames else pl.DataFrame(schema=frame_schema(spec.decls[n]))
        out[n] = bag.group_by(cols).agg(pl.len().cast(pl.Int64).alias(COUNT))
    return out


def _entry(spec: Spec, share: int, src: dict) -> CountedShare | None:
    """Return the starting state: derived from the shipped old versions, or the kept one.
    Without an old token nothing is kept: what was shipped is all of it, maybe nothing (a
    task of the program's facts alone reads no relation)."""
    if spec.old_token is None or any(kind in SHIPPED for _, kind in spec.sources):
        lower = src.get("old", {})
        return CountedShare(scratch_counts(spec, lower, src.get("fold", {})),
                            _read_whole(spec, lower))
    found = resident.lookup(spec.lineage, share, spec.old_token)
    return found if isinstance(found, CountedShare) else None  # else none, or another kind's


def _read_whole(spec: Spec, lower: dict) -> dict[str, pl.DataFrame]:
    """Return the lower relations the rules' terms read whole: only those are kept current
    (cyclic(x) :- path(x, x) reads path's Δ alone; keeping its 1M tuples current cost 10-50
    ms an epoch)."""
    read = versions_read(spec.rules)
    return {n: df for n, df in lower.items() if n in read}


def update(spec: Spec, entry: CountedShare, src: dict
           ) -> tuple[CountedShare, dict[str, pl.DataFrame]]:
    """Return the state after the epoch's change and per relation its touched tuples with
    their old and new counts (c.., _old, _new)."""
    rows = LowerRows(_read_whole(spec, entry.lower), src.get("plus", {}), src.get("minus", {}))
    facts = {n: (src.get("fplus", {}).get(n, empty), src.get("fminus", {}).get(n, empty))
             for n in spec.names
             for empty in [pl.DataFrame(schema=frame_schema(spec.decls[n]))]}
    summed = count_changes(spec.rules, spec.names, spec.decls, rows, facts)
    counts, touched = {}, {}
    for n, d in summed.items():
        old = entry.counts[n]
        cols = [c for c in old.columns if c != COUNT]
        upd = d.join(old, on=cols, how="left").select(
            *cols, pl.col(COUNT).fill_null(0).alias("_old"),
            (pl.col(COUNT).fill_null(0) + pl.col("_d")).alias("_new"))
        touched[n] = upd
        if not upd.height:
            counts[n] = old
            continue
        kept = old.join(upd.select(cols), on=cols, how="anti")
        counts[n] = pl.concat([kept, upd.filter(pl.col("_new") > 0)
                               .select(*cols, pl.col("_new").alias(COUNT))])
    return CountedShare(counts, rows.new), touched


def _share_change(spec: Spec, share: int, part: pl.DataFrame, schema: pa.Schema
                  ) -> Iterator[pa.RecordBatch]:
    """Yield the touched tuples of every relation (or MISS), then keep the new state."""
    src = sources_of(part, spec)
    entry = _entry(spec, share, src)
    if entry is None:
        yield batch({"_it": pa.array([1], pa.int64())}, 1, MISS_REL, schema)
        return
    entry, touched = update(spec, entry, src)
    for r, name in enumerate(spec.names):
        df = touched[name]
        if df.height:
            cols = {f"o{r}_{c}": df[c].to_arrow() for c in frame_schema(spec.decls[name])}
            cols.update(_old=df["_old"].to_arrow(), _new=df["_new"].to_arrow())
            yield batch(cols, df.height, r, schema)
    # After the rows went out, before the task ends: the next epoch's job cannot start
    # before the state is kept.
    resident.store(spec.lineage, share, spec.new_token, entry)


def driver_share(spec: Spec, packed: pl.DataFrame) -> pl.DataFrame:
    """Return the epoch's touched tuples (or MISS) from its packed input (the one share, run
    in the driver)."""
    return frame_rows(spec, packed, 0, _share_change, FIELDS)
