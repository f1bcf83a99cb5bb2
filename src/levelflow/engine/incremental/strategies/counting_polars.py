"""Counting's signed derivations computed in Polars: in the driver, or in a Python worker.

A counted task below an arranged one often reads only that task's change, which a direct epoch
brought back to the driver (driver_rows.py), and the epoch's facts. Its rules' delta terms
(counting_spark.py) then run in Polars on those rows: no Spark plan is built, and when the count
changes sum to nothing (cyclic(x) :- path(x, x) over new paths of a DAG) no Spark job runs.
A term that reads a relation held only on the Spark side sends the whole task elsewhere.
The terms themselves (`count_changes`) are a function of Polars frames, which the worker that
keeps a counted task's state calls too (counting_share.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import polars as pl

from levelflow.engine.incremental.backends.driver_rows import polars_of, rows_of
from levelflow.engine.incremental.strategies.rewrites import as_positive
from levelflow.engine.plans.columnar import body_rows, frame_schema, head_rows
from levelflow.tasks.ast import Wildcard

if TYPE_CHECKING:
    from collections.abc import Mapping

    from levelflow.engine.incremental.versions import TaskContext
    from levelflow.tasks.ast import Atom, Decl, Rule
    from levelflow.tasks.tasks import Task


class Rows(Protocol):
    """The lower relations' versions and net change, as Polars frames."""

    def changed(self, name: str) -> bool:
        """Return whether the relation has a net change."""

    def version(self, name: str, new: bool) -> pl.DataFrame:
        """Return the relation's new (or old) tuples."""

    def change(self, name: str, plus: bool) -> pl.DataFrame:
        """Return the relation's net Δ+ (or Δ-), empty when there is none."""


class _NotHeld(Exception):
    """A term reads rows the driver does not hold."""


def summed_in_driver(ctx: TaskContext, task: Task) -> dict[str, pl.DataFrame] | None:
    """Return per own relation its tuples whose derivation count changes, with the change
    `_d` (never 0), computed in Polars; None when a term reads rows the driver does not hold."""
    rows = _DriverRows(ctx)
    try:
        facts = {}
        for name in task.relations:
            b = ctx.base.get(name)
            if b is not None and b.changed:
                facts[name] = (rows.change_of(name, b.plus, b.plus_rows),
                               rows.change_of(name, b.minus, b.minus_rows))
        return count_changes(task.rules, task.relations, ctx.decls, rows, facts)
    except _NotHeld:
        return None


class _DriverRows:
    """Rows over an epoch's Versions, for frames made from rows the driver holds."""

    def __init__(self, ctx: TaskContext) -> None:
        self.ctx = ctx

    def changed(self, name: str) -> bool:
        return self.ctx.versions[name].changed

    def version(self, name: str, new: bool) -> pl.DataFrame:
        ver = self.ctx.versions[name]
        return self._held(name, ver.new if new else ver.old)

    def change(self, name: str, plus: bool) -> pl.DataFrame:
        ver = self.ctx.versions[name]
        return self.change_of(name, *((ver.plus, ver.plus_rows) if plus
                                      else (ver.minus, ver.minus_rows)))

    def change_of(self, name: str, df, rows: int) -> pl.DataFrame:
        """Return a change's rows (none: an empty frame, the frame may be None)."""
        return self._held(name, df) if rows else pl.DataFrame(
            schema=frame_schema(self.ctx.decls[name]))

    def _held(self, name: str, df) -> pl.DataFrame:
        """Return the rows behind a frame as Polars, or raise _NotHeld."""
        table = rows_of(df)
        if table is None:
            raise _NotHeld
        return polars_of(table, self.ctx.decls[name])


def count_changes(rules: tuple[Rule, ...], names: tuple[str, ...], decls: Mapping[str, Decl],
                  rows: Rows, facts: Mapping[str, tuple[pl.DataFrame, pl.DataFrame]]
                  ) -> dict[str, pl.DataFrame]:
    """Return per relation of `names` its tuples whose derivation count changes, with the
    change `_d` (never 0): the rules' delta terms plus the base facts' (Δ+, Δ-) `facts`."""
    parts: dict[str, list[pl.DataFrame]] = {n: [] for n in names}
    for name, (plus, minus) in facts.items():
        parts[name] += [_signed(plus, 1), _signed(minus, -1)]
    for rule in rules:
        if rule.body:
            _rule_terms(rule, decls, rows, parts)
    return {n: _summed(decls[n], frames) for n, frames in parts.items()}


def _rule_terms(rule: Rule, decls, rows: Rows, parts: dict) -> None:
    """Add a rule's signed heads, new(A1..Ai-1) x delta(Ai) x old(Ai+1..An), to `parts`."""
    atoms = rule.body_atoms()
    for i, atom, neg in atoms:
        if not rows.changed(atom.relation):
            continue
        frames = None
        variant = as_positive(rule, i) if neg else rule
        for deleting in (False, True):
            delta = atom_delta(rows, atom, decls[atom.relation], neg, deleting)
            if delta is None or not delta.height:
                continue
            if frames is None:  # only terms with rows read the other atoms
                frames = {j: rows.version(a.relation, j < i) for j, a, _ in atoms if j != i}
            body, types = body_rows(variant, decls, {**frames, i: delta}, first=i)
            for head in variant.heads:
                if head.relation in parts:
                    heads = head_rows(body, types, head, decls[head.relation])
                    parts[head.relation].append(_signed(heads, -1 if deleting else 1))


def atom_delta(rows: Rows, atom: Atom, decl: Decl, negated: bool, deleting: bool
               ) -> pl.DataFrame | None:
    """Return the tuples through which `atom` loses (deleting) or gains derivations, as
    Versions.delta: a negated atom `!A` loses where A's projection on its non-wildcard
    positions became present, gains where it vanished (padded with nulls), else None."""
    name = atom.relation
    if not negated:
        return rows.change(name, plus=not deleting)
    keep = [i for i, a in enumerate(atom.args) if not isinstance(a, Wildcard)]
    present = deleting
    src = rows.change(name, plus=present)
    if len(keep) == decl.arity or not src.height:
        return src
    other = rows.version(name, new=not present)
    cols = [f"c{i}" for i in keep]
    if cols:
        changed = src.select(cols).unique().join(other.select(cols), on=cols, how="anti")
    elif not other.height:
        changed = src.head(1)  # `!r(_, _)`: the relation became non-empty (or empty)
    else:
        return None
    schema = frame_schema(decl)
    return changed.select([pl.col(c) if c in cols else pl.lit(None, t).alias(c)
                           for c, t in schema.items()])


def _signed(df: pl.DataFrame, sign: int) -> pl.DataFrame:
    return df.with_columns(pl.lit(sign, pl.Int64).alias("_s"))


def _summed(decl: Decl, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Return the tuples of `frames` with their summed signs `_d`, those summing to 0 left out."""
    schema = frame_schema(decl)
    if not frames:
        return pl.DataFrame(schema={**schema, "_d": pl.Int64})
    return pl.concat(frames).group_by(list(schema)).agg(pl.col("_s").sum().alias("_d")) \
        .filter(pl.col("_d") != 0)
