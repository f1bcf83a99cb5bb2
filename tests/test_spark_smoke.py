"""The shared SparkSession starts and runs a join (guards the session settings)."""


def test_session_runs_a_join(spark):
    left = spark.createDataFrame([(1, "a"), (2, "b")], ["k", "v"])
    right = spark.createDataFrame([(2, "x"), (3, "y")], ["k", "w"])
    rows = left.join(right, "k").collect()
    assert [(r.k, r.v, r.w) for r in rows] == [(2, "b", "x")]
    assert spark.conf.get("spark.sql.shuffle.partitions") == "1"
