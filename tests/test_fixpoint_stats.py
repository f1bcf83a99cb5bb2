"""Cut plans must not carry compounding size estimates from one fixpoint round to the next."""

from levelflow.engine.evaluate import cut


def _estimate_digits(df) -> int:
    """Return the number of digits of Spark's size estimate for df's optimized plan."""
    return len(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


def test_joined_deltas_keep_a_bounded_size_estimate(spark):
    # delta_{i+1} = delta_i ⋈ delta_i, as when a recursive rule joins two recursive atoms:
    # Spark multiplies the sides' estimates, so uncut estimates double their digits each round.
    delta, _ = cut(spark.createDataFrame([(i, i + 1) for i in range(4)], ["a", "b"]))
    for _ in range(8):
        left = delta.withColumnRenamed("b", "k")
        right = delta.withColumnRenamed("a", "k")
        delta, rows = cut(left.join(right, "k").select("a", "b"))
    assert rows == 0  # a chain of 4 edges has no path of 2^8 edges
    assert _estimate_digits(delta) < 25
