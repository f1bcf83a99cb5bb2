"""Directives and qualifiers: `.pragma` and `.plan` accepted and noted once, `.limitsize`
honoured by a from-scratch run (maintained: tests/test_limitsize.py), relation qualifiers
(brie, btree, btree_delete, inline, no_inline, magic, no_magic, overridable) accepted, and an
inline relation evaluated like any other (same results)."""

from __future__ import annotations

import pytest
from lowered import check_lowered, write_facts

from levelflow.engine.evaluate import evaluate_program
from levelflow.engine.runner import run_program
from levelflow.tasks import DatalogError, build_tasks, load_program, parse_program

QUALIFIED = """.pragma "magic-transform" "*"
.pragma "legacy"
.decl e(x:number, y:number) brie
.decl p(x:number, y:number) btree
.decl q(x:number, y:number) btree_delete
.decl step(x:number, y:number) inline
.decl r(x:number, y:number) no_inline magic
.decl s(x:number) no_magic overridable
.input e
.output p
p(x, y) :- e(x, y).
p(x, z) :- p(x, y), step(y, z).
.plan 0:(1,2), 1:(2,1)
step(x, y) :- e(x, y), x != y.
q(x, y) :- p(x, y), !step(x, y).
r(y, x) :- q(x, y).
s(x) :- r(x, _).
"""


def test_pragmas_and_plans_make_one_note_printed_once(tmp_path, capsys):
    path = tmp_path / "q.dl"
    path.write_text(QUALIFIED)
    program = load_program(path)
    note = (f'{path}: note: ignored .pragma "magic-transform" "*", .pragma "legacy", 1 .plan '
            "clause (levelflow has no such options and orders joins itself)")
    assert program.notes == (note,)
    assert capsys.readouterr().err == note + "\n"
    parse_program(QUALIFIED, "q.dl")  # a reload from stored text prints nothing
    assert capsys.readouterr().err == ""


def test_a_program_without_them_has_no_note():
    assert parse_program(".decl a(x:number)\na(1).", "t.dl").notes == ()


def test_qualified_and_inline_relations_run_like_plain_ones(spark, tmp_path):
    facts = {"e": {(1, 2), (2, 3), (3, 3), (3, 4)}}
    # step drops the self-loop (3, 3); p is e's transitive closure through step
    p = {(1, 2), (2, 3), (3, 3), (3, 4), (1, 3), (1, 4), (2, 4)}
    q = p - {(1, 2), (2, 3), (3, 4)}
    expected = {"p": p, "q": q, "r": {(y, x) for x, y in q}, "s": {(3,), (4,)}}
    check_lowered(spark, tmp_path, QUALIFIED, facts, expected)
    plain = parse_program(QUALIFIED.replace(" inline", ""), "plain.dl")
    assert plain.rules == parse_program(QUALIFIED, "q.dl").rules


LIMITED = """.decl e(x:number, y:number)
.input e
.decl path(x:number, y:number)
.limitsize path(n=4)
.output path
.decl from1(y:number)
.output from1
path(x, y) :- e(x, y).
path(x, z) :- path(x, y), e(y, z).
from1(y) :- path(1, y).
"""


def test_limitsize_keeps_n_tuples_and_what_reads_it_sees_them(spark, tmp_path):
    write_facts(tmp_path / "f", {"e": {(1, 2), (2, 3), (3, 4), (4, 5)}})
    pt = build_tasks(parse_program(LIMITED, "l.dl"))
    result = run_program(spark, pt, tmp_path / "f", tmp_path / "out", jobs=1)
    # the 10 pairs of the closure, cut to the 4 smallest: (1,2) (1,3) (1,4) (1,5)
    assert sorted((tmp_path / "out" / "path.csv").read_text().split("\n")) == [
        "", "1\t2", "1\t3", "1\t4", "1\t5"]
    assert sorted((tmp_path / "out" / "from1.csv").read_text().split()) == ["2", "3", "4", "5"]
    assert result.task_stats is not None
    scratch = evaluate_program(spark, pt, tmp_path / "f")
    assert sorted(tuple(r) for r in scratch["path"].collect()) == [(1, 2), (1, 3), (1, 4), (1, 5)]


@pytest.mark.parametrize(("text", "where", "fragment"), [
    (".decl a(x:number)\n.limitsize a(n=many)", "2:12", "takes one option n=N"),
    (".decl a(x:number)\n.limitsize a(n=2, m=3)", "2:12", "takes one option n=N"),
    (".limitsize b(n=2)", "1:12", "relation 'b' is not declared"),
    (".decl a(x:number)\n.decl b(x:number)\n.limitsize a(n=1)\na(x) :- b(x).\nb(x) :- a(x).",
     "3:12", "'.limitsize' of 'a', which is in a recursive cycle with other relations"),
    ('.pragma "a" "b" "c"', "1:17", "expected a directive, a rule or a fact"),
    (".decl a(x:number)\na(1).\n.plan 0:(1,", "3:12", "expected ')'"),
])
def test_bad_directives_are_one_line(text, where, fragment):
    with pytest.raises(DatalogError) as e:
        parse_program(text, "t.dl")
    assert str(e.value).startswith(f"t.dl:{where}: error: ") and fragment in str(e.value), \
        str(e.value)
