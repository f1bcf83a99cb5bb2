"""An error raised inside a Spark Python worker reaches the user as its own one line.

Spark wraps it ("An exception was thrown from the Python worker", the worker's traceback, its
own stack); `one_line` keeps only the error: a levelflow error's own message (it names the
file and line), any other as `Type: message`.
"""

from __future__ import annotations

import pytest

from levelflow.engine.workers import one_line, spark_error_types, worker_error


def _fail_in_worker(spark, make_error):
    def run(batches):
        for _ in batches:
            pass
        raise make_error()
        yield  # a generator, as mapInArrow wants

    with pytest.raises(spark_error_types()) as e:
        spark.range(3).mapInArrow(run, "id long").collect()
    return e.value


def test_a_levelflow_error_in_a_worker_is_its_own_message(spark):
    from levelflow.engine.rules import CompileError

    exc = _fail_in_worker(spark, lambda: CompileError("p.dl:6:31: error: variable X is not "
                                                      "grounded"))
    assert "Python worker" in str(exc) or "Traceback" in str(exc)  # Spark's wrapper
    assert one_line(exc) == "p.dl:6:31: error: variable X is not grounded"


def test_any_other_error_in_a_worker_is_its_type_and_message(spark):
    exc = _fail_in_worker(spark, lambda: ValueError("data does not match\nsecond line"))
    assert one_line(exc) == "ValueError: data does not match"


def test_the_last_traceback_of_a_chain_is_the_error():
    text = ("[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback "
            "(most recent call last):\n  File \"a.py\", line 1, in f\n    g()\nKeyError: 'x'\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n  File \"a.py\", line 3, in f\n"
            "polars.exceptions.ShapeError: data does not match the number of columns\n"
            " SQLSTATE: 38000\n\tat org.apache.spark.api.python.BasePythonRunner")
    assert worker_error(text) == "ShapeError: data does not match the number of columns"
    assert worker_error("java.lang.OutOfMemoryError: Java heap space") is None
