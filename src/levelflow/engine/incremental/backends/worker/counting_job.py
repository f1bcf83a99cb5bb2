"""A counted task's epoch over its counts kept in a Python worker (one Spark job), or in the
driver (no job).

The worker (counting_share.py) keeps the task's derivation counts and the lower relations they
were derived from, under a token naming the epoch, as an arranged task keeps its ranked tuples
(dred_job.py). An epoch ships the lower relations' change and the task's base facts' change,
and brings back the touched tuples with their old and new counts: one job. When every input is
rows the driver holds the job carries them and its output comes back to the driver (a direct
epoch), so the task's Δ± are driver-held too and the tasks below can run direct as well. A
worker without the state answers MISS and the job runs again with the old versions shipped.
The new counts stay a lazy plan over the old ones (epoch.py bounds its growth).

A direct epoch needs no executor at all: the same share runs in the driver's process
(share_job.run_in_driver), and the counts stay in its memory (resident.held_here: no file,
never dropped while the session lives). Counts a worker made move there at the first direct epoch, read from the worker's file
on one machine or shipped by one job; once there they stay, a larger change brought over by a
job. The Spark-side counts are then built from the driver's on first use, not planned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from levelflow.engine.incremental.backends.driver_rows import (
    LazyFrame,
    arrow_of,
    frame_of_table,
    spark_frame,
)
from levelflow.engine.incremental.backends.worker import counting_share
from levelflow.engine.incremental.backends.worker.dred_share import MISS_REL
from levelflow.engine.incremental.backends.worker.share_job import (
    Held,
    direct_input,
    driver_input,
    packed_sources,
    run_direct,
    run_in_driver,
    run_job,
    run_or_ship,
    share_spec,
)
from levelflow.engine.incremental.strategies.counting_spark import counts_change
from levelflow.engine.incremental.versions import Change, TaskContext
from levelflow.engine.plans import resident
from levelflow.engine.plans.in_spark import packed_schema
from levelflow.engine.sql_text import quoted
from levelflow.engine.types import column_names, relation_schema

if TYPE_CHECKING:
    from levelflow.tasks.tasks import Task


def counted_update(ctx: TaskContext, task: Task, held: Held | None, cancel=None
                   ) -> tuple[dict[str, Change], Held]:
    """Return per relation its Change and where the task's counts now live: the epoch run
    where they are kept (run again with them shipped there if they are not). New counts are
    made in the driver; counts a worker made move there at the first epoch whose input the
    driver holds. There they stay."""
    specs, frames = _sources(ctx, task, ship=False)
    spec = share_spec(ctx, task, None, held, 1, specs)
    driver = held is None or held.in_driver or direct_input(frames) is not None
    runs = (_driver_run, _driver_run) if driver else (_run, _run)
    spec, out, seen = run_or_ship(ctx, task, spec, frames, _sources, runs, cancel)
    kept = resident.lookup(spec.lineage, 0, spec.new_token) if driver else None
    changes = {n: _change(ctx, n, out, r, seen, None if kept is None else kept.counts[n])
               for r, n in enumerate(task.relations)}
    return changes, Held(spec.lineage, spec.new_token, 1, in_driver=driver)


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


def _run(ctx: TaskContext, spec, frames):
    """Return (output, observed counts) after one Spark job: direct when it can be."""
    from pyspark.sql.types import LongType, StructField

    def observed(col):
        return _observed(col, len(spec.names))

    packed = direct_input(frames)
    if packed is not None:
        return run_direct(ctx, spec, packed, counting_share.direct_share, observed)
    schema = packed_schema(spec.names, spec.decls, (StructField("_old", LongType()),
                                                    StructField("_new", LongType())))
    return run_job(ctx, spec, frames, counting_share.update_partition, schema, observed)


def _driver_run(ctx: TaskContext, spec, frames):
    """Return (output, observed counts) of the epoch run in the driver: no job when every
    input is rows the driver holds (one per frame it brings over, when shipping)."""
    return run_in_driver(spec, driver_input(ctx.spark, spec, frames), counting_share.direct_share,
                         lambda col: _observed(col, len(spec.names)))


def _change(ctx: TaskContext, n: str, out, r: int, seen, counts: pl.DataFrame | None
            ) -> Change:
    """Return relation n's Change from the epoch's output: its touched tuples' counts;
    `counts`: all of n's new counts, when the driver keeps them."""
    from pyspark.sql.types import LongType, StructField, StructType

    old_c, old = ctx.old_counts[n], ctx.versions[n]
    sizes = {k: int(seen[f"{k}{r}"] or 0) for k in ("rows", "plus", "minus")}
    if not sizes["rows"]:
        return Change(old_c, rows=old.old_rows)
    cols = column_names(ctx.decls[n].arity)
    if not isinstance(out, pl.DataFrame):
        upd = out.filter(f"_rel = {r}").selectExpr(
            *[f"{quoted(f'o{r}_{c}')} AS {quoted(c)}" for c in cols], "_old", "_new")
        return counts_change(old_c, old, cols, upd, sizes)
    mine = out.filter(pl.col("_rel") == r).select(
        *[pl.col(f"o{r}_{c}").alias(c) for c in cols], "_old", "_new")
    fields = relation_schema(ctx.decls[n]).fields
    counted_fields = StructType([*fields, StructField(counting_share.COUNT, LongType())])
    if counts is not None:
        # The driver holds every count: the Spark-side version is built from them on first
        # use, never a plan over the old counts (nothing to cut, no JVM call until read).
        new_c = LazyFrame(lambda: spark_frame(ctx.spark, arrow_of(counts), counted_fields))
    else:
        upd = frame_of_table(ctx.spark, arrow_of(mine), StructType(
            [*fields, StructField("_old", LongType()), StructField("_new", LongType())]))
        new_c = LazyFrame(lambda: counts_change(old_c, old, cols, upd, sizes).new)
    # Δ± and the segment as rows the driver holds: the tasks below can run direct too, and
    # the segment is written from the driver (state.write_all).
    old_, new_ = pl.col("_old"), pl.col("_new")
    plus = mine.filter((old_ <= 0) & (new_ > 0)).select(cols)
    minus = mine.filter((old_ > 0) & (new_ <= 0)).select(cols)
    gone = mine.filter(old_ > 0).select(cols)
    counted = mine.filter(new_ > 0).select(*cols, new_.alias(counting_share.COUNT))

    def held(rows: pl.DataFrame, schema):
        return frame_of_table(ctx.spark, arrow_of(rows), schema)
    return Change(new_c, held(plus, StructType(fields)), sizes["plus"],
                  held(minus, StructType(fields)), sizes["minus"],
                  old.old_rows + sizes["plus"] - sizes["minus"], dirty=True,
                  whole=counts is not None,
                  stored=(held(gone, StructType(fields)), held(counted, counted_fields)))
