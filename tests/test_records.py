"""Records and algebraic data types: Soufflé's answers written out by hand, the naive reference
under every plan, fact files and outputs in Soufflé's text form, and incremental epochs (with a
durable restart) equal to from-scratch evaluation.
"""

from __future__ import annotations

import random

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_incremental_properties import rows_of, write_facts

from levelflow.engine.facts import FactError
from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.record_values import Types

# partitioned: see test_partitioned_plan_carries_records. auto is no other path: on these sizes
# it runs one-pass tasks as global does and recursive ones as local does (plans/planner.py).
PLANS = ("local", "global")

RECORDS = """
.type Pair = [a: number, b: symbol]
.type List = [head: number, tail: List]
.type Nest = [p: Pair, f: float]
.decl pairs(p: Pair)
.input pairs
.decl firsts(x: number, s: symbol)
firsts(x, s) :- pairs([x, s]).
.decl mk(p: Pair)
mk([x + 1, s]) :- firsts(x, s).
.decl lst(l: List)
lst([1, nil]).
lst([x + 1, l]) :- lst(l), l = [x, _], x < 4.
.decl heads(x: number)
heads(x) :- lst([x, _]).
.decl two(x: number, y: number)
two(x, y) :- lst([x, [y, _]]).
.decl nest(n: Nest)
nest([p, 0.5]) :- pairs(p), p = [1, _].
.decl same(p: Pair)
same(p) :- mk(p), pairs(q), q = [x, s], p = [x + 1, s].
.decl nils(l: List)
nils(l) :- lst(l), l = [_, nil].
.decl chained(x: number)
chained(x) :- pairs(p), p = q, q = [x, _].
.decl rebuilt(p: Pair)
rebuilt(p) :- firsts(x, s), p = q, q = [x, s].
.output chained
.output rebuilt
.output mk
.output lst
.output two
.output heads
.output nest
.output same
.output nils
"""

# Soufflé's output of RECORDS over PAIRS_TEXT, derived by hand.
PAIRS_TEXT = '[1, a]\n[2, "b c"]\n[3,x]\n'
RECORDS_OUT = {
    "mk": ["[2, a]", "[3, b c]", "[4, x]"],
    "lst": ["[1, nil]", "[2, [1, nil]]", "[3, [2, [1, nil]]]", "[4, [3, [2, [1, nil]]]]"],
    "two": ["2\t1", "3\t2", "4\t3"],
    "heads": ["1", "2", "3", "4"],
    "nest": ["[[1, a], 0.5]"],
    "same": ["[2, a]", "[3, b c]", "[4, x]"],
    "nils": ["[1, nil]"],
    # A record variable typed through an equality chain, as Soufflé types it.
    "chained": ["1", "2", "3"],
    "rebuilt": ["[1, a]", "[2, b c]", "[3, x]"],
}

ADTS = """
.type Expr = Num {n: number} | Add {l: Expr, r: Expr} | Neg {e: Expr}
.type Day = Mon {} | Tue {}
.decl expr(e: Expr)
.input expr
.decl sub(e: Expr)
sub(e) :- expr(e).
sub(l) :- sub($Add(l, _)).
sub(r) :- sub($Add(_, r)).
sub(e) :- sub($Neg(e)).
.decl val(e: Expr, v: number)
val(e, n) :- sub(e), e = $Num(n).
val(e, a + b) :- sub(e), e = $Add(l, r), val(l, a), val(r, b).
val(e, 0 - a) :- sub(e), e = $Neg(x), val(x, a).
.decl neg(e: Expr)
neg($Neg(e)) :- val(e, v), v > 2.
.decl day(d: Day, n: number)
day($Mon, 1).
day($Tue, 2).
.decl monday(n: number)
monday(n) :- day($Mon, n).
.decl nums(n: number)
nums(n) :- sub(e), e = f, f = $Num(n).
.output nums
.output val
.output neg
.output day
.output monday
"""
EXPR_TEXT = "$Add($Num(1), $Neg($Num(3)))\n$Num( 7 )\n"
ADTS_OUT = {
    "val": ["$Add($Num(1), $Neg($Num(3)))\t-2", "$Neg($Num(3))\t-3", "$Num(1)\t1",
            "$Num(3)\t3", "$Num(7)\t7"],
    "neg": ["$Neg($Num(3))", "$Neg($Num(7))"],
    "day": ["$Mon\t1", "$Tue\t2"],
    "monday": ["1"],
    "nums": ["1", "3", "7"],
}


def _tasks(text: str):
    return build_tasks(parse_program(text, "r.dl"))


@pytest.mark.parametrize("text,facts,expected", [
    (RECORDS, {"pairs.facts": PAIRS_TEXT}, RECORDS_OUT),
    (ADTS, {"expr.facts": EXPR_TEXT}, ADTS_OUT),
], ids=["records", "adts"])
def test_every_plan_gives_soufflés_text_and_the_naive_reference(spark, tmp_path, text, facts,
                                                                 expected):
    pt = _tasks(text)
    for name, body in facts.items():
        (tmp_path / name).write_text(body)
    ref = naive_evaluate(pt, tmp_path)
    for plan in PLANS:
        out = tmp_path / f"out-{plan}"
        result = run_program(spark, pt, tmp_path, out, jobs=2, plan=plan)
        for name in pt.program.decls:
            got = rows_of(result.relation(name))
            assert got == ref[name], (plan, name, got ^ ref[name])
        for name, lines in expected.items():
            assert sorted((out / f"{name}.csv").read_text().splitlines()) == sorted(lines), \
                (plan, name)


def test_text_form_reads_what_it_writes():
    types = Types(_tasks(RECORDS + ADTS.replace(".input expr", "")).program
                  .decls["nest"].record_types)
    for text, ty in [("[1, a]", "Pair"), ("nil", "List"), ("[1, [2, nil]]", "List"),
                     ("[[-3, x y], 2.5]", "Nest")]:
        assert types.write(types.read(text, ty), ty) == text
    assert types.read('[1, "a,]b"]', "Pair") == '[1,"a,]b"]'  # quoted: commas and brackets
    assert types.read(" [ 1 ,a ] ", "Pair") == '[1,"a "]'  # bare: up to the comma, as Soufflé
    with pytest.raises(ValueError, match="Pair has 2 fields, found more"):
        types.read("[1, a, 2]", "Pair")


def test_a_malformed_record_field_names_file_line_and_column(spark, tmp_path):
    pt = _tasks(RECORDS)
    (tmp_path / "pairs.facts").write_text("[1, a]\n[x, b]\n")
    with pytest.raises(FactError, match=r"pairs\.facts:2:2: error: field 1 of pairs: \[x, b\]: "
                                        r"element 1: expected a number$"):
        run_program(spark, pt, tmp_path, tmp_path / "out", jobs=1, plan="local")


@pytest.mark.parametrize("body,message", [
    ("r([1, 2]) :- n(_).", r"r\.dl:5:3: error: a record or ADT term cannot stand of type number"),
    ("p([1]) :- n(_).", r"r\.dl:5:3: error: Pair has 2 fields but is written with 1"),
    ('p("x") :- n(_).', r'r\.dl:5:3: error: a value of Pair is written \[\.\.\.\] or nil, '
                        r'not "x"'),
    ("r(x) :- p(q), n(x), q < [1, x].", r"r\.dl:5:23: error: records and ADT values compare "
                                        r"only"),
    ("r(x) :- n(x), !p([x, _]).", r"r\.dl:5:22: error: '_' cannot stand in a record that is "
                                  r"built"),
    ("p($Num(1)) :- n(_).", r"r\.dl:5:3: error: '\$Num' is an ADT branch, but Pair is a record"),
])
def test_record_misuse_is_one_located_line(body, message):
    text = (".type Pair = [a: number, b: symbol]\n.decl n(x:number)\n.decl p(x: Pair)\n"
            ".decl r(x: number)\n" + body + "\n")
    with pytest.raises(DatalogError, match=message) as info:
        _tasks(text)
    assert "\n" not in str(info.value)


PATHS = """
.type Path = [last: number, rest: Path]
.decl edge(x: number, y: number)
.input edge
.decl path(x: number, p: Path)
path(y, [y, [x, nil]]) :- edge(x, y).
path(z, [z, p]) :- path(y, p), edge(y, z), p = [_, [_, r]], r = nil.
.decl ends(x: number, y: number)
ends(x, y) :- path(y, [y, [x, nil]]).
.decl mid(m: number)
mid(m) :- path(_, [_, [m, [_, nil]]]).
.decl second(m: number)
second(m) :- path(_, p), p = q, q = [_, [m, _]].
.output path
"""


def test_epochs_and_a_restart_equal_from_scratch(spark, tmp_path):
    """Random edge epochs over rules that build and take apart records, a restart of the
    durable state between them, and a program change that adds a record type."""
    pt = _tasks(PATHS)
    rng = random.Random(11)
    facts = {"edge": {(rng.randrange(8), rng.randrange(8)) for _ in range(14)}}
    write_facts(tmp_path / "f0", facts)
    state = tmp_path / "state"
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", state,
                                           mode="incremental")
    for k in range(1, 3):
        if k == 2:  # a restart: the values read back are the same symbols
            session = IncrementalSession.open(spark, state)
        for row in rng.sample(sorted(facts["edge"]), 3):
            session.remove("edge", row)
            facts["edge"].discard(row)
        for _ in range(3):
            row = (rng.randrange(8), rng.randrange(8))
            session.insert("edge", row)
            facts["edge"].add(row)
        session.commit()
        write_facts(tmp_path / f"ref{k}", facts)
        ref = naive_evaluate(pt, tmp_path / f"ref{k}")
        for name in pt.program.decls:
            assert rows_of(session.relation(name)) == ref[name], (k, name)
    new = PATHS + ".type Hop = [a: number, b: number]\n.decl hops(h: Hop)\n" \
                  "hops([x, y]) :- edge(x, y).\n"
    (tmp_path / "new.dl").write_text(new)
    session.replace_program(str(tmp_path / "new.dl"))
    assert rows_of(session.relation("hops")) == {(f"[{x},{y}]",) for x, y in facts["edge"]}
    ref = naive_evaluate(_tasks(new), tmp_path / "ref2")
    assert rows_of(session.relation("path")) == ref["path"]


def test_partitioned_plan_carries_records(spark, tmp_path):
    """A recursion carrying a record argument unchanged runs under the partitioned plan."""
    text = """
.type Pair = [a: number, b: symbol]
.decl edge(x: number, y: number)
.input edge
.decl reach(p: Pair, y: number)
reach([x, "s"], y) :- edge(x, y).
reach(p, z) :- reach(p, y), edge(y, z).
.decl back(x: number, y: number)
back(x, y) :- reach([x, _], y).
"""
    pt = _tasks(text)
    write_facts(tmp_path, {"edge": {(1, 2), (2, 3), (3, 1), (4, 5)}})
    ref = naive_evaluate(pt, tmp_path)
    result = run_program(spark, pt, tmp_path, tmp_path / "out", jobs=2, plan="partitioned")
    for name in pt.program.decls:
        assert rows_of(result.relation(name)) == ref[name], name
    assert rows_of(result.relation("back")) == {(x, y) for x in (1, 2, 3) for y in (1, 2, 3)} \
        | {(4, 5)}


def test_updates_take_records_in_soufflés_text_form(tmp_path):
    """Diff lines, fact files of an epoch and Python rows all read the text form."""
    from levelflow.engine.incremental.updates import (
        UpdateError,
        coerce_row,
        parse_literal,
        read_update_file,
    )

    program = _tasks(ADTS + ".type Pair = [a: number, b: symbol]\n.decl pp(p: Pair, n: number)\n"
                            ".input pp\n").program
    assert parse_literal(program, 'pp([1, "x, y"], 2)') == ("pp", ('[1,"x, y"]', 2))
    assert parse_literal(program, "expr($Add($Num(1), $Num(2)))") == \
        ("expr", ('["Add",["Num",1],["Num",2]]',))
    assert coerce_row(program, "pp", ("[3, b]", 4)) == ('[3,"b"]', 4)
    with pytest.raises(UpdateError, match=r"<api>: error: field 1 of pp: \[3\]: Pair has 2 "
                                          r"fields, found 1$"):
        coerce_row(program, "pp", ("[3]", 4))
    (tmp_path / "expr.facts").write_text("$Neg($Num(2))\n$Mon\n")
    with pytest.raises(UpdateError, match=r"expr\.facts:2:2: error: field 1 of expr: \$Mon: "
                                          r"\$Mon is not a branch of Expr$"):
        read_update_file(program, tmp_path / "expr.facts", 1)
    (tmp_path / "expr.facts").write_text("$Neg($Num(2))\n")
    ops = read_update_file(program, tmp_path / "expr.facts", 1)
    assert [op.row for op in ops] == [('["Neg",["Num",2]]',)]
