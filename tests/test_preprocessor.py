"""The C preprocessor Soufflé runs first (tasks/preprocess.py): includes (relative to the
including file, then -I), macros, conditionals, __LINE__/__FILE__; errors at the original file
and line, included files too; the stored text an incremental state reloads without the files."""

from __future__ import annotations

import shutil

import pytest
from lowered import rows_of, write_facts

from levelflow.cli import main
from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import DatalogError, build_tasks, load_program, parse_program
from levelflow.tasks.preprocess import needs_preprocessing, preprocess

LIB = """#pragma once
// edges and the macros over them
#define EDGE(a, b) e(a, b)
#define HOP(a, c) EDGE(a, b), EDGE(b, c)
.decl e(x:number, y:number)
.input e
"""
MAIN = """#include "lib.dl"
#include "lib.dl"
#define LIMIT 3
#define TWICE(x) ((x) + (x))
.decl p(x:number, y:number)
.output p
#ifdef LIMIT
p(x, y) :- EDGE(x, y), x < LIMIT.
#else
p(x, y) :- nothing(x, y).
#endif
#if LIMIT > 2 && !defined(FOO)
#  if defined FOO
p(0, 0).
#  elif LIMIT == 3
p(x, TWICE(y)) :- HOP(x, y), __LINE__ = 16.
#  else
p(1, 1).
#  endif
#endif
"""


@pytest.fixture
def tree(tmp_path):
    """main.dl in tmp/src, lib.dl in tmp/lib (found by -I only)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "lib.dl").write_text(LIB)
    (tmp_path / "src" / "main.dl").write_text(MAIN)
    return tmp_path


def _shape(program):
    return [(r.heads[0].relation, [type(x).__name__ for x in r.heads[0].args],
             [getattr(lit, "relation", getattr(lit, "op", "")) for lit in r.body])
            for r in program.rules]


def test_includes_macros_and_conditionals(tree):
    p = load_program(tree / "src" / "main.dl", [tree / "lib"])
    assert list(p.decls) == ["e", "p"]  # lib.dl once, whatever #include says
    assert _shape(p) == [("p", ["Var", "Var"], ["e", "<"]),
                         ("p", ["Var", "BinOp"], ["e", "e", "="])]
    last = p.rules[1]
    assert last.body[2].left.value == 16  # __LINE__ is the line it is on
    assert last.loc.file == str(tree / "src" / "main.dl") and last.loc.line == 16


def test_a_file_beside_the_includer_wins_over_include_dirs(tree):
    (tree / "src" / "lib.dl").write_text(LIB.replace(".input e", ".input e\n.decl extra()"))
    p = load_program(tree / "src" / "main.dl", [tree / "lib"])
    assert "extra" in p.decls


def test_nested_include_is_relative_to_its_own_file_and_dot_include_works(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "leaf.dl").write_text('.decl leaf(x:symbol)\nleaf(__FILE__).\n')
    (tmp_path / "a" / "mid.dl").write_text('.include "b/leaf.dl"\n.once\n')
    (tmp_path / "top.dl").write_text('#include "a/mid.dl"\n.include "a/mid.dl"\n')
    p = load_program(tmp_path / "top.dl")
    (fact,) = p.rules
    assert fact.heads[0].args[0].value == str(tmp_path / "a" / "b" / "leaf.dl")
    assert fact.loc.file == str(tmp_path / "a" / "b" / "leaf.dl") and fact.loc.line == 2


def test_errors_point_at_the_included_file_and_line(tree):
    bad = "\n\n.decl bad(x:number)\nbad(x) :- e(x, _), z < 1.\n"
    (tree / "lib" / "lib.dl").write_text(LIB + bad)
    with pytest.raises(DatalogError) as e:
        load_program(tree / "src" / "main.dl", [tree / "lib"])
    assert str(e.value) == (f"{tree / 'lib' / 'lib.dl'}:10:20: error: variable 'z' is not "
                            "grounded (no positive body atom binds it)")


@pytest.mark.parametrize(("text", "line", "fragment"), [
    ('#include "nope.dl"', 2, "cannot find included file 'nope.dl' (searched "),
    ("#error stop here", 2, "#error stop here"),
    ("#frob", 2, "unknown preprocessor directive '#frob'"),
    ("#ifdef X", 2, "#ifdef without #endif"),
    ("#else", 2, "#else without #if"),
    ("#if 1\n#else\n#else\n#endif", 4, "#else after #else"),
    ("#if 1 +", 2, "#if: cannot read"),
    ("#define F(a, b) a\nF(1).", 3, "macro 'F' takes 2 arguments, given 1"),
    ("#define A B\n#define B A\n.decl A(x:number)\nA(1).", 5, None),  # A stays A, as in C
    ('#include "self.dl"', 2, "includes nest deeper than 64"),
])
def test_preprocessor_errors_are_one_line_at_their_line(tmp_path, text, line, fragment):
    path = tmp_path / "self.dl"
    path.write_text(".decl x(a:number)\n" + text + "\n")
    if fragment is None:
        load_program(path)
        return
    with pytest.raises(DatalogError) as e:
        load_program(path)
    message = str(e.value)
    assert message.startswith(f"{path}:{line}:") and fragment in message, message
    assert "\n" not in message


def test_no_preprocessor_refuses_directives_with_their_line(tmp_path):
    path = tmp_path / "m.dl"
    path.write_text(".decl a(x:number)\n#define N 1\n")
    with pytest.raises(DatalogError, match=r"m\.dl:2:1: error: '#define' needs the C "
                                           r"preprocessor, which --no-preprocessor turned off"):
        load_program(path, preprocessor=False)


def test_strings_and_comments_are_not_expanded():
    p = parse_program('#define N 7\n.decl s(x:symbol, n:number)\n'
                      's("N", N). // N\n/* N\n#define N 8 */ s("a", N).\n', "t.dl")
    assert [tuple(a.value for a in r.heads[0].args) for r in p.rules] == [("N", 7), ("a", 7)]


def test_fast_path_leaves_plain_programs_alone():
    text = '.decl a(x:symbol)\na("#x").\n'
    assert not needs_preprocessing(text)
    assert parse_program(text, "t.dl").source == text


def test_stored_text_reparses_to_the_same_program_without_the_files(tree):
    p = load_program(tree / "src" / "main.dl", [tree / "lib"])
    shutil.rmtree(tree / "lib")
    q = parse_program(p.source, p.file)
    assert q.rules == p.rules and [r.loc for r in q.rules] == [r.loc for r in p.rules]
    assert preprocess(q.source, p.file).stored_text() == q.source  # a fixed point


def test_graph_cli_takes_include_dirs(tree, capsys):
    with pytest.raises(SystemExit) as e:
        main(["graph", "--json", "-I", str(tree / "lib"), str(tree / "src" / "main.dl")])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert '"e"' in out and '"p"' in out
    with pytest.raises(SystemExit) as e:
        main(["graph", str(tree / "src" / "main.dl")])
    assert e.value.code != 0
    assert "cannot find included file 'lib.dl'" in capsys.readouterr().err


def test_preprocessed_program_state_reloads_and_updates(spark, tree):
    facts = {"e": {(0, 1), (1, 2), (2, 3), (3, 4)}}
    write_facts(tree / "f", facts)
    pt = build_tasks(load_program(tree / "src" / "main.dl", [tree / "lib"]))
    session = IncrementalSession.bootstrap(spark, pt, tree / "f", tree / "state")
    # p: e below 3, plus (x, 2z) for every two-hop x -> y -> z
    expected = {(0, 1), (1, 2), (2, 3), (0, 4), (1, 6), (2, 8)}
    assert rows_of(session.relation("p")) == expected
    session.close()
    shutil.rmtree(tree / "lib")  # the state holds the preprocessed text: no -I needed now
    session = IncrementalSession.open(spark, tree / "state")
    try:
        session.remove("e", (1, 2))
        session.commit()
        assert rows_of(session.relation("p")) == {(0, 1), (2, 3), (2, 8)}
        session.insert("e", (1, 2))
        session.commit()
        assert rows_of(session.relation("p")) == expected
    finally:
        session.close()
