"""sql_text: column names quoted for SQL text, and conditions built as text, select what the
Column API selects."""

import pyspark.sql.functions as F

from levelflow.engine.sql_text import col, exprs, quoted, quoted_list


def test_quoted_names_survive_backticks_spaces_and_case(spark):
    names = ["a`b", "c d", "Up", "_rel"]
    df = spark.createDataFrame([(1, 2, 3, 4), (5, 6, 7, 8)], names)
    got = df.selectExpr(*[f"{quoted(n)} AS {quoted(n + '`x')}" for n in names])
    assert got.columns == [n + "`x" for n in names]
    assert [tuple(r) for r in got.collect()] == [(1, 2, 3, 4), (5, 6, 7, 8)]
    hashed = df.selectExpr(f"xxhash64({quoted_list(names)}) AS h").collect()
    plain = df.toDF("p", "q", "r", "s")  # F.col cannot name `a``b`; a hash ignores names
    assert hashed == plain.select(F.xxhash64("p", "q", "r", "s").alias("h")).collect()


def test_sql_conditions_count_what_column_conditions_count(spark):
    df = spark.createDataFrame([(r, o, n) for r in (0, 1) for o in (-1, 0, 2) for n in (0, 3)],
                               ["_rel", "_old", "_new"])

    def conds(c):
        rel, old, new = c("_rel"), c("_old"), c("_new")
        return [(rel == 1) & (old <= 0) & (new > 0), (old > 0) & (new <= 0) & (rel == 0),
                (old < 0) & (new >= 3)]

    want = df.agg(*[F.sum(F.when(c, 1).otherwise(0)).alias(f"k{i}")
                    for i, c in enumerate(conds(F.col))]).collect()
    got = df.agg(*exprs(*[f"sum(CASE WHEN {c} THEN 1 ELSE 0 END) AS k{i}"
                          for i, c in enumerate(conds(col))])).collect()
    assert got == want and list(want[0]) == [2, 1, 2]


def test_a_condition_refuses_an_operand_it_would_misread():
    """A str would be pasted in as a column name and a float could lose digits: refused."""
    import pytest

    from levelflow.engine.sql_text import col

    text = str((col("a") == 3) & (col("b") <= col("c")))  # Sql's == makes SQL, str's compares
    assert text == "((`a` = 3) AND (`b` <= `c`))"
    for bad in ("x", 1.5, True):
        with pytest.raises(TypeError):
            col("a") == bad  # noqa: B015
