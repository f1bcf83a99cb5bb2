"""Datalog types as Spark types: positional columns c0..c{n-1}, one Spark type per primitive.

Constant: the mapping number/unsigned -> LongType, float -> DoubleType, symbol -> StringType.
A nullary relation is one BooleanType column `c0`: one row (True) when it holds, none otherwise,
so that every relation keeps at least one column and Spark joins, unions and distincts just work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from levelflow.engine.sql_text import null_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

    from levelflow.tasks.ast import Decl

# The Spark type of each primitive (pyspark.sql.types' name): imported where first used, so
# that work in the driver alone never imports Spark.
_SPARK_TYPES = {"number": "LongType", "unsigned": "LongType", "float": "DoubleType",
                "symbol": "StringType"}

# The SQL type names, for Column.cast.
SQL_TYPES: dict[str, str] = {"number": "bigint", "unsigned": "bigint", "float": "double",
                             "symbol": "string"}


def spark_type(primitive: str) -> DataType:
    """Return the Spark type that stores a value of the given primitive Datalog type."""
    from pyspark.sql import types

    try:
        return getattr(types, _SPARK_TYPES[primitive])()
    except KeyError:
        raise ValueError(f"unknown primitive type {primitive!r}") from None


def column_names(arity: int) -> list[str]:
    """Return the internal column names of a relation of this arity (c0 for a nullary one)."""
    return [f"c{i}" for i in range(max(arity, 1))]


def relation_schema(decl: Decl) -> StructType:
    """Return the Spark schema of a declared relation (positional columns c0..c{n-1})."""
    from pyspark.sql.types import BooleanType, StructField, StructType

    if decl.arity == 0:
        return StructType([StructField("c0", BooleanType(), True)])
    return StructType([StructField(f"c{i}", spark_type(t), True)
                       for i, t in enumerate(decl.types)])


# Up to this many rows a frame of Python tuples is parsed from one JSON literal inside the JVM;
# createDataFrame needs Python workers, whose start costs ~1 s after a pause.
LITERAL_ROWS = 50_000


def empty_relation(spark: SparkSession, decl: Decl) -> DataFrame:
    """Return an empty DataFrame with the relation's schema (one per schema and session)."""
    # Building one is a dozen JVM calls; an epoch asks for several, and a DataFrame is immutable.
    made = spark.__dict__.setdefault("_levelflow_empty_relations", {})
    key = (decl.arity, tuple(decl.types))
    if key not in made:
        made[key] = rows_frame(spark, decl, [])
    return made[key]


def relation_rows(decl: Decl, rows: list[tuple]) -> list[tuple]:
    """Return the relation's column rows of its facts: a nullary fact `()` is the row c0 = true."""
    return rows if decl.arity else [(True,)] * bool(rows)


def rows_frame(spark: SparkSession, decl: Decl, rows: list[tuple]) -> DataFrame:
    """Return a DataFrame of the given Python tuples with the relation's schema (nullary: `()`)."""
    import json

    import pyspark.sql.functions as F
    from pyspark.sql.types import ArrayType

    from levelflow.engine.session import columns_ready

    columns_ready()  # F.lit below
    schema = relation_schema(decl)
    rows = relation_rows(decl, rows)
    if len(rows) > LITERAL_ROWS:
        return spark.createDataFrame(rows, schema)
    if not rows:
        return spark.range(0).selectExpr(*[  # SQL text: one JVM call a column, not four
            null_of(f)
            for f in schema.fields])
    names = schema.fieldNames()
    text = json.dumps([dict(zip(names, row, strict=True)) for row in rows])
    parsed = F.from_json(F.lit(text), ArrayType(schema), {"allowNonNumericNumbers": "true"})
    return spark.range(1).select(F.inline(parsed))


def arrow_schema_of_spark(schema: StructType):
    """Return the Arrow schema of a Spark schema of the engine's types (what PySpark's
    to_arrow_schema gives for them, without importing pandas: work in the driver alone)."""
    import pyarrow as pa

    arrow = {"LongType": pa.int64(), "DoubleType": pa.float64(), "StringType": pa.string(),
             "BooleanType": pa.bool_(), "IntegerType": pa.int32()}
    return pa.schema([pa.field(f.name, arrow[type(f.dataType).__name__], f.nullable)
                      for f in schema.fields])
