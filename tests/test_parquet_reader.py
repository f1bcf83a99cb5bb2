"""`IO=parquet` inputs read in the driver by pyarrow (engine/parquet_reader.py).

Every answer is cross-checked against Spark's path (spark_io.read_frame_input over the same
file): the same tuples, each once, for every column type and a folder of parts as Spark writes
it; the same one-line InputError for a bad file. The driver's read uses no Spark: it runs on a
stand-in session that fails any use.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_driver_plan import NoSpark

from levelflow.engine.plans.driver import driver_facts
from levelflow.engine.runner import run_program
from levelflow.engine.session import DeferredSession, jobs_started
from levelflow.engine.spark_io import InputError, read_frame_input
from levelflow.tasks import build_tasks, parse_program

TYPES = ".type Pair = [n:number, s:symbol]\n"
ALL = TYPES + ".decl r(a:number, b:unsigned, c:float, d:symbol, e:Pair)\n"
# Every Arrow type the driver reads: number and float columns of each integer width, signed
# and not, a float32, dictionary and large strings, a record spaced as a user writes it; two
# rows repeated.
ROWS = {
    "a": pa.array([1, -2, 1, 3, 1], pa.int64()),
    "b": pa.array([0, 2**32 - 1, 0, 7, 0], pa.uint32()),
    "c": pa.array([0.1, -2.5, 0.1, 1e30, 0.1], pa.float32()),
    "d": pa.array(["x", "y z", "x", "", "x"]).dictionary_encode(),
    "e": pa.array(['[1, "a"]', '[-2,"b c"]', '[1, "a"]', '[3,"a"]', '[1,"a"]'],
                  pa.large_string()),
}
NARROW = (".decl n(a:number, b:number, c:number, d:float, e:float, f:unsigned, g:unsigned)\n",
          {"a": pa.array([-128, 127, 0], pa.int8()), "b": pa.array([-3, 300, 0], pa.int16()),
           "c": pa.array([-5, 2**31 - 1, 0], pa.int32()),
           "d": pa.array([2**53 + 1, -7, 0], pa.int64()),  # rounds to a double as Spark's cast
           "e": pa.array([3, 2**32 - 1, 0], pa.uint32()),
           "f": pa.array([255, 1, 0], pa.uint8()), "g": pa.array([65535, 2, 0], pa.uint16())})


def _program(tmp_path, decl: str, name: str, filename: str):
    """Return the tasks of a program whose relation `name` is an `IO=parquet` input."""
    text = f'{decl}.input {name}(IO=parquet, filename="{filename}")\n'
    pt = build_tasks(parse_program(text, str(tmp_path / "p.dl")))
    return pt.program, pt.task_of(name)


def _both(spark, tmp_path, decl: str, name: str, filename: str):
    """Return (the driver's tuples, Spark's tuples, the tuples of a run in the driver) of the
    input."""
    program, task = _program(tmp_path, decl, name, filename)
    frame = driver_facts(NoSpark(), program, task, tmp_path)[name][0]
    df = read_frame_input(spark, program.decls[name], program.inputs[name], tmp_path)
    text = f'{decl}.input {name}(IO=parquet, filename="{filename}")\n.printsize {name}\n'
    deferred = DeferredSession(_no_spark, start=False)
    run = run_program(deferred, build_tasks(parse_program(text, "p.dl")), tmp_path, None)
    assert not deferred.in_use
    return set(frame.rows()), {tuple(r) for r in df.collect()}, run.printsize[name]


def _no_spark():
    raise RuntimeError("no Spark here")


def _same_error(spark, tmp_path, decl: str, name: str, filename: str) -> str:
    """Return the InputError line both reads give (asserting they give the same one)."""
    program, task = _program(tmp_path, decl, name, filename)
    with pytest.raises(InputError) as driver:
        driver_facts(NoSpark(), program, task, tmp_path)
    with pytest.raises(InputError) as spark_side:
        read_frame_input(spark, program.decls[name], program.inputs[name], tmp_path).collect()
    assert str(driver.value) == str(spark_side.value)
    assert "\n" not in str(driver.value)
    return str(driver.value)


def test_every_column_type_reads_as_spark_reads_it_each_tuple_once(spark, tmp_path):
    pq.write_table(pa.table(ROWS), tmp_path / "r.parquet")
    driver, on_spark, size = _both(spark, tmp_path, ALL, "r", "r.parquet")
    assert driver == on_spark and size == len(on_spark) == 3
    # Columns by name in another order, an extra one ignored.
    shuffled = {k: ROWS[k] for k in ("e", "c", "a", "d", "b")} | {"z": pa.array([0] * 5)}
    pq.write_table(pa.table(shuffled), tmp_path / "s.parquet")
    assert _both(spark, tmp_path, ALL, "r", "s.parquet")[0] == driver
    decl, columns = NARROW
    pq.write_table(pa.table(columns), tmp_path / "n.parquet")
    driver, on_spark, size = _both(spark, tmp_path, decl, "n", "n.parquet")
    assert driver == on_spark and size == 3
    assert (-128, -3, -5, float(2**53), 3.0, 255, 65535) in driver


def test_a_folder_of_parts_as_spark_writes_it_reads_the_same(spark, tmp_path):
    rows = [(i % 7, f"s{i % 5}") for i in range(40)]  # 35 tuples repeated
    spark.createDataFrame(rows, "x long, s string").repartition(3) \
        .write.parquet(str(tmp_path / "parts"))  # part files, _SUCCESS and .crc files
    decl = ".decl p(x:number, s:symbol)\n"
    driver, on_spark, size = _both(spark, tmp_path, decl, "p", "parts")
    assert driver == on_spark == set(rows) and size == len(set(rows))


def test_a_nullary_input_holds_when_its_file_has_a_row(spark, tmp_path):
    pq.write_table(pa.table({"q": pa.array([5, 5], pa.int64())}), tmp_path / "full.parquet")
    pq.write_table(pa.table({"q": pa.array([], pa.int64())}), tmp_path / "empty.parquet")
    for filename, held in (("full.parquet", {(True,)}), ("empty.parquet", set())):
        driver, on_spark, size = _both(spark, tmp_path, ".decl f()\n", "f", filename)
        assert driver == on_spark == held and size == len(held)


BAD = [
    ({"a": [1], "b": [2]}, "expects 5 columns"),
    ({"a": ["1"], "b": [0], "c": [0.5], "d": ["x"], "e": ['[1,"a"]']}, "column 'a' is string"),
    ({"a": [1], "b": [0], "c": [0.5], "d": pa.array([1], pa.int32()), "e": ['[1,"a"]']},
     "column 'd' is int"),
    ({"a": [1, None], "b": [0, 0], "c": [0.5, 0.5], "d": ["x", "y"], "e": ['[1,"a"]'] * 2},
     "null in r.a"),
    ({"a": [1], "b": [-1], "c": [0.5], "d": ["x"], "e": ['[1,"a"]']}, "negative"),
    ({"a": [1, 2], "b": [0, 0], "c": [0.5, math.nan], "d": ["x"] * 2, "e": ['[1,"a"]'] * 2},
     "NaN or infinite"),
    ({"a": [1], "b": [0], "c": [-math.inf], "d": ["x"], "e": ['[1,"a"]']}, "NaN or infinite"),
    ({"a": [1, 2, 3], "b": [0] * 3, "c": [0.5] * 3, "d": ["x"] * 3,
      "e": ["[1, 2]", '[1,"a"]', '["z", 1]']}, 'field 5 of r: ["z", 1]'),  # first in order
]


@pytest.mark.parametrize("columns, part", BAD)
def test_a_bad_file_is_the_same_one_line_as_sparks(spark, tmp_path, columns, part):
    pq.write_table(pa.table(columns), tmp_path / "r.parquet")
    line = _same_error(spark, tmp_path, ALL, "r", "r.parquet")
    assert line.startswith(f"relation r ({tmp_path / 'r.parquet'}): error: ") and part in line


def test_what_only_spark_reads_as_spark_does_goes_to_spark(spark, tmp_path):
    # UINT_64 is decimal(20,0) to Spark: refused with Spark's type name, read by Spark.
    pq.write_table(pa.table({"x": pa.array([1], pa.uint64())}), tmp_path / "u.parquet")
    program, task = _program(tmp_path, ".decl u(x:number)\n", "u", "u.parquet")
    with pytest.raises(AssertionError, match="Spark was used"):
        driver_facts(NoSpark(), program, task, tmp_path)
    with pytest.raises(InputError, match=r"column 'x' is decimal\(20,0\), u.x is number"):
        driver_facts(spark, program, task, tmp_path)
    # A folder with partition folders: Spark adds their column; the driver leaves it to Spark.
    spark.createDataFrame([(1, 2), (3, 4)], "x long, k long").write.partitionBy("k") \
        .parquet(str(tmp_path / "by_k"))
    decl = ".decl e(x:number, k:number)\n"
    program, task = _program(tmp_path, decl, "e", "by_k")
    with pytest.raises(AssertionError, match="Spark was used"):
        driver_facts(NoSpark(), program, task, tmp_path)
    frame = driver_facts(spark, program, task, tmp_path)["e"][0]
    assert set(frame.rows()) == {(1, 2), (3, 4)}


def test_a_run_reads_parquet_without_spark_until_it_passes_the_driver(spark, tmp_path):
    edges = {(i, (i * 7) % 50) for i in range(50)}
    pq.write_table(pa.table({"x": [e[0] for e in sorted(edges)] * 2,
                             "y": [e[1] for e in sorted(edges)] * 2}), tmp_path / "e.parquet")
    text = (".decl edge(x:number, y:number)\n"
            '.input edge(IO=parquet, filename="e.parquet")\n'
            ".decl twice(x:number, z:number)\ntwice(x, z) :- edge(x, y), edge(y, z).\n"
            ".printsize edge\n.printsize twice\n")
    pt = build_tasks(parse_program(text, "p.dl"))

    deferred = DeferredSession(_no_spark, start=False)
    in_driver = run_program(deferred, pt, tmp_path, None)
    assert not deferred.in_use
    # 100 rows in the file's footer: past a driver limit of 60, the input goes to Spark.
    before = jobs_started(spark)
    on_spark = run_program(spark, pt, tmp_path, None, driver_rows=60)
    assert jobs_started(spark) > before
    assert on_spark.task_stats[pt.task_of("edge").id].plan != "driver"
    twice = {(x, z) for x, y in edges for y2, z in edges if y == y2}
    assert in_driver.printsize == on_spark.printsize == {"edge": 50, "twice": len(twice)}
