"""Column expressions as Spark SQL text, built by one JVM call each.

Building an expression from `F.col`, `F.lit` and Column methods costs one py4j round trip per
piece (about 0.5 ms each here); parsing the same expression from SQL text costs one.
"""

from __future__ import annotations


def quoted(column: str) -> str:
    """Return a column name quoted for Spark SQL (backticks, inner backticks doubled)."""
    return "`" + column.replace("`", "``") + "`"


def quoted_list(columns) -> str:
    """Return column names quoted and comma-separated, as an SQL argument list."""
    return ", ".join(quoted(c) for c in columns)


def exprs(*texts: str) -> list:
    """Return Columns parsed from SQL expressions (`... AS name` names one)."""
    import pyspark.sql.functions as F
    from pyspark import SparkContext

    from levelflow.engine.session import columns_ready

    columns_ready()
    sc = SparkContext._active_spark_context
    if sc is None or getattr(sc, "_jvm", None) is None:
        return [F.expr(t) for t in texts]
    from pyspark.sql.column import Column

    # F.expr looks the JVM function up again on every call (two more round trips).
    parse = sc.__dict__.get("_levelflow_expr")
    if parse is None:
        parse = sc.__dict__["_levelflow_expr"] = sc._jvm.org.apache.spark.sql.functions.expr
    return [Column(parse(t)) for t in texts]


def count_where(condition: str, name: str) -> str:
    """Return SQL for the aggregate counting the rows that meet `condition`, named `name`."""
    return f"sum(CASE WHEN {condition} THEN 1 ELSE 0 END) AS {quoted(name)}"


def null_of(field) -> str:
    """Return SQL for a NULL of a pyspark StructField's type, named as the field."""
    return f"CAST(NULL AS {field.dataType.simpleString()}) AS {quoted(field.name)}"


def _operator(op: str):
    """Return the Sql method writing `self op other` as SQL text."""
    def apply(self, other) -> Sql:
        # Only SQL text and integers are written as they are: a str would be read as a name.
        if not isinstance(other, Sql) and (type(other) is not int):
            raise TypeError(f"Sql {op} {type(other).__name__}: not SQL text or an integer")
        return Sql(f"({self} {op} {other})")
    return apply


class Sql(str):
    """SQL text that composes with the Column operators a condition uses (==, &, <, <=, >,
    >=) into more SQL text, so code written for Columns builds one expression in Python."""

    __hash__ = str.__hash__
    __eq__ = _operator("=")
    __and__ = _operator("AND")
    __lt__ = _operator("<")
    __le__ = _operator("<=")
    __gt__ = _operator(">")
    __ge__ = _operator(">=")


def col(column: str) -> Sql:
    """Return a column as Sql text (what `F.col` is for Columns)."""
    return Sql(quoted(column))
