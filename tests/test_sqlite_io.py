"""`IO=sqlite` inputs and outputs (engine/sqlite_io.py), laid out as Soufflé's SQLite reader
and writer lay them out: an input is the table or view named as the relation; an output is
table `_R` (columns "0", "1", ..., a symbol as its id in `__SymbolTable`) and view `R` over
it, named by the attributes. Every answer is the naive reference's (tests/naive_datalog.py over
the same facts as fact files), under each plan and after an `update` epoch; bad input is one
line naming the program's directive and the database, exit 1.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_incremental_properties import write_facts

from levelflow.engine.paths import PathError, check_io_paths
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.errors import DatalogError

PROGRAM = """.decl edge(a:symbol, b:symbol)
.input edge(IO=sqlite, dbname="in.db")
.decl w(a:symbol, n:number, f:float, u:unsigned)
.input w(IO=sqlite, dbname="in.db")
.decl path(a:symbol, b:symbol)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.decl score(a:symbol, n:number, f:float, u:unsigned)
score(a, n + 1, f * 2.0, u) :- w(a, n, f, u), path(a, a).
.output path(IO=sqlite, dbname="out.db")
.output score(IO=sqlite, dbname="out.db")
.output path
"""
EDGES = {("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e f")}
# 2^64 - 1 is held as the int64 of its bits: -1, as Soufflé stores it in SQLite
W = {("a", 1, 0.5, 7), ("b", -2, 2.25, -1), ("d", 3, 1.0, 0), ("z", 4, 0.0, 1)}


def make_db(path: Path, tables: dict[str, tuple[str, list[tuple]]]) -> Path:
    """Write an SQLite database of `tables`: name -> (column definitions, rows)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path)) as con:
        for name, (cols, rows) in tables.items():
            con.execute(f'CREATE TABLE "{name}" ({cols})')
            if rows:
                marks = ", ".join("?" * len(rows[0]))
                con.executemany(f'INSERT INTO "{name}" VALUES ({marks})', rows)
        con.commit()
    return path


def inputs(folder: Path, edges=EDGES, w=W) -> None:
    """Write in.db (edge as a table holding a repeat, w as a view, as Soufflé's writer makes
    them) and the same facts as fact files for the naive reference."""
    make_db(folder / "in.db", {"edge": ("x TEXT, y TEXT", sorted(edges) + [("a", "b")]),
                               "_w": ("'0' TEXT, '1' INTEGER, '2' REAL, '3' INTEGER, extra",
                                      [(*r, "ignored") for r in sorted(w)])})
    with closing(sqlite3.connect(folder / "in.db")) as con:
        con.execute("CREATE VIEW w AS SELECT * FROM _w")
        con.commit()
    write_facts(folder, {"edge": edges, "w": w})


def view(db: Path, name: str) -> set[tuple]:
    """Return the rows of a database's view (or table) `name`."""
    with closing(sqlite3.connect(db)) as con:
        return set(con.execute(f'SELECT * FROM "{name}"'))


@pytest.mark.parametrize("plan", ["driver", "local", "global"])
def test_run_reads_and_writes_sqlite_as_souffle_under_each_plan(spark, tmp_path, plan):
    inputs(tmp_path)
    pt = build_tasks(parse_program(PROGRAM, "p.dl"))
    ref = naive_evaluate(pt, tmp_path)
    assert ("a", 2, 1.0, 7) in ref["score"] and ("b", -1, 4.5, -1) in ref["score"]
    out = tmp_path / "out"
    make_db(out / "out.db", {"keep": ("x", [(1,)])})  # a table of the user's stays
    result = run_program(spark, pt, tmp_path, out, plan=plan)
    assert result.output_counts == {"path": len(ref["path"]), "score": len(ref["score"])}
    db = out / "out.db"
    assert view(db, "path") == ref["path"] and view(db, "score") == ref["score"]
    assert view(db, "keep") == {(1,)}
    assert sorted(p.name for p in out.iterdir()) == ["out.db", "path.csv"]  # no staged copy
    with closing(sqlite3.connect(db)) as con:
        names = [d[0] for d in con.execute("SELECT * FROM score").description]
        assert names == ["a", "n", "f", "u"]
        table = [d[0] for d in con.execute("SELECT * FROM _score").description]
        assert table == ["0", "1", "2", "3"]
        # the symbol column holds ids of the shared symbol table
        symbols = dict(con.execute("SELECT id, symbol FROM __SymbolTable"))
        raw = set(con.execute('SELECT "0", "1" FROM _path'))
        assert {(symbols[a], symbols[b]) for a, b in raw} == ref["path"]
    # a second run writes the tables anew: no tuple twice
    run_program(spark, pt, tmp_path, out, plan=plan)
    assert len(view(db, "_path")) == len(ref["path"])


@pytest.mark.parametrize("plan", ["driver", "global"])
def test_an_output_database_reads_back_as_input(spark, tmp_path, plan):
    inputs(tmp_path)
    pt = build_tasks(parse_program(PROGRAM, "p.dl"))
    ref = naive_evaluate(pt, tmp_path)
    run_program(spark, pt, tmp_path, tmp_path / "f", plan=plan)
    again = """.decl path(a:symbol, b:symbol)
.input path(IO=sqlite, dbname="out.db")
.decl score(a:symbol, n:number, f:float, u:unsigned)
.input score(IO=sqlite, filename="out.db", dbname="ignored.db")
"""
    result = run_program(spark, build_tasks(parse_program(again, "q.dl")), tmp_path / "f",
                         None, plan=plan)
    for name in ("path", "score"):
        assert {tuple(r) for r in result.relation(name).collect()} == ref[name]


def test_update_epoch_writes_sqlite_outputs_equal_to_a_fresh_run(tmp_path, cli, cli_spark):
    inputs(tmp_path / "facts")
    prog = tmp_path / "p.dl"
    prog.write_text(PROGRAM)
    code, _, err = cli(["run", prog, "-F", tmp_path / "facts", "-D", tmp_path / "out0",
                        "--state", tmp_path / "st", "-q"])
    assert code == 0, err
    diff = tmp_path / "change.diff"
    diff.write_text('+edge("e f","a")\n-edge("c","a")\n+w("e f",9,0.25,5)\n-w("a",1,0.5,7)\n')
    code, _, err = cli(["update", tmp_path / "st", "--insert", diff, "-D", tmp_path / "out1"])
    assert code == 0, err
    edges = EDGES - {("c", "a")} | {("e f", "a")}
    w = W - {("a", 1, 0.5, 7)} | {("e f", 9, 0.25, 5)}
    write_facts(tmp_path / "ref", {"edge": edges, "w": w})
    ref = naive_evaluate(build_tasks(parse_program(PROGRAM, "p.dl")), tmp_path / "ref")
    db = tmp_path / "out1" / "out.db"
    assert view(db, "path") == ref["path"] and view(db, "score") == ref["score"]
    # by hand: the cycle is a b c d "e f" now, and w has no `a`
    assert ref["score"] == {("b", -1, 4.5, -1), ("d", 4, 2.0, 0), ("e f", 10, 0.5, 5)}


BAD = [
    # (the database's tables, the error after `p.dl:2:8: error: .input edge(IO=sqlite) DB: `)
    (None, "no such database file"),
    ({"other": ("x", [])}, "no table or view named 'edge'"),
    ({"edge": ("x TEXT", [("a",)])}, "'edge' has 1 columns, edge has 2 (a, n)"),
    ({"edge": ("x TEXT, y", [("a", None)])}, "a row holds null in edge.n (column 2, 'y')"),
    ({"edge": ("x TEXT, y", [("a", "7")])},
     "a row holds a value that is not an integer in edge.n (column 2, 'y')"),
    ({"edge": ("x TEXT, y", [("b", 1), ("a", 2.5)])},
     "a row holds a value that is not an integer in edge.n (column 2, 'y')"),
]


@pytest.mark.parametrize(("tables", "message"), BAD)
def test_bad_sqlite_input_is_one_line_naming_the_directive(tmp_path, cli, cli_spark, tables,
                                                          message):
    prog = tmp_path / "p.dl"
    prog.write_text('.decl edge(a:symbol, n:number)\n.input edge(IO=sqlite, dbname="in.db")\n'
                    '.output edge\n')
    (tmp_path / "facts").mkdir()
    if tables is not None:
        make_db(tmp_path / "facts" / "in.db", tables)
    code, _, err = cli(["run", prog, "-F", tmp_path / "facts", "-D", tmp_path / "out"])
    assert code == 1
    db = tmp_path / "facts" / "in.db"
    assert err == f"{prog}:2:8: error: .input edge(IO=sqlite) {db}: {message}\n"
    assert not (tmp_path / "out").exists()


def test_floats_and_symbols_read_as_souffle_reads_text(tmp_path):
    """A symbol column takes a number's text; a float an integer; an infinity is refused."""
    from levelflow.engine.spark_io import InputError
    from levelflow.engine.sqlite_io import read_sqlite

    program = parse_program('.decl r(s:symbol, f:float)\n.input r(IO=sqlite)\n', "p.dl")
    make_db(tmp_path / "r.sqlite", {"r": ("s, f", [(12, 3), ("x", 0.5)])})
    table = read_sqlite(program.decls["r"], program.inputs["r"], tmp_path)
    assert set(zip(*table.to_pydict().values(), strict=True)) == {("12", 3.0), ("x", 0.5)}
    make_db(tmp_path / "inf" / "r.sqlite", {"r": ("s, f", [("x", float("inf"))])})
    with pytest.raises(InputError, match=r"^p\.dl:2:8: error: \.input r\(IO=sqlite\) .*r\.sqlite: "
                                         r"a row holds an infinite number in r\.f \(column 2"):
        read_sqlite(program.decls["r"], program.inputs["r"], tmp_path / "inf")


@pytest.mark.parametrize(("directives", "message"), [
    ('.output a(IO=sqlite, dbname="o.db")\n.output a(IO=sqlite, filename="o.db")',
     "3:9: error: the .output directive at 2:9 already writes 'a' to o.db"),
    ('.output a(dbname="o.db")', "2:9: error: dbname= needs IO=sqlite"),
    ('.decl z()\n.output z(IO=sqlite)', "3:9: error: IO=sqlite needs a relation with attributes "
                                        "(Soufflé's tables have none)"),
])
def test_sqlite_directive_misuse_is_refused(directives, message):
    with pytest.raises(DatalogError) as e:
        parse_program(".decl a(x:number)\n" + directives + "\n", "io.dl")
    assert str(e.value) == f"io.dl:{message}"


def test_dbname_follows_the_path_policy_of_filename(tmp_path):
    """Several relations may share one database; --confine keeps it inside -F / -D."""
    prog = tmp_path / "p.dl"
    head = ".decl a(x:number)\n.decl b(x:number)\nb(x) :- a(x).\n"
    prog.write_text(head + '.input a(IO=sqlite, dbname="../secret.db")\n')
    make_db(tmp_path / "secret.db", {"a": ("x INTEGER", [(1,)])})
    program = parse_program(prog.read_text(), str(prog))
    with pytest.raises(PathError, match=r"p\.dl:4:8: error: \.input a reads .*secret\.db, "
                                        r"outside the fact directory"):
        check_io_paths(program, tmp_path / "facts", None, confine=True)
    check_io_paths(program, tmp_path / "facts", None, confine=False)  # Soufflé's default
    out = parse_program(head + '.output a(IO=sqlite, dbname="o.db")\n'
                        '.output b(IO=sqlite, dbname="./o.db")\n', "q.dl")
    check_io_paths(out, tmp_path, tmp_path / "out", confine=True)  # one database, two tables
    both = head + '.input a(IO=sqlite, dbname="x.db")\n.output {}(IO=sqlite, dbname="x.db")\n'
    check_io_paths(parse_program(both.format("b"), "q.dl"), tmp_path, tmp_path)  # a reads, b
    with pytest.raises(PathError, match=r"q\.dl:5:9: error: \.output a would overwrite .*x\.db"):
        check_io_paths(parse_program(both.format("a"), "q.dl"), tmp_path, tmp_path)
    away = parse_program(head + '.output b(IO=sqlite, dbname="/tmp/o.db")\n', "q.dl")
    with pytest.raises(PathError, match=r"q\.dl:4:9: error: \.output b writes /tmp/o\.db, "
                                        r"outside the output directory"):
        check_io_paths(away, tmp_path, tmp_path / "out", confine=True)


def test_records_adts_and_unsigned_round_trip(spark, tmp_path):
    """A record or ADT is stored as its JSON text (a symbol), an unsigned as its 64 bits."""
    types = ".type P = [n:number, s:symbol]\n.type T = A {x:number} | B {}\n"
    out = types + ('.decl r(p:P, t:T, u:unsigned)\nr([1, "a b"], $A(3), 0u - 2u).\n'
                   'r([2, "c"], $B(), 5u).\n.output r(IO=sqlite, dbname="rec.db")\n')
    run_program(spark, build_tasks(parse_program(out, "p.dl")), tmp_path, tmp_path)
    assert view(tmp_path / "rec.db", "r") == {('[1,"a b"]', '["A",3]', -2), ('[2,"c"]', '["B"]', 5)}
    back = types + '.decl r(p:P, t:T, u:unsigned)\n.input r(IO=sqlite, dbname="rec.db")\n'
    result = run_program(spark, build_tasks(parse_program(back, "q.dl")), tmp_path, None)
    assert {tuple(row) for row in result.relation("r").collect()} == \
        {('[1,"a b"]', '["A",3]', -2), ('[2,"c"]', '["B"]', 5)}
