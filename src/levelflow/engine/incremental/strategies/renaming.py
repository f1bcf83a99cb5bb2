"""A task whose one rule copies one relation under a permutation of its arguments:

    back(y, x) :- pick(x, y).        @cand_pick(x, y) :- edge(x, y).

Each tuple has exactly one derivation, so its count is 1 and its change is the source's change
with the columns reordered: an epoch needs no Spark job (counting would run one to learn what
the source's change already says). Rows the driver holds stay held, so a job reading the
change is still direct (backends/driver_rows.py).
"""

from __future__ import annotations

import time

import pyarrow as pa

from levelflow.engine.incremental.backends.driver_rows import (
    LazyFrame,
    frame_of_table,
    rows_of,
    with_constant,
)
from levelflow.engine.incremental.state.snapshot import COUNT
from levelflow.engine.incremental.versions import TaskUpdate, Versions
from levelflow.engine.types import relation_schema
from levelflow.tasks.ast import Atom, Var


def renaming(program, task, counted) -> tuple[str, tuple[int, ...]] | None:
    """Return (source relation, source position per head position) when the task's one rule
    is `h(vars) :- r(same vars, permuted)` over distinct variables of the same types and r is
    in `counted` (its versions hold plain tuples, no ranks); else None."""
    if task.recursive or len(task.rules) != 1 or task.relations[0] in program.inputs:
        return None
    rule = task.rules[0]
    if len(rule.heads) != 1 or len(rule.body) != 1 or not isinstance(rule.body[0], Atom):
        return None
    head, atom = rule.heads[0], rule.body[0]
    if atom.relation not in counted:
        return None
    names = [a.name if isinstance(a, Var) else None for a in atom.args]
    wanted = [a.name if isinstance(a, Var) else None for a in head.args]
    if None in names or None in wanted or len(set(names)) != len(names) or \
            sorted(names) != sorted(wanted):
        return None
    perm = tuple(names.index(n) for n in wanted)
    decl, src = program.decls[head.relation], program.decls[atom.relation]
    if decl.choice or any(decl.types[i] != src.types[p] for i, p in enumerate(perm)):
        return None
    return atom.relation, perm


def _reordered(spark, df, decl, perm: tuple[int, ...]):
    """Return the frame's columns in head order (c0.. renamed), held rows staying held."""
    if df is None or perm == tuple(range(len(perm))):
        return df
    table = rows_of(df)
    if table is not None:
        cols = [table.column(f"c{p}") for p in perm]
        names = [f"c{i}" for i in range(len(perm))]
        return frame_of_table(spark, pa.Table.from_arrays(cols, names), relation_schema(decl))
    import pyspark.sql.functions as F

    return LazyFrame(lambda: df.select(*[F.col(f"c{p}").alias(f"c{i}")
                                         for i, p in enumerate(perm)]))


def renamed_update(spark, v: int, old: Versions, src: Versions, perm: tuple[int, ...],
                   t0: float) -> TaskUpdate:
    """Return the update of task v, of `old`'s relation, whose change is `src`'s, reordered."""
    decl, name = old.decl, old.decl.name
    ver = Versions(decl, old.old, old.old_rows)
    counts, stored = {}, {}
    if src.changed:
        new, plus, minus = (_reordered(spark, df, decl, perm)
                            for df in (src.new, src.plus, src.minus))
        ver.set_change(new, src.new_rows, plus, src.plus_rows, minus, src.minus_rows)
        counts[name] = with_constant(spark, new, decl, COUNT, 1)
        added = with_constant(spark, plus, decl, COUNT, 1) if src.plus_rows else None
        stored[name] = (minus if src.minus_rows else None, added)
    return TaskUpdate(v, "counting", time.perf_counter() - t0, {name: ver}, counts,
                      stored=stored)
