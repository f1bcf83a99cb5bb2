"""Relations from and to Spark: DataFrames, Parquet and catalog tables as inputs and outputs.

One program (tests/data/spark_io: symbols, unsigned, float and number columns) must give the
same relations from its fact files, from DataFrames, from Parquet and from a table, and the
naive evaluator's relations on those files. A bad input is one line naming relation and column.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from naive_datalog import evaluate as naive_evaluate

import levelflow
from levelflow.engine.spark_io import InputError

DATA = Path(__file__).parent / "data" / "spark_io"
PROGRAM = DATA / "program.dl"
EDGES = [("a", "b", 1), ("b", "c", 5), ("c", "d", 2), ("d", "b", 0), ("e", "f", 9)]
SCORES = [("a", 0.25, 1), ("b", 0.75, -2), ("c", 1.5, 3), ("d", 2.0, 0)]


def as_sets(result, names=("path", "cheap", "strong")) -> dict:
    return {n: {tuple(r) for r in result.relation(n).collect()} for n in names}


@pytest.fixture(scope="module")
def expected():
    """The naive evaluator's relations on the fact files."""
    db = naive_evaluate(levelflow.load(PROGRAM), DATA)
    return {n: db[n] for n in ("path", "cheap", "strong")}


@pytest.fixture
def frames(spark):
    edge = spark.createDataFrame(EDGES, "src string, dst string, cost int")
    score = spark.createDataFrame(SCORES, "node string, w double, rank long")
    return edge, score


def test_fact_files_and_dataframes_give_the_naive_relations(spark, frames, expected, tmp_path):
    assert as_sets(levelflow.run(PROGRAM, DATA, spark=spark)) == expected
    edge, score = frames
    got = levelflow.run(PROGRAM, tmp_path, spark=spark, inputs={"edge": edge, "score": score})
    assert as_sets(got) == expected
    # Columns by name in any order, extra ones ignored; by position under other names.
    by_name = edge.selectExpr("cost", "'x' AS note", "dst", "src")
    by_pos = score.toDF("n", "weight", "r")
    got = levelflow.run(PROGRAM, tmp_path, spark=spark, inputs={"edge": by_name, "score": by_pos})
    assert as_sets(got) == expected


def test_parquet_and_table_inputs_give_the_same_relations(spark, frames, expected, tmp_path):
    edge, score = frames
    edge.write.parquet(str(tmp_path / "edges"))
    score.write.parquet(str(tmp_path / "score.parquet"))
    db = tmp_path / "warehouse"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS lf_io LOCATION '{db}'")
    try:
        score.write.mode("overwrite").saveAsTable("lf_io.scores")
        text = PROGRAM.read_text()
        parquet = tmp_path / "parquet.dl"
        parquet.write_text(
            text.replace(".input edge", '.input edge(IO=parquet, filename="edges")')
            .replace(".input score", ".input score(IO=parquet)"))
        assert as_sets(levelflow.run(parquet, tmp_path, spark=spark)) == expected
        table = tmp_path / "table.dl"
        table.write_text(
            text.replace(".input score", '.input score(IO=spark, table="lf_io.scores")'))
        assert as_sets(levelflow.run(table, DATA, spark=spark)) == expected
    finally:
        spark.sql("DROP DATABASE IF EXISTS lf_io CASCADE")


def test_relations_carry_the_declared_attribute_names(spark):
    result = levelflow.run(PROGRAM, DATA, spark=spark)
    assert result.relation("path").columns == ["from", "to"]
    assert result.relation("strong").columns == ["node", "w"]
    assert result.relations["path"].columns == ["c0", "c1"]  # the engine's own names


@pytest.mark.parametrize("make, message", [
    (lambda s: s.createDataFrame([("a", "b")], "src string, dst string"),
     r"relation edge \(DataFrame\): error: expects 3 columns \(src, dst, cost\), found 2"),
    (lambda s: s.createDataFrame([("a", "b", "1")], "p string, q string, r string"),
     r"column 'r' is string, edge.cost is unsigned \(needs an integral column\)"),
    (lambda s: s.createDataFrame([("a", "b", -1)], "src string, dst string, cost long"),
     r"a row holds a negative number \(unsigned\) in edge.cost \(column 3\)"),
    (lambda s: s.createDataFrame([("a", None, 1)], "src string, dst string, cost long"),
     r"a row holds null in edge.dst \(column 2\)"),
])
def test_a_bad_dataframe_is_one_line_and_nothing_is_written(spark, tmp_path, make, message):
    out = tmp_path / "out"
    with pytest.raises(InputError, match=message) as e:
        levelflow.run(PROGRAM, DATA, out, spark=spark, inputs={"edge": make(spark)})
    assert "\n" not in str(e.value)
    assert not out.exists() or not any(out.iterdir())


def test_missing_table_parquet_or_relation_is_one_line(spark, tmp_path):
    text = PROGRAM.read_text()
    (tmp_path / "t.dl").write_text(
        text.replace(".input edge", '.input edge(IO=spark, table="nodb.none")'))
    with pytest.raises(InputError, match=r"^relation edge \(table nodb.none\): error: "):
        levelflow.run(tmp_path / "t.dl", DATA, spark=spark)
    (tmp_path / "p.dl").write_text(text.replace(".input edge", ".input edge(IO=parquet)"))
    shutil.copy(DATA / "score.facts", tmp_path)
    with pytest.raises(InputError, match=r"edge.parquet\): error: no such Parquet file"):
        levelflow.run(tmp_path / "p.dl", tmp_path, spark=spark)
    with pytest.raises(InputError, match=r"inputs: 'path' is not an input relation"):
        levelflow.run(PROGRAM, DATA, spark=spark, inputs={"path": spark.range(1)})
    with pytest.raises(InputError, match=r"^inputs: relation edge expects a DataFrame, got "
                                         r"list$"):
        levelflow.run(PROGRAM, DATA, spark=spark, inputs={"edge": [("a", "b", 1)]})


def test_parquet_and_table_outputs_are_written_all_or_nothing(spark, tmp_path, expected):
    text = PROGRAM.read_text().replace(".output path", ".output path(IO=parquet)")
    (tmp_path / "o.dl").write_text(text.replace(
        ".output cheap", '.output cheap(IO=spark, table="lf_out.cheap")'))
    spark.sql(f"CREATE DATABASE IF NOT EXISTS lf_out LOCATION '{tmp_path / 'wh'}'")
    try:
        out = tmp_path / "out"
        result = levelflow.run(tmp_path / "o.dl", DATA, out, spark=spark)
        assert result.output_counts == {n: len(expected[n]) for n in expected}
        back = spark.read.parquet(str(out / "path.parquet"))
        assert back.columns == ["from", "to"]
        assert {tuple(r) for r in back.collect()} == expected["path"]
        table = spark.table("lf_out.cheap")
        assert table.columns == ["x", "y", "cost"]
        assert {tuple(r) for r in table.collect()} == expected["cheap"]
        # A second run whose table output fails leaves the first run's outputs as they were.
        (tmp_path / "bad.dl").write_text(text.replace(
            ".output cheap", '.output cheap(IO=spark, table="no_such_db.cheap")'))
        before = sorted(p.name for p in out.iterdir())
        shutil.rmtree(out / "path.parquet")
        (out / "path.parquet").mkdir()  # an empty folder stands for "the old output"
        with pytest.raises(InputError, match=r"relation cheap \(no_such_db.cheap\): error: "
                                             r"cannot write"):
            levelflow.run(tmp_path / "bad.dl", DATA, out, spark=spark)
        assert sorted(p.name for p in out.iterdir()) == before
        assert not any((out / "path.parquet").iterdir())
    finally:
        spark.sql("DROP DATABASE IF EXISTS lf_out CASCADE")


def cli(argv, capsys) -> tuple[int, str]:
    from levelflow.cli import main as cli_main

    with pytest.raises(SystemExit) as e:
        cli_main(argv)
    return e.value.code, capsys.readouterr().err


def test_cli_run_state_and_update_read_and_write_parquet(cli_spark, tmp_path, capsys):
    spark = cli_spark
    facts = tmp_path / "facts"
    spark.createDataFrame([(1, 2), (2, 3)], "x long, y long").write.parquet(str(facts / "edges"))
    tc = (Path(__file__).parent.parent / "examples" / "tc" / "program.dl").read_text()
    prog = tmp_path / "p.dl"
    prog.write_text(tc.replace(".input edge", '.input edge(IO=parquet, filename="edges")')
                    .replace(".output path", ".output path(IO=parquet)"))
    out, state = tmp_path / "out", tmp_path / "state"
    code, err = cli(["run", str(prog), "-F", str(facts), "-D", str(out), "-q",
                     "--state", str(state)], capsys)
    assert code == 0, err
    rows = {tuple(r) for r in spark.read.parquet(str(out / "path.parquet")).collect()}
    assert rows == {(1, 2), (2, 3), (1, 3)}
    diff = tmp_path / "d.diff"
    diff.write_text("+edge(3,1)\n")
    code, err = cli(["update", str(state), "--insert", str(diff), "-D", str(out)], capsys)
    assert code == 0, err
    rows = {tuple(r) for r in spark.read.parquet(str(out / "path.parquet")).collect()}
    assert rows == {(a, b) for a in (1, 2, 3) for b in (1, 2, 3)}
    table = tmp_path / "t.dl"
    table.write_text(tc.replace(".input edge", '.input edge(IO=spark, table="db.edges")'))
    code, err = cli(["run", str(table), "-F", str(facts), "-q", "--confine"], capsys)
    assert code == 1 and err.count("\n") == 1
    assert "reads the catalog table db.edges, outside the fact directory (confined)" in err
