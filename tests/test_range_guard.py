"""Issue 42: a `range` is counted against --max-tuples (engine/guard.py) before its values are
made, in every plan and in an epoch: one line naming the rule's file:line, exit 1, nothing
written or stored. A range over constants is refused before any job; one over variables is
counted over the rows it extends (rules.Ops.values). A range within the limit still runs, and
the Spark backend makes a long range in blocks (compile.RANGE_BLOCK), the same values.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.engine.compile import RANGE_BLOCK

DEFAULT = "more than 100,000,000 tuples (--max-tuples 100000000)"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run(cli, tmp_path: Path, text: str, *flags) -> tuple[int, str, str]:
    prog = write(tmp_path / "p.dl", text)
    (tmp_path / "facts").mkdir(exist_ok=True)
    return cli(["run", prog, "-F", tmp_path / "facts", "-D", tmp_path / "out", "-q", *flags])


@pytest.mark.parametrize("text,line", [
    ("p(x) :- x = range(0, 1000000000).\n", 3),  # the range
    ("p(range(0, 1000 * 1000 * 1000)).\n", 3),  # in a fact, its bound a constant expression
    ("p(x) :- q(_), x = range(1000000000, 0, -1).\n", 3),  # counted downwards, after q
])
def test_a_range_over_constants_past_the_limit_is_one_line(tmp_path, cli, cli_spark, text,
                                                          line):
    code, out, err = run(cli, tmp_path, ".decl p(x:number)\n.output p\n"
                                        f"{text}.decl q(x:number)\nq(1).\n")
    assert (code, out) == (1, "")
    assert err == (f"{tmp_path}/p.dl:{line}: task p: {DEFAULT}: its range makes "
                   f"1,000,000,000 values; stopped\n")
    assert not (tmp_path / "out").exists()


# A recursive task whose recursive rule's range has variable bounds; `a` is carried, so the
# partitioned plan applies too. Its round 1 asks range(1, 5000) of s's one row: 4,999 values.
GROWING = """.decl s(a:number)
s(1).
.decl p(a:number, x:number)
.output p
p(a, 0) :- s(a).
p(a, y) :- p(a, x), x < 3, y = range(x + 1, x + 5000).
"""


@pytest.mark.parametrize("plan", ["local", "partitioned", "global"])
def test_a_range_over_variables_is_counted_before_its_values_are_made(tmp_path, cli, cli_spark,
                                                                      plan):
    code, out, err = run(cli, tmp_path, GROWING, "--plan", plan, "--max-tuples", "1000")
    assert (code, out) == (1, "")
    assert err == (f"{tmp_path}/p.dl:6: task p: more than 1,000 tuples (--max-tuples 1000): "
                   f"its range makes 4,999 values; stopped\n")


@pytest.mark.parametrize("plan", ["local", "global"])
def test_ranges_within_the_limit_run_in_blocks(tmp_path, cli, cli_spark, plan):
    # One range exactly at the limit; the others cross RANGE_BLOCK, up and down.
    n = 2 * RANGE_BLOCK + 5
    text = (".decl p(x:number)\n.output p\n.decl n(k:number)\nn(" + str(n) + ").\n"
            "p(x) :- n(k), x = range(0, k).\n"
            ".decl down(x:number)\n.output down\ndown(x) :- n(k), x = range(k, 0, -3).\n")
    code, _, err = run(cli, tmp_path, text, "--plan", plan, "--max-tuples", str(n))
    assert code == 0, err
    assert (tmp_path / "out" / "p.csv").read_text() == "".join(f"{i}\n" for i in range(n))
    # Soufflé's range excludes its end: k, k-3, ... down to 1 (k = 3 * 2,733 + 1)
    down = sorted(int(x) for x in (tmp_path / "out" / "down.csv").read_text().split())
    assert down == list(range(1, n + 1, 3))


def test_an_epoch_counts_a_range_before_making_it(spark, tmp_path, cli, cli_spark):
    from levelflow.engine.incremental import IncrementalSession, StateDir

    prog = write(tmp_path / "p.dl", ".decl n(k:number)\n.input n\n.decl p(x:number)\n"
                                    ".output p\np(x) :- n(k), x = range(0, k).\n")
    write(tmp_path / "facts" / "n.facts", "3\n")
    IncrementalSession.bootstrap(spark, prog, tmp_path / "facts", tmp_path / "state").close()
    diff = write(tmp_path / "d.diff", "+n(1000000000)\n")
    code, out, err = cli(["update", tmp_path / "state", "--insert", diff, "--max-tuples",
                          "1000"])
    assert (code, out) == (1, "")
    assert err == (f"{prog}:5: task p: more than 1,000 tuples (--max-tuples 1000): its range "
                   f"makes 1,000,000,000 values; stopped\n")
    assert StateDir(tmp_path / "state").current() == 0
    session = IncrementalSession.open(spark, tmp_path / "state")
    try:  # the state is what it was: range(0, 3)
        assert sorted(r[0] for r in session.relation("p").collect()) == [0, 1, 2]
    finally:
        session.close()
