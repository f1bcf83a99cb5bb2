"""The Python side of a task run inside Spark: Arrow batches in, the task's fixpoint, batches out.

Runs in a PySpark worker. It reads its whole input first (a Python task that stops early gets a
freshly forked worker next time), splits it by share and source, runs fixpoint.run_task per
share and packs each relation back into the layout of in_spark.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import partial

import numpy as np
import polars as pl
import pyarrow as pa

from levelflow.engine.arrow_types import arrow_types
from levelflow.engine.plans import resident
from levelflow.engine.plans.closure import task_evaluator
from levelflow.engine.plans.columnar import frame_schema
from levelflow.engine.plans.encode import decode, dictionary, encode, encoded_program
from levelflow.engine.plans.fixpoint import TaskOutcome
from levelflow.engine.plans.layout import BASE_FACTS, COUNT_REL, STATS_REL, Layout
from levelflow.engine.plans.subsume import run_subsumed


def output_schema(names, decls, extra: tuple[pa.Field, ...] = ()) -> pa.Schema:
    """Return the Arrow schema of a packed output: `_rel`, the extra fields, `_it`, then each
    relation's columns `o<rel>_c<j>` (matches in_spark.packed_schema)."""
    fields = [pa.field("_rel", pa.int32(), False), *extra, pa.field("_it", pa.int64())]
    for r, name in enumerate(names):
        fields += [pa.field(f"o{r}_c{j}", t) for j, t in enumerate(arrow_types(decls[name]))]
    return pa.schema(fields)


def shares_of(batches: Iterable[pa.RecordBatch]) -> list[tuple[int, pl.DataFrame]]:
    """Return each share's packed input rows as (share index, rows); empty for no input.

    The batches are read to the end, always (see the module docstring).
    """
    batches = list(batches)
    if not batches:
        return []
    data = pl.from_arrow(pa.Table.from_batches(batches))
    if "_part" not in data.columns:
        return [(0, data)]
    return [(p, rows) for (p,), rows in data.partition_by("_part", as_dict=True).items()]


def source_frames(part: pl.DataFrame, schemas: list[dict]) -> list[pl.DataFrame]:
    """Return per packed source `_src` its rows, columns `s<src>_<c>` renamed back to `c` and
    cast to `schemas[src]` (an empty frame for a source without rows)."""
    by_src = unblobbed(part).partition_by("_src", as_dict=True)
    out = []
    for s, schema in enumerate(schemas):
        rows = by_src.get((s,))
        out.append(pl.DataFrame(schema=schema) if rows is None else rows.select(
            [pl.col(f"s{s}_{c}").alias(c).cast(t) for c, t in schema.items()]))
    return out


def unblobbed(part: pl.DataFrame) -> pl.DataFrame:
    """Return packed input rows with its `_blob` rows (a driver-held source's Arrow IPC pieces,
    in_spark.united_sources) replaced by the rows they hold."""
    if "_blob" not in part.columns:
        return part
    blobs = part.filter(pl.col("_blob").is_not_null())
    decoded = [pl.from_arrow(pa.ipc.open_stream(blob).read_all()).with_columns(
        pl.lit(src, pl.Int32).alias("_src")) for src, blob in zip(
            blobs["_src"], blobs["_blob"], strict=True)]
    rows = part.filter(pl.col("_blob").is_null()).drop("_blob")
    return pl.concat([rows, *decoded], how="diagonal_relaxed")


def _sources(part: pl.DataFrame, layout: Layout) -> tuple[dict, dict]:
    """Return (lower relations, facts per task relation) from one share's packed input rows."""
    lower: dict[str, pl.DataFrame] = {}
    facts: dict[str, list[pl.DataFrame]] = {}
    frames = source_frames(part, [frame_schema(layout.decls[n]) for n, _ in layout.sources])
    for (name, is_facts), frame in zip(layout.sources, frames, strict=True):
        if is_facts:
            facts.setdefault(name, []).append(frame)
        else:
            lower[name] = frame
    return lower, with_program_facts(layout, facts)


def with_program_facts(layout: Layout, facts: Mapping[str, list[pl.DataFrame]]) -> dict:
    """Return per task relation its fact frames and the program's own facts, concatenated."""
    facts = {n: list(frames) for n, frames in facts.items()}
    for name, rows in layout.facts.items():
        schema = frame_schema(layout.decls[name])
        facts.setdefault(name, []).append(pl.DataFrame(rows, schema=schema, orient="row"))
    return {n: pl.concat(frames) for n, frames in facts.items()}


def share_filter(layout, index: int):
    """Return the function that keeps a relation's tuples whose carried key hashes to `index`."""
    def keep(name: str, df: pl.DataFrame) -> pl.DataFrame:
        column = pl.col(f"c{layout.key[name]}")
        return df.filter(column.hash(seed=7) % layout.parts == index)
    return keep


def pack_outcome(outcome: TaskOutcome, layout: Layout, schema: pa.Schema,
                 symbols: pl.Series) -> Iterator[pa.RecordBatch]:
    """Yield the outcome's relations (and its round count) as batches of the packed schema."""
    if not layout.emit:  # their counts only
        counts = [outcome.rows.get(name, 0) for name in layout.names]
        rels = COUNT_REL - np.arange(len(counts), dtype=np.int32)
        yield batch({"_it": pa.array(counts, pa.int64())}, len(counts), rels, schema)
        yield batch({"_it": pa.array([outcome.iterations], pa.int64())}, 1, STATS_REL, schema)
        return
    for r, name in enumerate(layout.names):
        df = decode(outcome.relation(name, ranked=layout.ranked), layout.decls[name], symbols)
        if not df.height:
            continue
        cols = {f"o{r}_{c}": df[c].to_arrow() for c in df.columns if c != "_it"}
        if layout.ranked:
            cols["_it"] = df["_it"].to_arrow()
        yield batch(cols, df.height, r, schema)
    yield batch({"_it": pa.array([outcome.iterations], pa.int64())}, 1, STATS_REL, schema)


def batch(cols: dict, rows: int, rel, schema: pa.Schema) -> pa.RecordBatch:
    """Return one batch of `rows` rows for relation `rel` (or one `_rel` per row): its columns,
    nulls elsewhere."""
    arrays = []
    for f in schema:
        if f.name == "_rel":
            arrays.append(pa.array(np.broadcast_to(np.asarray(rel, np.int32), rows)))
        elif f.name in cols:
            arrays.append(cols[f.name].cast(f.type))
        else:
            arrays.append(pa.nulls(rows, f.type))
    table = pa.Table.from_arrays(arrays, schema=schema)
    return table.combine_chunks().to_batches()[0]


def evaluate_partition(layout: Layout, batches: Iterable[pa.RecordBatch]
                       ) -> Iterator[pa.RecordBatch]:
    """Yield the packed relations a partition's shares derive from its packed input batches."""
    schema = output_schema(layout.names, layout.decls)
    for index, rows in shares_of(batches):
        lower, facts = _sources(rows, layout)
        share = share_filter(layout, index) if layout.key is not None else None
        yield from _run_encoded(layout, lower, facts, share, schema, index)


def _run_encoded(layout: Layout, lower: dict, facts: dict, share, schema: pa.Schema,
                 index: int) -> Iterator[pa.RecordBatch]:
    """Yield a share's packed relations, its fixpoint run over symbols encoded as integers."""
    outcome, symbols, coded = evaluate_encoded(layout, lower, facts, share)
    if layout.keep is not None:
        keep_share(layout, index, outcome, symbols, coded)
    yield from pack_outcome(outcome, layout, schema, symbols)


def keep_share(layout: Layout, index: int, outcome: TaskOutcome, symbols, coded: dict) -> None:
    """Leave share `index`'s result where its epochs find it (layout.keep: lineage, token):
    its ranked tuples, symbols and the lower relations they came from (dred_share.py)."""
    ranked = {n: outcome.relation(n, ranked=True) for n in layout.names}
    kept = {n: df for n, df in coded.items() if not n.startswith(BASE_FACTS)}
    lineage, token = layout.keep
    resident.store(lineage, index, token, (ranked, symbols, kept))


def evaluate_encoded(layout: Layout, lower: Mapping[str, pl.DataFrame],
                     facts: Mapping[str, pl.DataFrame], share=None
                     ) -> tuple[TaskOutcome, pl.Series | None, dict[str, pl.DataFrame]]:
    """Return (the task's fixpoint over symbols encoded as integers, the symbols, the encoded
    lower relations): what a worker's share runs, and the driver plan (plans/driver.py)."""
    decls = layout.decls
    symbols = dictionary([(decls[n], df) for n, df in (*lower.items(), *facts.items())],
                         layout.rules + layout.subsumes)
    coded = {n: encode(df, decls[n], symbols) for n, df in lower.items()}
    # A path expression's closure runs the native BFS operator, with the same outcome shape.
    # Without ranks (nobody reads them, nothing stays resident) it searches once per component.
    evaluate = task_evaluator(layout.closure, ranked=layout.ranked or layout.keep is not None)
    rules, coded_decls = encoded_program(layout.rules + layout.subsumes, decls, symbols)
    if layout.subsumes:  # pruned each round (plans/subsume.py)
        cut = len(rules) - len(layout.subsumes)
        evaluate = partial(run_subsumed, subs=rules[cut:])
        rules = rules[:cut]
    outcome = evaluate(rules, layout.names, coded_decls, coded,
                       {n: encode(df, decls[n], symbols) for n, df in facts.items()}, share,
                       layout.limit)
    return outcome, symbols, coded
