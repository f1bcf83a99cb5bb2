"""`ord(s)`: a symbol's number in the symbol table (tasks/ordinals.py), under the local and
global plans and through epochs and a restart.

The expected numbers follow the documented order: the program's string constants in order of
first appearance, then the input facts' symbols as the files are read, then each epoch's new
symbols in the order they are inserted; numbers start at 0 and never change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, parse_program

# Soufflé's documentation (the `arguments` page): "The ordinal number is based on the order of
# appearance", so r(3) is not set: "Marge" appears before "Bart".
DOCUMENTED = """
.decl n(x:symbol)
n("Homer").
n("Marge").
n("Bart").
n("Lisa").
n("Maggie").
.decl r(x:number)
.output r
r(1) :- n(x), n(y), ord(x) < ord(y), x="Homer", y="Bart".
r(2) :- n(x), n(y), ord(x) > ord(y), x="Maggie", y="Homer".
r(3) :- n(x), n(y), ord(x) > ord(y), x="Marge", y="Bart".
"""

# Soufflé's evaluation test `ordinals`: with distinct symbols both orders occur.
ORDINALS = """
.symbol_type Name
.decl n ( x : Name )
n("Homer").
n("Marge").
n("Bart").
n("Lisa").
n("Maggie").
.decl r ( x : number )
.output r ()
r(1) :- n(x), n(y), ord(x) < ord(y).
r(2) :- n(x), n(y), ord(x) > ord(y).
"""

TABLE = """
.decl n(x:symbol)
n("Homer").
n("Marge").
.decl e(x:symbol, w:number)
.input e
.decl o(x:symbol, k:number)
o(x, ord(x)) :- e(x, _).
.decl total(s:number)
total(s) :- s = sum ord(x) : { e(x, _) }.
.decl bad(k:number)
bad(3).
.decl kept(x:symbol)
kept(x) :- e(x, _), !bad(ord(x)).
.output o, total, kept
"""


def _run(spark, tmp_path: Path, text: str, plan: str, facts: dict[str, str] | None = None):
    folder = tmp_path / "facts"
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in (facts or {}).items():
        (folder / f"{name}.facts").write_text(body)
    out = tmp_path / f"out-{plan}"
    run_program(spark, build_tasks(parse_program(text, "o.dl")), folder, out, jobs=2,
                plan=plan)
    return {p.stem: sorted(p.read_text().splitlines()) for p in out.glob("*.csv")}


@pytest.mark.parametrize("plan", ["local", "global"])
def test_the_documented_examples(spark, tmp_path, plan):
    assert _run(spark, tmp_path, DOCUMENTED, plan) == {"r": ["1", "2"]}
    assert _run(spark, tmp_path / "o", ORDINALS, plan) == {"r": ["1", "2"]}


def _expected(numbers: dict[str, int], e: set[str]) -> dict[str, list[str]]:
    return {"o": sorted(f"{x}\t{numbers[x]}" for x in e),
            "total": [str(sum(numbers[x] for x in e))],
            "kept": sorted(x for x in e if numbers[x] != 3)}


@pytest.mark.parametrize("plan", ["local", "global"])
def test_constants_first_then_the_facts_as_read(spark, tmp_path, plan):
    """Homer 0 and Marge 1 (the program's constants), then e.facts line by line: zeta 2,
    alpha 3 (Homer is numbered already); `!bad(ord(x))` drops alpha, numbered 3."""
    got = _run(spark, tmp_path, TABLE, plan, {"e": "zeta\t1\nalpha\t2\nHomer\t3\n"})
    numbers = {"Homer": 0, "Marge": 1, "zeta": 2, "alpha": 3}
    assert got == _expected(numbers, {"zeta", "alpha", "Homer"})


def test_a_symbol_keeps_its_number_through_epochs_and_a_restart(spark, tmp_path):
    """New symbols take the next numbers in the order an epoch inserts them; a deleted one
    keeps its number and has it again when it comes back, after a restart too."""
    folder = tmp_path / "facts"
    folder.mkdir()
    (folder / "e.facts").write_text("zeta\t1\nalpha\t2\nHomer\t3\n")
    pt = build_tasks(parse_program(TABLE, "o.dl"))
    state = tmp_path / "state"
    session = IncrementalSession.bootstrap(spark, pt, folder, state)
    numbers = {"Homer": 0, "Marge": 1, "zeta": 2, "alpha": 3}
    e = {"zeta", "alpha", "Homer"}

    def check(k: int) -> None:
        session.write_outputs(tmp_path / f"out{k}")
        got = {p.stem: sorted(p.read_text().splitlines())
               for p in (tmp_path / f"out{k}").glob("*.csv")}
        assert got == _expected(numbers, e), k

    check(0)
    session.insert("e", ("beta", 5))
    session.insert("e", ("Marge", 6))
    session.remove("e", ("zeta", 1))
    session.commit()
    numbers["beta"] = 4  # Marge is a constant: 1 already
    e = {"alpha", "Homer", "beta", "Marge"}
    check(1)
    session.close()
    session = IncrementalSession.open(spark, state)
    session.insert("e", ("gamma", 7))
    session.insert("e", ("zeta", 8))  # back: its number is still 2
    session.commit()
    numbers["gamma"] = 5
    e |= {"gamma", "zeta"}
    check(2)
    session.close()


def test_a_program_change_brings_ord_in(spark, tmp_path):
    """`update --program` to a program with `ord`: the new constants first, then the input
    facts' symbols after the epoch (an insertion of the same epoch too) in text order."""
    folder = tmp_path / "facts"
    folder.mkdir()
    (folder / "e.facts").write_text("zeta\t1\nalpha\t2\n")
    old = ".decl e(x:symbol, w:number)\n.input e\n.decl o(x:symbol)\no(x) :- e(x, _).\n"
    session = IncrementalSession.bootstrap(spark, build_tasks(parse_program(old, "old.dl")),
                                           folder, tmp_path / "state")
    (tmp_path / "new.dl").write_text(TABLE)
    session.insert("e", ("beta", 3))
    session.replace_program(tmp_path / "new.dl")
    session.write_outputs(tmp_path / "out")
    got = {p.stem: sorted(p.read_text().splitlines()) for p in (tmp_path / "out").glob("*.csv")}
    numbers = {"Homer": 0, "Marge": 1, "alpha": 2, "beta": 3, "zeta": 4}
    assert got == _expected(numbers, {"zeta", "alpha", "beta"})
    session.insert("e", ("Homer", 9))
    session.insert("e", ("omega", 10))
    session.commit()
    session.write_outputs(tmp_path / "out2")
    got = {p.stem: sorted(p.read_text().splitlines()) for p in (tmp_path / "out2").glob("*.csv")}
    numbers["omega"] = 5
    e = {"zeta", "alpha", "beta", "Homer", "omega"}
    assert got == _expected(numbers, e)
    # A program change that keeps `ord`: its new constant is numbered first, then the symbols
    # its epoch inserts.
    (tmp_path / "newer.dl").write_text(TABLE + 'o("Zed", ord("Zed")).\n')
    session.insert("e", ("psi", 11))
    session.replace_program(tmp_path / "newer.dl")
    session.write_outputs(tmp_path / "out3")
    got = {p.stem: sorted(p.read_text().splitlines()) for p in (tmp_path / "out3").glob("*.csv")}
    numbers |= {"Zed": 6, "psi": 7}
    want = _expected(numbers, e | {"psi"})
    want["o"] = sorted(want["o"] + ["Zed\t6"])
    assert got == want
    session.close()


def test_a_tiny_state_numbers_its_symbols_in_the_driver(cli, tmp_path, no_spark):
    """`run --state` and `update` of a program with `ord`, with a Spark that cannot start:
    the table is made and extended in the driver, numbered as documented above."""
    (tmp_path / "o.dl").write_text(TABLE)
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("zeta\t1\nalpha\t2\nHomer\t3\n")
    code, _, err = cli(["run", tmp_path / "o.dl", "-F", tmp_path / "f", "-D", tmp_path / "o0",
                        "-q", "--state", tmp_path / "st"])
    assert code == 0, err
    (tmp_path / "d.diff").write_text('+e("beta", 5)\n+e("Marge", 6)\n-e("zeta", 1)\n')
    code, _, err = cli(["update", tmp_path / "st", "--insert", tmp_path / "d.diff",
                        "-D", tmp_path / "o1"])
    assert code == 0, err
    numbers = {"Homer": 0, "Marge": 1, "zeta": 2, "alpha": 3}
    for out, e in ((tmp_path / "o0", {"zeta", "alpha", "Homer"}),
                   (tmp_path / "o1", {"alpha", "Homer", "beta", "Marge"})):
        got = {p.stem: sorted(p.read_text().splitlines()) for p in out.glob("*.csv")}
        assert got == _expected(numbers, e), out
        numbers["beta"] = 4  # Marge is a constant: 1 already
