"""Record and ADT values are checked against their declared types wherever they enter: program
facts and constants (when the program loads, as `run`, `update` and `serve` load it), fact
files (`run -F`), update files (`update --insert`: a diff or a fact file), serve's posted
programs and diffs, and DataFrames (the Python API). A bad value is one line naming the file
(or request, or relation), the line and the field, with a non-zero exit or a 400; nothing
stored changes. Valid values round-trip: written in Soufflé's text form, read back the same.

The expected refusals follow Soufflé's type rules (souffle-lang.github.io/types and its type
checker): a number field holds integers of the number type's range (levelflow's is 64-bit),
an unsigned field no negative one, a symbol field a quoted string (a bare word only in the text
form of fact files, where Soufflé reads symbols bare), each record and ADT branch exactly its
fields, nested alike; `<`, `>`, `<=`, `>=` take numbers and symbols, never records or ADTs.
"""

from __future__ import annotations

import json

import pytest

from levelflow.engine.incremental import StateDir
from levelflow.engine.spark_io import InputError
from levelflow.tasks import parse_program
from levelflow.tasks.record_values import MAX_DEPTH, Types

TYPES = """.type Pair = [a: number, b: symbol]
.type Expr = Num {n: number} | Add {l: Expr, r: Expr}
.type W = [u: unsigned, f: float]
"""
PROGRAM = TYPES + """.decl p(id: number, x: Pair)
.input p
.decl e(x: Expr)
.input e
.decl w(x: W)
.input w
.decl firsts(a: number, b: symbol)
firsts(a, b) :- p(_, [a, b]).
.decl sums(n: number)
sums(a + b) :- e($Add($Num(a), $Num(b))).
.decl us(u: unsigned, f: float)
us(u, f) :- w([u, f]).
.output firsts
.output sums
.output us
.output p
.output e
"""
FACTS = {"p.facts": '1\t[1, a]\n2\t[-2, "b c"]\n',
         "e.facts": "$Add($Num(1), $Num(2))\n$Num(5)\n",
         "w.facts": "[3, 0.5]\n"}
# Soufflé's outputs on FACTS, derived by hand (symbols inside records are written bare).
OUTPUTS = {"firsts": ["-2\tb c", "1\ta"], "sums": ["3"], "us": ["3\t0.5"],
           "p": ["1\t[1, a]", "2\t[-2, b c]"], "e": ["$Add($Num(1), $Num(2))", "$Num(5)"]}


def one_line(err: str) -> str:
    """Return the one line a refusal printed (asserting it is one)."""
    assert err.endswith("\n") and "\n" not in err[:-1], err
    return err[:-1]


def write(folder, files: dict[str, str]):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def lines(folder, name: str) -> list[str]:
    return (folder / f"{name}.csv").read_text().splitlines()


# -- program facts and constants: at load, before Spark -------------------------------------

DECLS = TYPES + """.type S = [s: symbol]
.decl p(x: Pair)
.decl e(x: Expr)
.decl w(x: W)
.decl s(x: S)
.decl n(x: number)
.decl y(x: symbol)
.decl q(x: Pair, y: Pair)
"""


@pytest.mark.parametrize(("text", "col", "message"), [
    ('p([1, "a"]).\np([1, 2]).', 7, 'element 2 of Pair is 2, not a symbol'),
    ('p([1.5, "a"]).', 4, "element 1 of Pair is 1.5, not a number"),
    ('p([12345678901234567890123, "a"]).', 4,
     "element 1 of Pair is 12345678901234567890123, not a 64-bit number"),
    ('e($Num("a")).', 8, 'element 1 of $Num is "a", not a number'),
    ('e($Add($Num(1), $Num(2.5))).', 22, "element 1 of $Num is 2.5, not a number"),
    ("w([-1, 0.5]).", 4, "element 1 of W is -1, not an unsigned number"),
    ("w([1, \"x\"]).", 7, 'element 2 of W is "x", not a float'),
    ("s([1]).", 4, "element 1 of S is 1, not a symbol"),
    # a plain constant where a nested record or ADT is declared
    ('e($Add($Num(1), "x")).', 17, "a value of Expr is written $Num(...) or $Add(...), not \"x\""),
    ("e($Add(3, $Num(1))).", 8, "a value of Expr is written $Num(...) or $Add(...), not 3"),
    ('p([x, y]) :- n(y), y(x).', 3, "type mismatch: element 1 is a symbol, not a number"),
    ('q(a, b) :- p(a), p(b), a < b.', 26, "records and ADT values compare only with = and !="),
    ('q(a, b) :- p(a), p(b), a >= b.', 26, "records and ADT values compare only with = and !="),
    ('q(a, a) :- p(a), e(b), b <= b.', 26, "records and ADT values compare only with = and !="),
    ('p(a) <= p(b) :- a > b.', 19, "records and ADT values compare only with = and !="),
])
def test_a_program_value_of_the_wrong_type_is_one_line(cli, tmp_path, text, col, message):
    """`levelflow graph` loads the program as run, update and serve do: exit 1, one line."""
    program = tmp_path / "v.dl"
    program.write_text(DECLS + text + "\n")
    line = DECLS.count("\n") + text.count("\n") + 1
    code, _, err = cli(["graph", program])
    assert code == 1
    assert one_line(err) == f"{program}:{line}:{col}: error: {message}"


def test_valid_program_values_load_and_keep_their_types():
    program = parse_program(DECLS + 'p([-9223372036854775808, "a"]).\n'
                            "e($Add($Num(1), $Num(-2))).\nw([0, 2]).\n"
                            'q(a, b) :- p(a), p(b), a != b.\n', "v.dl")
    facts = {r.heads[0].relation: r.heads[0].args[0].value for r in program.rules
             if not r.body}
    assert facts == {"p": '[-9223372036854775808,"a"]', "e": '["Add",["Num",1],["Num",-2]]',
                     "w": "[0,2.0]"}  # an integer in a float field is a float, as in Soufflé


# -- the two forms, read and checked --------------------------------------------------------

def _types():
    return Types(parse_program(PROGRAM, "t.dl").decls["p"].record_types)


@pytest.mark.parametrize(("text", "ty", "message"), [
    ("[1, 2.5]", "W", None),
    ("[1.5, a]", "Pair", "element 1 is 1.5, not a number"),
    ("[1e3, a]", "Pair", "element 1 is 1e3, not a number"),
    ("[-1, 2]", "W", "element 1 is -1, not an unsigned number"),
    ("[9223372036854775808, 1]", "W", None),  # Soufflé's unsigned is 64 bits
    ("[18446744073709551616, 1]", "W", "element 1 is 18446744073709551616, not an unsigned "
                                       "number below 2^64"),
    ("[12345678901234567890123, a]", "Pair", "element 1 is 12345678901234567890123, not a "
                                             "64-bit number"),
    ("[1, 1e999]", "W", "element 2 is 1e999, not a finite float"),
    ("[1]", "Pair", "Pair has 2 fields, found 1"),
    ("[1, a, b]", "Pair", "Pair has 2 fields, found more"),
    ("$Add($Num(1), $Num(x))", "Expr", "element 2.1: expected a number"),
    ("$Add($Num(1))", "Expr", "$Add has 2 fields, found 1"),
    ("$Sub($Num(1))", "Expr", "$Sub is not a branch of Expr"),
])
def test_the_text_form_is_read_field_by_field(text, ty, message):
    types = _types()
    if message is None:
        assert types.write(types.read(text, ty), ty) == text
        return
    with pytest.raises(ValueError) as e:
        types.read(text, ty)
    assert e.value.args[0] == message


def test_the_engine_form_is_written_canonically():
    """Equal values must be equal symbols: spacing goes, an integer in a float field is a
    float."""
    types = _types()
    assert types.canonical('[1, "a"]', "Pair") == '[1,"a"]'
    assert types.canonical("[2, 1]", "W") == "[2,1.0]"
    assert types.canonical("null", "Pair") == "null"
    assert types.canonical('["Add",["Num",1], ["Num",2]]', "Expr") == \
        '["Add",["Num",1],["Num",2]]'


@pytest.mark.parametrize(("text", "ty", "message"), [
    ("[1, 2]", "Pair", "element 2 is 2, not a symbol"),
    ('[true, "a"]', "Pair", 'element 1 is true, not a number'),
    ("[-1, 2.0]", "W", "element 1 is -1, not an unsigned number"),
    ('["Num","1"]', "Expr", 'element 1 is "1", not a number'),
    ('["Num"]', "Expr", "$Num has 1 field, found 0"),
    ('["Mul",1]', "Expr", '["Mul",1] is not a branch of Expr'),
    ("[1, a]", "Pair", "not JSON, the form levelflow's DataFrames hold a record in "
                       '([1,"a"], null, ["Num",1])'),
])
def test_the_engine_form_is_checked_field_by_field(text, ty, message):
    with pytest.raises(ValueError) as e:
        _types().canonical(text, ty)
    assert e.value.args[0] == message


def test_rows_take_the_text_form_and_queued_rows_the_engine_form():
    """`session.insert` rows are Soufflé's text; a queued op checked again against a new
    program (`replace_program`) holds the engine's form already."""
    from levelflow.engine.incremental.updates import UpdateError, coerce_row

    program = parse_program(PROGRAM, "t.dl")
    assert coerce_row(program, "e", ("$Num(1)",)) == ('["Num",1]',)
    assert coerce_row(program, "e", ('["Num",1]',), held=True) == ('["Num",1]',)
    assert coerce_row(program, "p", (1, "null"), held=True) == (1, "null")
    assert coerce_row(program, "w", ("[1, -0.5]",)) == ("[1,-0.5]",)
    with pytest.raises(UpdateError) as e:
        coerce_row(program, "w", ("[-1, 0.5]",))
    assert str(e.value) == "<api>: error: field 1 of w: [-1, 0.5]: element 1 is -1, not an " \
                           "unsigned number"
    with pytest.raises(UpdateError) as e:
        coerce_row(program, "e", ("$Num(1)",), held=True)  # text where JSON is held
    assert str(e.value).startswith("<api>: error: field 1 of e: $Num(1): not JSON")


def test_nesting_is_bounded_before_anything_recurses():
    types = _types()

    def nested(depth: int) -> str:
        return "$Add(" * (depth - 1) + "$Num(1)" + ", $Num(2))" * (depth - 1)

    value = types.read(nested(MAX_DEPTH), "Expr")  # MAX_DEPTH levels of parentheses: read
    assert value.count("[") == 2 * MAX_DEPTH - 1 and json.loads(value)[0] == "Add"
    for deep in (nested(MAX_DEPTH + 1), nested(5 * MAX_DEPTH)):
        with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH}"):
            types.read(deep, "Expr")
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH}"):
        types.canonical('["Add",' * 3000 + '["Num",1]' + ',["Num",2]]' * 3000, "Expr")
    # Brackets inside a quoted symbol are text, not nesting.
    assert types.read('[1, "' + "[" * 1000 + '"]', "Pair") == '[1,"' + "[" * 1000 + '"]'


# -- fact files, update files and diffs through the CLI -------------------------------------

def _nested(depth: int) -> str:
    return "$Add(" * (depth - 1) + "$Num(1)" + ", $Num(2))" * (depth - 1)


@pytest.mark.parametrize(("name", "text", "line", "col", "message"), [
    ("p.facts", "1\t[1, a]\n2\t[2.5, b]\n", 2, 4,
     "field 2 of p: [2.5, b]: element 1 is 2.5, not a number"),
    ("e.facts", "$Num(1)\n$Add($Num(1), $Num(x))\n", 2, 20,
     "field 1 of e: $Add($Num(1), $Num(x)): element 2.1: expected a number"),
    ("w.facts", "[-1, 0.5]\n", 1, 2, "field 1 of w: [-1, 0.5]: element 1 is -1, not an "
                                     "unsigned number"),
    ("p.facts", "1\t[99999999999999999999, a]\n", 1, 4, "field 2 of p: "
     "[99999999999999999999, a]: element 1 is 99999999999999999999, not a 64-bit number"),
    ("e.facts", _nested(MAX_DEPTH + 1) + "\n", 1, 1,
     f"field 1 of e: {_nested(MAX_DEPTH + 1)[:57]}...: records or ADTs nested deeper than "
     f"{MAX_DEPTH}"),
])
def test_run_refuses_a_bad_record_in_a_fact_file(cli_spark, cli, tmp_path, name, text, line,
                                                 col, message):
    program = tmp_path / "v.dl"
    program.write_text(PROGRAM)
    facts = write(tmp_path / "f", {**FACTS, name: text})
    code, _, err = cli(["run", program, "-F", facts, "-D", tmp_path / "out", "-q"])
    assert code != 0
    assert one_line(err) == f"{facts / name}:{line}:{col}: error: {message}"
    assert not any((tmp_path / "out").glob("*.csv"))  # nothing written


def test_records_round_trip_through_run_and_update(cli_spark, cli, tmp_path):
    """Outputs in Soufflé's text form read back as the same values; a valid diff applies, a
    bad diff or update fact file is one line and changes nothing."""
    program = tmp_path / "v.dl"
    program.write_text(PROGRAM + ".output w\n")
    state, out = tmp_path / "state", tmp_path / "o0"
    code, _, err = cli(["run", program, "-F", write(tmp_path / "f", FACTS), "-D", out,
                        "--state", state, "-q"])
    assert code == 0, err
    for name, want in {**OUTPUTS, "w": ["[3, 0.5]"]}.items():
        assert lines(out, name) == want, name
    again = write(tmp_path / "f2", {f"{n}.facts": (out / f"{n}.csv").read_text()
                                    for n in ("p", "e", "w")})
    code, _, err = cli(["run", program, "-F", again, "-D", tmp_path / "o2", "-q"])
    assert code == 0, err
    for name in ("firsts", "sums", "us", "p", "e", "w"):
        assert lines(tmp_path / "o2", name) == lines(out, name), name

    epoch = StateDir(state).current()
    bad = {"bad.diff": '+p(4, [1, b])\n+p(5, [1.5, "c"])\n',
           "deep.diff": f"+e({_nested(MAX_DEPTH + 1)})\n",
           "p.facts": '6\t[1, a]\n7\t[x, y]\n'}
    want = {"bad.diff": "bad.diff:2: error: field 2 of p: [1.5, \"c\"]: element 1 is 1.5, not a "
                        "number",
            "deep.diff": f"deep.diff:1: error: field 1 of e: {_nested(MAX_DEPTH + 1)[:57]}...: "
                         f"records or ADTs nested deeper than {MAX_DEPTH}",
            "p.facts": "p.facts:2:4: error: field 2 of p: [x, y]: element 1: expected a number"}
    for name, text in bad.items():
        path = write(tmp_path / "bad", {name: text}) / name
        code, _, err = cli(["update", state, "--insert", path, "-D", tmp_path / "o1"])
        assert code != 0 and one_line(err) == f"{path.parent}/{want[name]}", name
        assert StateDir(state).current() == epoch  # nothing applied

    diff = write(tmp_path, {"good.diff": '+p(3, [7, "x y"])\n-e($Num(5))\n'
                                         "+e($Add($Num(10), $Num(-4)))\n+w([0, 2])\n"})
    code, _, err = cli(["update", state, "--insert", diff / "good.diff", "-D", tmp_path / "o1"])
    assert code == 0, err
    assert StateDir(state).current() == epoch + 1
    o1 = tmp_path / "o1"
    assert lines(o1, "firsts") == ["-2\tb c", "1\ta", "7\tx y"]
    assert lines(o1, "sums") == ["3", "6"]
    assert lines(o1, "us") == ["0\t2", "3\t0.5"]
    # Records are written in the order of their canonical text (Soufflé's: of its ordinals).
    assert sorted(lines(o1, "e")) == ["$Add($Num(1), $Num(2))", "$Add($Num(10), $Num(-4))"]


# -- serve: a posted program or diff -------------------------------------------------------

def test_serve_answers_a_bad_record_with_a_400(spark, tmp_path):
    from test_serve import Served

    from levelflow.engine.incremental import IncrementalSession

    program = tmp_path / "v.dl"
    program.write_text(PROGRAM)
    state = tmp_path / "state"
    IncrementalSession.bootstrap(spark, program, write(tmp_path / "f", FACTS), state).close()
    served = Served(spark, state, factdir=tmp_path)
    try:
        epoch = StateDir(state).current()
        posted = PROGRAM + 'p(9, ["a", 2]).\n'
        status, text = served.request("POST", "/program", posted)
        line = posted.count("\n")
        assert status == 400 and text == f'request:{line}:7: error: element 1 of Pair is "a", ' \
                                         "not a number\n"
        status, text = served.request("POST", "/epoch", "+w([1, 2])\n+w([-1, 2])\n")
        assert status == 400 and text == "request:2: error: field 1 of w: [-1, 2]: element 1 " \
                                         "is -1, not an unsigned number\n"
        assert StateDir(state).current() == epoch and not served.session.pending
        status, text = served.request("POST", "/epoch", '+p(3, [7, "x y"])\n')
        assert status == 200, text
        status, text = served.request("GET", "/relations/firsts")
        assert status == 200 and text.splitlines() == ["-2\tb c", "1\ta", "7\tx y"]
    finally:
        served.close()


# -- DataFrames: the Python API -------------------------------------------------------------

def test_dataframes_hold_records_as_levelflow_gives_them(spark, tmp_path):
    import levelflow
    from levelflow.engine.incremental import IncrementalSession

    facts = write(tmp_path / "f", FACTS)
    program = tmp_path / "v.dl"
    program.write_text(PROGRAM)
    first = levelflow.run(program, facts, spark=spark)
    p = first.relation("p")  # id, x: the engine's JSON form
    assert {tuple(r) for r in p.collect()} == {(1, '[1,"a"]'), (2, '[-2,"b c"]')}
    # Fed back in, and the same values spaced otherwise: the same relations.
    spaced = spark.createDataFrame([(1, '[1, "a"]'), (2, '[-2,  "b c"]')], "id long, x string")
    for frame in (p, spaced):
        got = levelflow.run(program, facts, spark=spark, inputs={"p": frame})
        assert {tuple(r) for r in got.relation("firsts").collect()} == {(1, "a"), (-2, "b c")}
        assert {tuple(r) for r in got.relation("p").collect()} == \
            {(1, '[1,"a"]'), (2, '[-2,"b c"]')}
    for rows, message in [
        ([(1, "[1, 2]")], "field 2 of p: [1, 2]: element 2 is 2, not a symbol"),
        ([(1, '[1.5, "a"]')], 'field 2 of p: [1.5, "a"]: element 1 is 1.5, not a number'),
        ([(1, "[1, a]")], "field 2 of p: [1, a]: not JSON, the form levelflow's DataFrames "
                          'hold a record in ([1,"a"], null, ["Num",1])'),
    ]:
        bad = spark.createDataFrame(rows, "id long, x string")
        with pytest.raises(InputError) as e:
            levelflow.run(program, facts, tmp_path / "out", spark=spark, inputs={"p": bad})
        assert str(e.value) == f"relation p (DataFrame): error: {message}"
    session = IncrementalSession.bootstrap(spark, program, facts, mode="incremental")
    try:
        bad = spark.createDataFrame([('["Add",["Num",1],["Num","x"]]',)], "x string")
        with pytest.raises(InputError) as e:
            session.apply(inserts={"e": bad})
        assert str(e.value) == "relation e (inserts DataFrame): error: field 1 of e: " \
                               '["Add",["Num",1],["Num","x"]]: element 2.1 is "x", not a number'
        good = spark.createDataFrame([('["Add",["Num",4], ["Num",5]]',)], "x string")
        session.apply(inserts={"e": good})
        assert {tuple(r) for r in session.relation("sums").collect()} == {(3,), (9,)}
    finally:
        session.close()
