"""Datalog types as Arrow types: what the driver and the Python workers read and write with
pyarrow (types.py's Spark types, one for one), importable without Spark.

Constant: number/unsigned -> int64, float -> float64, symbol -> string; a nullary relation
is one boolean column `c0`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from levelflow.tasks.ast import Decl

ARROW_TYPES = {"number": pa.int64(), "unsigned": pa.int64(), "float": pa.float64(),
               "symbol": pa.string()}


def arrow_types(decl: Decl) -> list[pa.DataType]:
    """Return the Arrow type of each column c0.. of a relation (a nullary one: a boolean)."""
    return [pa.bool_()] if decl.arity == 0 else [ARROW_TYPES[t] for t in decl.types]


def arrow_schema(decl: Decl) -> pa.Schema:
    """Return the Arrow schema of a relation's columns c0.. (types.relation_schema's twin)."""
    return pa.schema([pa.field(f"c{i}", t) for i, t in enumerate(arrow_types(decl))])
