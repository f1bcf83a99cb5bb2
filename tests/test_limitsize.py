"""`.limitsize r(n=N)` maintained: r keeps the N smallest tuples of its task's fixpoint, the same
from scratch and after any epoch (random epochs, `update --program` changing N, the update CLI
and `levelflow serve`)."""

from __future__ import annotations

import json
import random
from contextlib import contextmanager

import pytest
from lowered import rows_of, write_facts
from test_serve import Served

from levelflow.cli import main as cli_main
from levelflow.engine.evaluate import evaluate_program
from levelflow.engine.incremental import IncrementalSession
from levelflow.tasks import build_tasks, parse_program

# Limited: a recursive relation (path), a non-recursive one (up), an input (w); what reads each
# sees the kept tuples (from1 through a negation too).
LIMITED = """.decl e(x:number, y:number)
.input e
.decl w(x:number, s:symbol)
.input w
.limitsize w(n=3)
.decl path(x:number, y:number)
.limitsize path(n=7)
.decl up(x:number, y:number)
.limitsize up(n=3)
.decl from1(y:number)
.decl named(s:symbol, y:number)
path(x, y) :- e(x, y).
path(x, z) :- path(x, y), e(y, z).
up(x, y) :- e(x, y), x < y.
from1(y) :- path(1, y), !up(1, y).
named(s, y) :- w(x, s), path(x, y).
.output path
.output up
.output from1
.output named
"""

NODES = range(1, 7)
NAMES = ("a", "b", "c", "d")


def _scratch(spark, pt, facts, factdir) -> dict[str, set]:
    write_facts(factdir, facts)
    out = evaluate_program(spark, pt, factdir)
    return {n: rows_of(out[n]) for n in pt.program.decls}


def _agree(session, ref: dict[str, set], when: str) -> None:
    for name, rows in ref.items():
        got = rows_of(session.relation(name))
        assert got == rows, f"{when}: {name}: extra {got - rows}, missing {rows - got}"


def test_random_epochs_keep_what_from_scratch_keeps(spark, tmp_path):
    rng = random.Random(34)
    pt = build_tasks(parse_program(LIMITED, "l.dl"))
    facts = {"e": {(rng.choice(NODES), rng.choice(NODES)) for _ in range(9)},
             "w": {(x, rng.choice(NAMES)) for x in NODES if rng.random() < 0.7}}
    ref = _scratch(spark, pt, facts, tmp_path / "f0")
    assert len(ref["path"]) == 7 and len(ref["up"]) <= 3 and len(ref["w"]) <= 3
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    try:
        _agree(session, ref, "epoch 0")
        for k in range(1, 3):  # each epoch removes and inserts in both inputs
            for name, rows in facts.items():
                gone = rng.sample(sorted(rows), min(2, len(rows)))
                new = ({(rng.choice(NODES), rng.choice(NODES)) for _ in range(3)} if name == "e"
                       else {(rng.choice(NODES), rng.choice(NAMES))})
                for row in gone:
                    session.remove(name, row)
                for row in new - set(gone):
                    session.insert(name, row)
                facts[name] = (rows - set(gone)) | new
            session.commit()
            _agree(session, _scratch(spark, pt, facts, tmp_path / f"f{k}"), f"epoch {k}")
        # A program change: another N recomputes path and what reads it.
        (tmp_path / "m.dl").write_text(LIMITED.replace("path(n=7)", "path(n=4)"))
        result = session.replace_program(tmp_path / "m.dl")
        assert result.status["path"] == "recomputed"
        pt4 = build_tasks(parse_program((tmp_path / "m.dl").read_text(), "m.dl"))
        ref4 = _scratch(spark, pt4, facts, tmp_path / "f3")
        assert len(ref4["path"]) == 4
        _agree(session, ref4, "N changed")
    finally:
        session.close()


SOUFFLE_DOC = """.decl A(x:number)
A(1).
A(x+1) :- A(x), x < 100.
.output A
.limitsize A(n=47)
.decl B(x:number)
.input B
A(x) :- B(x).
"""


def test_the_example_of_souffles_documentation_through_an_epoch(spark, tmp_path):
    # Soufflé's directives page: the first 47 numbers of A rather than all of them.
    write_facts(tmp_path / "f", {"B": set()})
    session = IncrementalSession.bootstrap(spark, build_tasks(parse_program(SOUFFLE_DOC, "a.dl")),
                                           tmp_path / "f", mode="incremental")
    try:
        assert rows_of(session.relation("A")) == {(x,) for x in range(1, 48)}
        session.insert("B", (0,))  # now 0 is one of the 47 smallest and 47 is not
        session.commit()
        assert rows_of(session.relation("A")) == {(x,) for x in range(0, 47)}
        session.remove("B", (0,))
        session.commit()
        assert rows_of(session.relation("A")) == {(x,) for x in range(1, 48)}
    finally:
        session.close()


def test_update_cli_keeps_the_n_smallest(spark, tmp_path, capsys, monkeypatch):
    from levelflow.cli import spark as cli_spark

    @contextmanager
    def tests_spark(*args, **kwargs):
        yield spark

    monkeypatch.setattr(cli_spark, "spark_session", tests_spark)
    program = tmp_path / "l.dl"
    program.write_text(LIMITED)
    write_facts(tmp_path / "f", {"e": {(1, 2), (2, 3), (3, 4)}, "w": {(1, "a")}})
    IncrementalSession.bootstrap(spark, program, tmp_path / "f", tmp_path / "state").close()
    (tmp_path / "ins.diff").write_text("+e(0, 1)\n-e(3, 4)\n")
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(tmp_path / "state"), "--insert", str(tmp_path / "ins.diff"),
                  "-D", str(tmp_path / "out")])
    assert e.value.code == 0, capsys.readouterr()
    # path of 0->1->2->3: (0,1) (0,2) (0,3) (1,2) (1,3) (2,3), all under 7
    assert (tmp_path / "out" / "path.csv").read_text().split("\n") == [
        "0\t1", "0\t2", "0\t3", "1\t2", "1\t3", "2\t3", ""]
    # up: the 3 smallest of (0,1) (1,2) (2,3); (3,4) is gone
    assert (tmp_path / "out" / "up.csv").read_text().split() == ["0", "1", "1", "2", "2", "3"]


def test_serve_keeps_the_n_smallest(spark, tmp_path):
    program = tmp_path / "l.dl"
    program.write_text(LIMITED)
    write_facts(tmp_path / "f", {"e": {(1, 2), (2, 3)}, "w": {(1, "a"), (2, "b")}})
    IncrementalSession.bootstrap(spark, program, tmp_path / "f", tmp_path / "state").close()
    served = Served(spark, tmp_path / "state")
    try:
        status, text = served.request(
            "POST", "/epoch", '+w(0, "z")\n+w(5, "y")\n+e(3, 4)\n+e(4, 5)\n')
        assert status == 200, text
        status, text = served.request("GET", "/relations/w")
        # w keeps its 3 smallest of (0,z) (1,a) (2,b) (5,y)
        assert status == 200 and text.split("\n") == ["0\tz", "1\ta", "2\tb", ""], text
        status, text = served.request("GET", "/relations/path/size")
        # 10 pairs of the chain 1..5, 7 kept
        assert status == 200 and json.loads(text)["size"] == 7, text
    finally:
        served.close()
