"""A counted task's epoch over its counts kept in the driver: no Spark job when its input is rows
the driver holds.

The share (counting_share.py) keeps the task's derivation counts and the lower relations they
were derived from, under a token naming the epoch, as an arranged task's share keeps its ranked
tuples (dred_job.py), but it runs in the driver's process (share_job.run_in_driver) and its
state stays in the driver's memory (resident.held_here: no file, never dropped while the
session lives). An epoch hands it the lower relations' change and the task's base facts'
change and gets back the touched tuples with their old and new counts. A change the driver
does not hold is brought over by one Spark job; a share without the state (a new one, or one
lost) answers MISS, and the old versions are brought over the same way. The task's Δ± are
rows the driver holds, so the tasks below can run direct too, and the Spark-side counts are
built from the driver's on first use, never planned over the old ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from levelflow.engine.incremental.backends.driver_rows import (
    arrow_of,
    frame_of_table,
    polars_of,
    rows_of,
)
from levelflow.engine.incremental.backends.worker import counting_share
from levelflow.engine.incremental.backends.worker.dred_share import MISS_REL
from levelflow.engine.incremental.backends.worker.share_job import (
    Held,
    driver_input,
    packed_sources,
    run_in_driver,
    run_or_ship,
    share_spec,
)
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.plans import resident
from levelflow.engine.types import column_names, relation_schema

if TYPE_CHECKING:
    from levelflow.tasks.tasks import Task


def counted_update(ctx: TaskContext, task: Task, held: Held | None, cancel=None
                   ) -> tuple[dict[str, Change], Held]:
    """Return per relation its Change and where the task's counts now live: the epoch run
    in the driver over the counts it keeps (run again with the old versions brought over if
    it does not)."""
    specs, frames = _sources(ctx, task, ship=False)
    spec = share_spec(ctx, task, None, held, 1, specs)
    runs = (_driver_run, _driver_run)
    spec, out, seen = run_or_ship(ctx, task, spec, frames, _sources, runs, cancel)
    kept = resident.lookup(spec.lineage, 0, spec.new_token)
    changes = {n: _change(ctx, n, out, r, kept.counts[n], seen)
               for r, n in enumerate(task.relations)}
    return changes, Held(spec.lineage, spec.new_token, 1, in_driver=True)


def _sources(ctx: TaskContext, task: Task, ship: bool) -> tuple[list, list]:
    """Return the (relation, kind) of each packed source and its frame: the lower relations'
    and base facts' change, and with `ship` their old versions."""
    if ship:
        return packed_sources(ctx, task, ("old", "old"), ("fold", "old"))
    return packed_sources(ctx, task, None, None)


def _observed(col, relations: int):
    """Yield what an epoch's output is observed by (arranged.run_job's `observed`): per
    relation its touched rows, those whose count became positive (plus), fell to 0 (minus)."""
    rel, old, new = col("_rel"), col("_old"), col("_new")
    for r in range(relations):
        yield f"rows{r}", rel == r, "rows"
        yield f"plus{r}", (rel == r) & (old <= 0) & (new > 0), "rows"
        yield f"minus{r}", (rel == r) & (old > 0) & (new <= 0), "rows"
    yield "misses", rel == MISS_REL, "rows"


def _driver_run(ctx: TaskContext, spec, frames):
    """Return (output, observed counts) of the epoch run in the driver: no job when every
    input is rows the driver holds, else one bringing them over."""
    return run_in_driver(spec, driver_input(ctx.spark, spec, frames), counting_share.driver_share,
                         lambda col: _observed(col, len(spec.names)))


def _change(ctx: TaskContext, n: str, out: pl.DataFrame, r: int, counts: pl.DataFrame, seen
            ) -> Change:
    """Return relation n's Change from the epoch's output (its touched tuples' counts) and
    all of n's new counts, which the driver keeps."""
    from pyspark.sql.types import LongType, StructField, StructType

    old_c, old = ctx.old_counts[n], ctx.versions[n]
    sizes = {k: int(seen[f"{k}{r}"] or 0) for k in ("rows", "plus", "minus")}
    cols = column_names(ctx.decls[n].arity)
    if not old.old_rows and counts.height:
        # Nothing before (a bootstrap): every counted tuple is new, the program's facts too,
        # which the share counts among the old counts and so never reports as touched.
        mine = counts.select(*cols, pl.lit(0, pl.Int64).alias("_old"),
                             pl.col(counting_share.COUNT).alias("_new"))
        sizes = {"rows": counts.height, "plus": counts.height, "minus": 0}
    elif not sizes["rows"]:
        return Change(old_c, rows=old.old_rows)
    else:
        mine = out.filter(pl.col("_rel") == r).select(
            *[pl.col(f"o{r}_{c}").alias(c) for c in cols], "_old", "_new")
    fields = StructType(relation_schema(ctx.decls[n]).fields)
    counted_fields = StructType([*fields, StructField(counting_share.COUNT, LongType())])
    # The Spark-side version is built from the driver's counts on first use, never a plan
    # over the old counts (nothing to cut, no JVM call until something reads it).
    new_c = frame_of_table(ctx.spark, arrow_of(counts), counted_fields)
    # Δ± and the segment as rows the driver holds: the tasks below can run direct too, and
    # the segment is written from the driver (state.write_all).
    old_, new_ = pl.col("_old"), pl.col("_new")
    plus = mine.filter((old_ <= 0) & (new_ > 0)).select(cols)
    minus = mine.filter((old_ > 0) & (new_ <= 0)).select(cols)
    gone = mine.filter(old_ > 0).select(cols)
    counted = mine.filter(new_ > 0).select(*cols, new_.alias(counting_share.COUNT))

    def held(rows: pl.DataFrame, schema):
        return frame_of_table(ctx.spark, arrow_of(rows), schema)
    return Change(new_c, held(plus, fields), sizes["plus"], held(minus, fields), sizes["minus"],
                  old.old_rows + sizes["plus"] - sizes["minus"], dirty=True, whole=True,
                  stored=(held(gone, fields), held(counted, counted_fields)))


def scratch_in_driver(ctx: TaskContext, task: Task) -> dict[str, tuple] | None:
    """Return per relation its derivation counts from scratch (a frame of rows the driver
    holds, its rows) counted in the driver as a share counts them (counting_share's
    scratch_counts) over the new versions; None when the driver does not hold them all."""
    from pyspark.sql.types import LongType, StructField, StructType

    def held(name: str, df):
        table = rows_of(df)
        return None if table is None else polars_of(table, ctx.decls[name])

    lower = {n: held(n, ctx.versions[n].new) for n in task.reads_from}
    facts = {n: held(n, ctx.base[n].new) for n in task.relations if n in ctx.base}
    if any(df is None for df in (*lower.values(), *facts.values())):
        return None
    spec = share_spec(ctx, task, None, None, 1, ())
    out = {}
    for n, counts in counting_share.scratch_counts(spec, lower, facts).items():
        schema = StructType([*relation_schema(ctx.decls[n]).fields,
                             StructField(counting_share.COUNT, LongType())])
        out[n] = frame_of_table(ctx.spark, arrow_of(counts), schema), counts.height
    return out
