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
    (insert when positive, remove when negative, nothing when they cancel). One job.

    The tuples are netted in the driver, in the batch's order of rows where they tie: a
    grouped sum in Spark would add a shuffle job to every epoch."""
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
    # One job, no shuffle: a micro-batch is small, and its rows are netted on Arrow columns.
    table = df.select(*cols, sign.alias("_sign"), op.alias("_op")).toArrow()
    return _net_ops(decl, relation, table, op_column, what)


def _net_ops(decl, relation: str, table, op_column: str, what: str) -> list[Op]:
    """Return the ops of a batch's rows (c0.., _sign, _op): per tuple its markers' net sign."""
    import pyarrow.compute as pc

    unknown = pc.is_null(table.column("_sign"))
    if pc.any(unknown).as_py():
        bad = table.filter(unknown).column("_op")[0].as_py()
        raise InputError(f"{what}: error: op {bad!r} in column {op_column!r} is not an "
                         f"insert or delete marker (1/-1, insert/delete, +/-)")
    keys = [f"c{i}" for i in range(max(decl.arity, 1))]
    net = table.group_by(keys, use_threads=False).aggregate([("_sign", "sum")])
    net = net.filter(pc.not_equal(net.column("_sign_sum"), 0))
    rows = rows_of_arrow(decl, net, what)
    signs = net.column("_sign_sum").to_pylist()
    return [Op(1 if n > 0 else -1, relation, row) for row, n in zip(rows, signs, strict=True)]
