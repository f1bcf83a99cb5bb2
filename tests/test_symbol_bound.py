"""Issue 42: no symbol longer than functors.MAX_SYMBOL characters. One a functor makes (cat, a
record or ADT term, a user functor) stops the run or epoch with one line naming the call's
file:line:col, in every plan (Polars in the workers, Spark in the global plan); one a fact file
or a diff brings is refused before Spark with the line and field. Within the bound, symbols
are made as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.engine.facts import FactError, check_fact_lines
from levelflow.engine.incremental.updates import UpdateError, parse_diff
from levelflow.tasks import parse_program
from levelflow.tasks.ast import Decl
from levelflow.tasks.functors import MAX_SYMBOL

TOO_LONG = f"longer than {MAX_SYMBOL:,} characters, the longest symbol levelflow holds"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run(cli, tmp_path: Path, text: str, *flags) -> tuple[int, str, str, Path]:
    prog = write(tmp_path / "p.dl", text)
    (tmp_path / "facts").mkdir(exist_ok=True)
    code, out, err = cli(["run", prog, "-F", tmp_path / "facts", "-D", tmp_path / "out", "-q",
                          *flags])
    return code, out, err, prog


# The rule, with a carried key k so that every plan applies (partitioned carries k).
DOUBLING = """.decl s(k:number, x:symbol)
.output s
s(1, "ab").
s(k, cat(x, x)) :- s(k, x).
"""


@pytest.mark.parametrize("plan", ["local", "partitioned", "global"])
def test_a_doubling_symbol_stops_at_the_bound_in_one_line(tmp_path, cli, cli_spark, plan):
    code, out, err, prog = run(cli, tmp_path, DOUBLING, "--plan", plan)
    assert (code, out) == (1, "")
    assert err == (f"{prog}:4:6: error: cat makes a symbol longer than {MAX_SYMBOL:,} "
                   f"characters, the longest levelflow holds; stopped\n")
    assert not (tmp_path / "out").exists()


def test_a_record_growing_without_end_stops_at_the_bound(tmp_path, cli, cli_spark):
    text = (".type T = [l:T, r:T]\n.decl t(x:T)\n.output t\nt(nil).\n"
            "t([x, x]) :- t(x).\n")
    code, out, err, prog = run(cli, tmp_path, text)
    assert (code, out) == (1, "")
    assert err == (f"{prog}:5:3: error: a record or ADT term makes a symbol longer than "
                   f"{MAX_SYMBOL:,} characters, the longest levelflow holds; stopped\n")


@pytest.mark.parametrize("plan", ["local", "global"])
def test_symbols_within_the_bound_are_made(tmp_path, cli, cli_spark, plan):
    text = DOUBLING.replace("s(k, x).", "s(k, x), strlen(x) < 1000.")
    code, _, err, _ = run(cli, tmp_path, text, "--plan", plan)
    assert code == 0, err
    # "ab" doubled while shorter than 1000: lengths 2, 4, ..., 1024
    rows = (tmp_path / "out" / "s.csv").read_text().splitlines()
    assert sorted(len(r.split("\t")[1]) for r in rows) == [2 ** k for k in range(1, 11)]
    assert all(r.split("\t")[1] == "ab" * (len(r.split("\t")[1]) // 2) for r in rows)


def test_a_fact_file_symbol_past_the_bound_is_refused_before_spark(tmp_path, cli):
    write(tmp_path / "facts" / "s.facts", "1\t" + "x" * (MAX_SYMBOL + 1) + "\n")
    code, out, err, prog = run(cli, tmp_path, ".decl s(k:number, x:symbol)\n.input s\n")
    assert (code, out) == (1, "")
    assert err == (f"{tmp_path}/facts/s.facts:1:3: error: field 2 {'x' * 40!r}... "
                   f"({MAX_SYMBOL + 1:,} chars) is {TOO_LONG} (s.x)\n")


def test_a_fact_file_symbol_at_the_bound_passes_the_check(tmp_path):
    decl = Decl("s", ("k", "x"), ("number", "symbol"))
    lines = ["1\t" + "é" * MAX_SYMBOL, "2\tb"]  # characters, not bytes, are counted
    assert check_fact_lines(tmp_path / "s.facts", lines, decl, "\t", False) == 2
    with pytest.raises(FactError, match=f"s.facts:2:3: error: field 2 .* is {TOO_LONG}"):
        check_fact_lines(tmp_path / "s.facts", ["1\ta", "2\t" + "é" * (MAX_SYMBOL + 1)],
                         decl, "\t", False)


def test_a_diff_symbol_past_the_bound_is_one_line():
    program = parse_program(".decl s(k:number, x:symbol)\n.input s\n", "p.dl")
    long = "y" * (MAX_SYMBOL + 1)
    assert parse_diff(program, f'+s(1, "{long[1:]}")\n', "d")[0].row == (1, long[1:])
    with pytest.raises(UpdateError) as e:
        parse_diff(program, f'+s(2, "a")\n+s(1, "{long}")\n', "d")
    assert str(e.value) == (f"d:2: error: argument 2 {chr(34) + 'y' * 39!r}... "
                            f"({MAX_SYMBOL + 3:,} chars) is {TOO_LONG} (s.x)")


def test_an_epoch_making_a_symbol_past_the_bound_changes_nothing(spark, tmp_path, cli,
                                                                cli_spark):
    from levelflow.engine.incremental import IncrementalSession, StateDir

    prog = write(tmp_path / "p.dl", ".decl s(x:symbol)\n.input s\n.decl t(x:symbol)\n"
                                    ".output t\nt(cat(x, x)) :- s(x).\n")
    write(tmp_path / "facts" / "s.facts", "a\n")
    IncrementalSession.bootstrap(spark, prog, tmp_path / "facts", tmp_path / "state").close()
    half = MAX_SYMBOL // 2 + 1  # within the bound; doubled, past it
    diff = write(tmp_path / "d.diff", f'+s("{"z" * half}")\n')
    code, out, err = cli(["update", tmp_path / "state", "--insert", diff])
    assert (code, out) == (1, "")
    assert err == (f"{prog}:5:3: error: cat makes a symbol longer than {MAX_SYMBOL:,} "
                   f"characters, the longest levelflow holds; stopped\n")
    assert StateDir(tmp_path / "state").current() == 0
