"""Base-fact changes given as DataFrames: `session.apply` and the micro-batches of a stream.

Everything is checked before anything is queued: a DataFrame that does not fit its relation, an
unknown relation or a bad op marker is one InputError line, and nothing is applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.incremental.updates import Op
from levelflow.engine.spark_io import (
    InputError,
    conformed_columns,
    rows_of_arrow,
    rows_of_frame,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from levelflow.tasks.ast import Program

# Markers an op column may hold: numbers +1 / -1, or these words (case ignored).
INSERT_WORDS = ("+", "+1", "1", "insert", "i", "add")
DELETE_WORDS = ("-", "-1", "delete", "d", "remove")


def _input(program: Program, name: str, what: str):
    """Return the declaration of input relation `name`; raise InputError naming `what`."""
    if name not in program.inputs:
        kind = "an input relation" if name in program.decls else "a relation"
        raise InputError(f"{what}: error: {name!r} is not {kind} of {program.file}")
    return program.decls[name]


def ops_of_frames(program: Program, inserts: dict, removes: dict) -> list[Op]:
    """Return the ops removing, then inserting, each DataFrame's rows (all checked first)."""
    ops = []
    for sign, frames, verb in ((-1, removes, "removes"), (+1, inserts, "inserts")):
        for name, df in frames.items():
            decl = _input(program, name, verb)
            what = f"relation {name} ({verb} DataFrame)"
            ops.extend(Op(sign, name, row) for row in rows_of_frame(decl, df, what))
    return ops


def ops_of_batch(program: Program, relation: str, df: DataFrame, op_column: str) -> list[Op]:
    """Return the ops of one micro-batch: per distinct tuple, the sign of its markers' sum
    (insert when positive, remove when negative, nothing when they cancel). One job."""
    import pyspark.sql.functions as F

    decl = _input(program, relation, "stream")
    what = f"relation {relation} (stream)"
    if op_column not in df.columns:
        raise InputError(f"{what}: error: no op column {op_column!r} (columns: "
                         f"{', '.join(df.columns)})")
    fields = [f for f in df.schema.fields if f.name != op_column]
    cols = conformed_columns(decl, fields, what) if decl.arity else [F.lit(True).alias("c0")]
    op = F.col(f"`{op_column}`").cast("string")
    marker = F.lower(F.trim(op))
    sign = F.when(marker.isin(*INSERT_WORDS), 1).when(marker.isin(*DELETE_WORDS), -1)
    # Per tuple: the net of its markers, and one marker that is neither (null if none).
    net = (df.select(*cols, sign.alias("_sign"), op.alias("_op"))
           .groupBy(*[f"c{i}" for i in range(max(decl.arity, 1))])
           .agg(F.sum("_sign").alias("_net"),
                F.max(F.when(F.col("_sign").isNull(), F.coalesce("_op", F.lit("null"))))
                .alias("_bad"))
           .filter("_net != 0 OR _bad IS NOT NULL"))
    table = net.toArrow()
    bad = [b for b in table.column("_bad").to_pylist() if b is not None]
    if bad:
        raise InputError(f"{what}: error: op {bad[0]!r} in column {op_column!r} is not an "
                         f"insert or delete marker (1/-1, insert/delete, +/-)")
    signs = table.column("_net").to_pylist()
    rows = rows_of_arrow(decl, table, what)
    return [Op(1 if n > 0 else -1, relation, row) for row, n in zip(rows, signs, strict=True)]
