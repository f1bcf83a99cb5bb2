"""`.limitsize r(n=N)`: a relation keeps the N smallest tuples of its task's fixpoint.

Soufflé stops a limited relation's fixpoint once it holds N tuples or more, so which tuples it
keeps depends on its evaluation order (its indexes, its threads). levelflow keeps, whenever the
relation's task has reached its fixpoint, the N smallest of its tuples in the relation's order
(columns left to right, each in its type's order): the same set from scratch and after any
epoch, and the whole relation when it has at most N tuples, as in Soufflé. What reads the
relation sees the kept tuples; the task's own rules see its whole fixpoint.

An epoch recomputes a limited task from scratch and diffs the kept tuples against the old ones
(engine/incremental/epoch.py calls `limited` and `keep_smallest`): maintaining the cut
tuple by tuple would need the uncut fixpoint stored beside it.
"""

from __future__ import annotations

from collections.abc import Iterable

from levelflow.engine.types import column_names


def limit_of(program, name: str) -> int | None:
    """Return N of `.limitsize name(n=N)`, or None when the relation has no limit."""
    for relation, n, _ in program.limits:
        if relation == name:
            return n
    return None


def limited(program, relations: Iterable[str]) -> bool:
    """Return whether any of `relations` has a `.limitsize`."""
    return any(limit_of(program, r) is not None for r in relations)


def smallest(df, n: int, arity: int):
    """Return the n smallest tuples of `df` (a DataFrame or, in the driver, a Polars frame or
    a DataFrame over rows it holds, cut there) by its first `arity` columns (others ride
    along)."""
    import polars as pl

    from levelflow.engine.incremental.backends.driver_rows import arrow_of, rows_like, rows_of

    if isinstance(df, pl.DataFrame):
        return df.sort(column_names(arity)).head(n)
    table = rows_of(df)
    if table is not None:  # as Spark's orderBy orders these columns' values
        cut = rows_like(df, arrow_of(smallest(pl.from_arrow(table), n, arity)))
        if cut is not None:
            return cut
    return df.orderBy(*column_names(arity)).limit(n)


def keep_smallest(program, name: str, df, rows: int) -> tuple:
    """Return (df, rows) cut to the relation's limit: unchanged when it has none or fits."""
    n = limit_of(program, name)
    if n is None or rows <= n:
        return df, rows
    return smallest(df, n, program.decls[name].arity), n


def limit_relations(program, names, relations: dict, rows: dict) -> None:
    """Cut each of `names` under a `.limitsize` to its N smallest tuples, in place."""
    for name in names:
        if name in relations and limit_of(program, name) is not None:
            df = relations[name]
            count = rows[name] if name in rows else df.count()
            relations[name], rows[name] = keep_smallest(program, name, df, count)
