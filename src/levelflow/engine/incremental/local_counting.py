"""Counting's signed derivations computed in the driver, when every row they read is there.

A counted task below an arranged one often reads only that task's change, which a direct epoch
brought back to the driver (local_frames.py), and the epoch's facts. Its rules' delta terms
(counting.py) then run in Polars on those rows: no Spark plan is built, and when the count
changes sum to nothing (cyclic(x) :- path(x, x) over new paths of a DAG) no Spark job runs.
A term that reads a relation held only on the Spark side sends the whole task back to Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from levelflow.engine.incremental.joins import as_positive
from levelflow.engine.incremental.local_frames import polars_of, rows_of
from levelflow.engine.plans.columnar import body_rows, frame_schema, head_rows
from levelflow.tasks.ast import Wildcard

if TYPE_CHECKING:
    from levelflow.engine.incremental.versions import TaskContext
    from levelflow.tasks.tasks import Task


class _NotHeld(Exception):
    """A term reads rows the driver does not hold."""


def summed_in_driver(ctx: TaskContext, task: Task) -> dict[str, pl.DataFrame] | None:
    """Return per own relation its tuples whose derivation count changes, with the change
    `_d` (never 0), computed in Polars; None when a term reads rows the driver does not hold."""
    parts: dict[str, list[pl.DataFrame]] = {n: [] for n in task.relations}
    try:
        for name in task.relations:
            b = ctx.base.get(name)
            if b is not None and b.changed:
                for df, rows, sign in ((b.plus, b.plus_rows, 1), (b.minus, b.minus_rows, -1)):
                    if rows:
                        parts[name].append(_signed(_held(ctx, name, df), sign))
        for rule in task.rules:
            if rule.body:
                _rule_terms(ctx, task, rule, parts)
    except _NotHeld:
        return None
    return {n: _summed(ctx, n, frames) for n, frames in parts.items()}


def _rule_terms(ctx: TaskContext, task: Task, rule, parts: dict) -> None:
    """Add a rule's signed heads, new(A1..Ai-1) x delta(Ai) x old(Ai+1..An), to `parts`."""
    atoms = rule.body_atoms()
    for i, atom, neg in atoms:
        ver = ctx.versions[atom.relation]
        if not ver.changed:
            continue
        if neg and any(isinstance(a, Wildcard) for a in atom.args):
            raise _NotHeld  # its delta is a projection Spark computes (Versions.delta)
        frames = {j: _held(ctx, a.relation, ctx.versions[a.relation].new if j < i
                           else ctx.versions[a.relation].old)
                  for j, a, _ in atoms if j != i}
        variant = as_positive(rule, i) if neg else rule
        for deleting in (False, True):
            df, rows = ver.delta(atom, neg, deleting)
            if not rows:
                continue
            frames[i] = _held(ctx, atom.relation, df)
            body, types = body_rows(variant, ctx.decls, frames, first=i)
            for head in variant.heads:
                if head.relation in parts:
                    heads = head_rows(body, types, head, ctx.decls[head.relation])
                    parts[head.relation].append(_signed(heads, -1 if deleting else 1))


def _held(ctx: TaskContext, name: str, df) -> pl.DataFrame:
    """Return the rows behind a frame as Polars, or raise _NotHeld."""
    table = rows_of(df)
    if table is None:
        raise _NotHeld
    return polars_of(table, ctx.decls[name])


def _signed(df: pl.DataFrame, sign: int) -> pl.DataFrame:
    return df.with_columns(pl.lit(sign, pl.Int64).alias("_s"))


def _summed(ctx: TaskContext, name: str, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Return the tuples of `frames` with their summed signs `_d`, those summing to 0 left out."""
    schema = frame_schema(ctx.decls[name])
    if not frames:
        return pl.DataFrame(schema={**schema, "_d": pl.Int64})
    return pl.concat(frames).group_by(list(schema)).agg(pl.col("_s").sum().alias("_d")) \
        .filter(pl.col("_d") != 0)
