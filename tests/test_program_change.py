"""Program changes as epochs: `replace_program`, `update --program`, the shell's `load`.

The property test runs the four families of test_incremental_properties with a random
sequence of epochs, each adding or removing rules (some bring new relations, one a new input
relation) and often changing facts too; after each, every relation must equal a from-scratch
evaluation of the current program on the current facts (the naive Python reference), and the
ranks of recursive tasks must keep their invariant (else a later deletion goes wrong).
"""

from __future__ import annotations

import io
import random
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from levelflow.cli import main as cli_main
from levelflow.engine.incremental import IncrementalSession, StateDir
from levelflow.engine.incremental.program_change import diff_programs, normalized
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.errors import DatalogError

sys.path.insert(0, str(Path(__file__).parent))
import naive_datalog  # noqa: E402
from test_incremental_properties import FAMILIES, SIZES, random_epochs, rows_of  # noqa: E402
from test_incremental_ranks import assert_ranks_valid  # noqa: E402

# Per family: the program's rules (the first ones, in the family's text) and extra rules. An
# entry is (rule, declarations it needs); a declaration is in the program while a rule that
# needs it is.
HUB = ".decl hub(x:number)"
SYM = ".decl sym(x:number, y:number)\n.input sym"
ANC = ".decl anc(x:symbol, y:symbol)"
REACH = ".decl reach(v:symbol, h:symbol)"
ISO = ".decl isolated(x:number)"
EXTRA = {
    "tc": [("path(x, z) :- path(x, y), path(y, z).", ()),
           ("path(x, y) :- edge(y, x), x < y.", ()),
           ("cyclic(x) :- edge(x, x).", ()),
           ("hub(x) :- edge(x, a), edge(x, b), a != b.", (HUB,)),
           ("path(x, y) :- hub(x), edge(y, x).", (HUB,)),
           ("path(x, y) :- sym(x, y).", (SYM,))],
    "sg": [("sg(x, x) :- parent(x, _).", ()),
           ("anc(x, y) :- parent(x, y).", (ANC,)),
           ("anc(x, z) :- anc(x, y), parent(y, z).", (ANC,)),
           ("sg(x, y) :- anc(x, p), anc(y, p), x != y.", (ANC,))],
    "pointsto": [("alias(v, w) :- assign(v, w).", ()),
                 ("vpt(v, h) :- assign(w, v), vpt(w, h).", ()),
                 ("reach(v, h) :- vpt(v, h).", (REACH,)),
                 ("reach(v, h) :- reach(v, g), hpt(g, _, h).", (REACH,))],
    "negation": [("open_edge(x, y) :- edge(y, x), !blocked(y, x).", ()),
                 ("reachable(x) :- node(x), !blocked(x, _).", ()),
                 ("isolated(x) :- node(x), !edge(x, _), !edge(_, x).", (ISO,)),
                 ("walk(y) :- walk(x), two_hop(x, y).", ())],
}
SYM_FACTS = {(5, 6), (6, 0)}


def split_family(text: str) -> tuple[list[str], list[str]]:
    """Return (declarations and directives, rules) of a family's program text."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return [x for x in lines if x.startswith(".")], [x for x in lines if not x.startswith(".")]


def program_text(head: list[str], rules: list[tuple[str, tuple]]) -> str:
    decls = list(head)
    for _, needs in rules:
        for block in needs:
            if block not in decls:
                decls.append(block)
    return "\n".join(decls + [rule for rule, _ in rules]) + "\n"


def write_facts(factdir: Path, facts: dict[str, set]) -> None:
    factdir.mkdir(parents=True, exist_ok=True)
    for name, rows in {**facts, "sym": SYM_FACTS}.items():
        (factdir / f"{name}.facts").write_text(
            "".join("\t".join(map(str, row)) + "\n" for row in sorted(rows)))


def check(session, facts, tmp: Path) -> None:
    write_facts(tmp, facts)
    ref = naive_datalog.evaluate(session.pt, tmp)
    for name in session.program.decls:
        got = rows_of(session.relation(name))
        assert got == ref[name], f"{name}: extra {got - ref[name]}, missing {ref[name] - got}"
        assert session.size(name) == len(ref[name]), name
    assert_ranks_valid(session, session.pt)


def toggle_rules(rng, active: list, pool: list) -> list:
    """Return the active rules with one or two added or removed at random."""
    active = list(active)
    for _ in range(rng.randint(1, 2)):
        idle = [e for e in pool if e not in active]
        if active and (not idle or rng.random() < 0.5):
            active.remove(rng.choice(active))
        elif idle:
            active.append(rng.choice(idle))
    return active


# Seeds chosen so that two epochs both add and remove rules (recursive ones among them), one
# changes facts too and one the program alone; tc's brings in the new input relation sym.
@pytest.mark.parametrize("family,seed", [("tc", 29), ("sg", 8), ("pointsto", 4),
                                         ("negation", 2)])
def test_program_epochs_match_from_scratch(spark, tmp_path, family, seed):
    text, gens = FAMILIES[family]
    head, base_rules = split_family(text)
    pool = [(r, ()) for r in base_rules] + EXTRA[family]
    rng = random.Random(seed)
    facts = {name: {gen(rng) for _ in range(SIZES[name])} for name, gen in gens.items()}
    active = [(r, ()) for r in base_rules]
    write_facts(tmp_path / "f0", facts)
    pt = build_tasks(parse_program(program_text(head, active), f"{family}.dl"))
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    statuses = set()
    changes = random_epochs(rng, gens, facts, 2)  # `facts` follows each step taken
    for k in range(1, 3):
        active = toggle_rules(rng, active, pool)
        if rng.random() < 0.5:  # else a program change alone
            for sign, name, row in next(changes):
                (session.insert if sign > 0 else session.remove)(name, row)
        path = tmp_path / f"p{k}.dl"
        path.write_text(program_text(head, active))
        result = session.replace_program(path, tmp_path / "f0")
        assert result.epoch == k
        statuses |= set(result.status.values())
        check(session, facts, tmp_path / f"ref{k}")
    assert statuses & {"updated", "recomputed", "new"}


def test_rules_compare_without_locations_and_variable_names():
    a = parse_program(".decl e(x:number, y:number)\n.input e\n.decl p(x:number, y:number)\n"
                      "p(x, y) :- e(x, y).\n", "a.dl")
    b = parse_program(".decl e(x:number, y:number)\n.input e\n.decl p(x:number, y:number)\n\n\n"
                      "p(a,b):-e(a,b).\n", "b.dl")
    assert normalized(a.rules[0]) == normalized(b.rules[0])
    change = diff_programs(build_tasks(a), build_tasks(b))
    assert change.same and set(change.plan.values()) == {"kept"}


CHAIN = 6  # two chains of 6 tasks each from one input: 12 rules


def chains(extra: str = "") -> str:
    lines = [".decl e(x:number, y:number)", ".input e"]
    for side in "ab":
        for i in range(1, CHAIN + 1):
            lines.append(f".decl {side}{i}(x:number, y:number)")
            lower = "e" if i == 1 else f"{side}{i - 1}"
            lines.append(f"{side}{i}(x, y) :- {lower}(x, y).")
    return "\n".join(lines) + "\n" + extra


def test_adding_one_rule_runs_only_the_tasks_it_reaches(spark, tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("1\t2\n2\t3\n")
    old = tmp_path / "old.dl"
    old.write_text(chains())
    session = IncrementalSession.bootstrap(spark, old, tmp_path / "f", mode="incremental")
    assert len(session.program.rules) == 2 * CHAIN
    new = tmp_path / "new.dl"
    new.write_text(chains("a3(x, y) :- a2(y, x).\n"))
    result = session.replace_program(new)
    reached = {f"a{i}" for i in range(3, CHAIN + 1)}
    assert {t for t, s in result.status.items() if s != "kept"} == reached
    assert all(result.status[t] == "updated" for t in reached)
    assert result.ran == len(reached)  # a1, a2, e and the b chain did not run
    assert set(result.strategies) == reached
    assert rows_of(session.relation(f"a{CHAIN}")) == {(1, 2), (2, 3), (2, 1), (3, 2)}
    assert rows_of(session.relation(f"b{CHAIN}")) == {(1, 2), (2, 3)}


RELS = """
.decl e(x:number, y:number)
.input e
.decl p(x:number, y:number)
p(x, y) :- e(x, y).
p(x, z) :- p(x, y), e(y, z).
.decl q(x:number)
q(x) :- p(x, x).
.decl gone(x:number)
gone(x) :- e(x, _).
.output p
"""
# q is redeclared (a new column), gone vanishes, n is new and extra a new input relation.
RELS2 = """
.decl e(x:number, y:number)
.input e
.decl extra(x:number, y:number)
.input extra
.decl p(x:number, y:number)
p(x, y) :- e(x, y).
p(x, z) :- p(x, y), e(y, z).
p(x, y) :- extra(x, y).
.decl q(x:number, y:number)
q(x, x) :- p(x, x).
.decl r(x:number)
r(x) :- q(x, _).
.decl n(x:number)
n(y) :- p(_, y).
.output p
"""


def test_relations_dropped_rebuilt_new_and_a_new_input(spark, tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("1\t2\n2\t1\n")
    (tmp_path / "f" / "extra.facts").write_text("7\t8\n")
    (tmp_path / "old.dl").write_text(RELS)
    state = tmp_path / "state"
    session = IncrementalSession.bootstrap(spark, tmp_path / "old.dl", tmp_path / "f", state,
                                           mode="incremental")  # no elastic recomputing
    (tmp_path / "new.dl").write_text(RELS2)
    result = session.replace_program(tmp_path / "new.dl", tmp_path / "f")
    assert result.status == {"e": "kept", "extra": "new", "p": "updated", "q": "recomputed",
                             "r": "new", "n": "new", "gone": "dropped"}
    assert "note: dropped relation(s) gone" in result.notes
    assert rows_of(session.relation("q")) == {(1, 1), (2, 2)}
    assert rows_of(session.relation("n")) == {(1,), (2,), (8,)}
    reopened = IncrementalSession.open(spark, state)  # the state's program is the new one
    assert reopened.program.file.endswith("new.dl") and reopened.epoch == 1
    assert rows_of(reopened.relation("p")) == rows_of(session.relation("p"))
    reopened.close()
    # Back to the old program: extra's facts go, gone comes back as a new task.
    result = session.replace_program(tmp_path / "old.dl")
    assert result.status["gone"] == "new" and result.status["extra"] == "dropped"
    assert result.status["p"] == "recomputed"  # its removed rule read extra, now gone
    assert rows_of(session.relation("p")) == {(1, 2), (2, 1), (1, 1), (2, 2)}


def test_a_new_input_without_facts_starts_empty_with_a_note(spark, tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("1\t2\n")
    (tmp_path / "old.dl").write_text(RELS)
    session = IncrementalSession.bootstrap(spark, tmp_path / "old.dl", tmp_path / "f")
    session.insert("e", (2, 3))  # queued ops go into the same epoch
    (tmp_path / "new.dl").write_text(RELS2)
    result = session.replace_program(tmp_path / "new.dl")
    assert "note: new input relation extra starts empty" in result.notes
    assert rows_of(session.relation("p")) == {(1, 2), (2, 3), (1, 3)}
    assert session.size("extra") == 0
    # With a fact folder that lacks its file: Soufflé's reading of a missing fact file, one
    # warning naming the file and the relation (update --program --facts, a posted program).
    (tmp_path / "f" / "extra.facts").write_text("7\t8\n")
    (tmp_path / "f2").mkdir()
    (tmp_path / "new2.dl").write_text(RELS2 + ".decl more(x:number)\n.input more\n"
                                      "p(x, x) :- more(x).\n")
    result = session.replace_program(tmp_path / "new2.dl", tmp_path / "f2")
    assert f"{tmp_path / 'f2' / 'more.facts'}: warning: cannot open fact file for relation " \
           "more (no such file); more is read as empty, as Soufflé reads it" in result.notes
    assert session.size("more") == 0 and session.size("extra") == 0
    assert rows_of(session.relation("p")) == {(1, 2), (2, 3), (1, 3)}


BAD_PROGRAMS = [
    (RELS + "p(x) :- e(x, _).\n", "error:"),  # wrong arity
    (RELS + "q(x) :- nope(x).\n", "nope"),  # unknown relation
    (RELS + "q(x :- e(x, _).\n", "error:"),  # syntax
]


def test_a_bad_new_program_is_refused_and_nothing_changes(spark, tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("1\t2\n")
    (tmp_path / "old.dl").write_text(RELS)
    state = tmp_path / "state"
    session = IncrementalSession.bootstrap(spark, tmp_path / "old.dl", tmp_path / "f", state)
    session.insert("e", (2, 3))
    for i, (text, fragment) in enumerate(BAD_PROGRAMS):  # each refused, on the same session
        bad = tmp_path / f"bad{i}.dl"
        bad.write_text(text)
        with pytest.raises(DatalogError, match=fragment) as e:
            session.replace_program(bad)
        assert "\n" not in str(e.value) and str(e.value).startswith(str(bad)), i
        assert session.epoch == 0 and len(session.pending) == 1, i
        assert session.program.file.endswith("old.dl"), i
        assert StateDir(state).current() == 0, i
    assert session.commit().epoch == 1  # the old program, with the pending insert
    assert rows_of(session.relation("p")) == {(1, 2), (2, 3), (1, 3)}


def test_a_crash_before_the_switch_leaves_the_old_program_current(spark, tmp_path):
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("1\t2\n")
    (tmp_path / "old.dl").write_text(RELS)
    state = tmp_path / "state"
    session = IncrementalSession.bootstrap(spark, tmp_path / "old.dl", tmp_path / "f", state)
    (tmp_path / "new.dl").write_text(RELS2)

    def crash():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        session.replace_program(tmp_path / "new.dl", before_switch=crash)
    assert StateDir(state).current() == 0
    assert StateDir(state).manifest()["program"] == RELS
    assert session.program.file.endswith("old.dl") and "gone" in session.program.decls


def test_update_program_cli(spark, tmp_path, capsys, monkeypatch):
    from levelflow.cli import spark as cli_spark

    monkeypatch.setattr(cli_spark, "spark_session", lambda *a: _yield(spark))
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("1\t2\n2\t1\n")
    (tmp_path / "f" / "extra.facts").write_text("7\t8\n")
    (tmp_path / "old.dl").write_text(RELS)
    IncrementalSession.bootstrap(spark, tmp_path / "old.dl", tmp_path / "f", tmp_path / "st")
    (tmp_path / "new.dl").write_text(RELS2)
    (tmp_path / "ins.diff").write_text("+e(2,3)\n+extra(9,9)\n")
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(tmp_path / "st"), "--program", str(tmp_path / "new.dl"),
                  "--facts", str(tmp_path / "f"), "--insert", str(tmp_path / "ins.diff")])
    assert e.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert "p\t+4\t-0" in out  # (2,3) (1,3), and extra's (7,8) from --facts, (9,9) inserted
    assert "updated: e" in out and "dropped: gone" in out  # e: the inserted fact
    assert "new: extra, n, r" in out and "note: dropped relation(s) gone" in out
    data = StateDir(tmp_path / "st").manifest()
    assert data["program"] == RELS2 and data["epoch"] == 1


def _yield(spark):
    @contextmanager
    def cm():
        yield spark
    return cm()


def test_update_program_cli_refuses_a_bad_program(spark, tmp_path, capsys, monkeypatch):
    from levelflow.cli import spark as cli_spark

    def no_spark(*args, **kwargs):
        raise AssertionError("Spark was started for a bad program")

    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("1\t2\n")
    (tmp_path / "old.dl").write_text(RELS)
    IncrementalSession.bootstrap(spark, tmp_path / "old.dl", tmp_path / "f", tmp_path / "st")
    monkeypatch.setattr(cli_spark, "spark_session", no_spark)
    for i, text in enumerate(["q(x :- e(x, _).\n", "q(x, y) :- e(x).\n"]):  # syntax, arity
        bad = tmp_path / f"bad{i}.dl"
        bad.write_text(RELS + text)
        with pytest.raises(SystemExit) as e:
            cli_main(["update", str(tmp_path / "st"), "--program", str(bad)])
        assert e.value.code != 0, i
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith(str(bad)) and "error:" in err, err
        assert StateDir(tmp_path / "st").current() == 0, i
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(tmp_path / "st"), "--facts", str(tmp_path / "f")])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().startswith("--facts: only with --program")


def test_shell_load(spark, tmp_path):
    from levelflow.cli.shell_cmd import Shell

    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("1\t2\n2\t1\n")
    (tmp_path / "old.dl").write_text(RELS)
    (tmp_path / "new.dl").write_text(RELS2)
    (tmp_path / "bad.dl").write_text(RELS + "q(x :- e(x, _).\n")
    session = IncrementalSession.bootstrap(spark, tmp_path / "old.dl", tmp_path / "f")
    out, err = io.StringIO(), io.StringIO()
    script = f"load {tmp_path / 'bad.dl'}\ninsert e(2, 3)\nload {tmp_path / 'new.dl'}\n" \
             f"size n\nprint q\nload\n"
    Shell(session, out, err).loop(io.StringIO(script))
    lines = out.getvalue().splitlines()
    assert "updated: e" in lines and "recomputed: p, q" in lines
    assert lines[-3:] == ["3", "1\t1", "2\t2"]
    errors = err.getvalue().splitlines()
    assert len(errors) == 2 and errors[0].startswith(str(tmp_path / "bad.dl"))
    assert "load needs a program file" in errors[1]
    assert session.epoch == 1 and session.program.file.endswith("new.dl")


TC = """
.decl edge({cols})
.input edge
.decl path(x:{t}, y:{t})
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
.output path
"""


def redeclared_state(spark, tmp_path, old_cols: str, new_cols: str, t: str):
    """Return (session on a TC state of 1->2->3 under `old_cols`, the new program's file)."""
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "edge.facts").write_text("1\t2\n2\t3\n")
    (tmp_path / "old.dl").write_text(TC.format(cols=old_cols, t="number"))
    (tmp_path / "new.dl").write_text(TC.format(cols=new_cols, t=t))
    session = IncrementalSession.bootstrap(spark, tmp_path / "old.dl", tmp_path / "f",
                                           tmp_path / "state")
    session.insert("edge", (3, 4))  # a segment on edge's chain, for the redeclaration to void
    session.commit(compact=False)
    return session, tmp_path / "new.dl"


def assert_whole_and_rebuilds_to(spark, state: Path, facts: dict, tmp: Path) -> None:
    """The state checks whole, equals `run` of its program on `facts`, and so does a rebuild."""
    from levelflow.engine.incremental.state.repair import check_state, rebuild

    ok, lines, _ = check_state(StateDir(state))
    assert ok, lines
    for rebuilt in (False, True):  # as the epoch left it, then rebuilt from its base facts
        if rebuilt:
            rebuild(spark, StateDir(state))
        again = IncrementalSession.open(spark, state)
        write_facts(tmp, facts)
        ref = naive_datalog.evaluate(again.pt, tmp)
        for name in ("edge", "path"):
            assert rows_of(again.relation(name)) == ref[name], (name, rebuilt)
            assert again.size(name) == len(ref[name]), (name, rebuilt)
        again.close()


def test_a_type_change_of_an_input_starts_from_the_facts_given(spark, tmp_path):
    session, new = redeclared_state(spark, tmp_path, "x:number, y:number",
                                    "x:symbol, y:symbol", "symbol")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "edge.facts").write_text("a\tb\nb\tc\n")
    result = session.replace_program(new, tmp_path / "g")
    assert any("redeclared input relation edge starts from" in n for n in result.notes)
    assert rows_of(session.relation("path")) == {("a", "b"), ("b", "c"), ("a", "c")}
    session.close()
    s = IncrementalSession.open(spark, tmp_path / "state")  # readable: verified on open
    s.insert("edge", ("c", "d"))
    s.commit()
    s.close()
    assert_whole_and_rebuilds_to(spark, tmp_path / "state",
                                 {"edge": {("a", "b"), ("b", "c"), ("c", "d")}}, tmp_path / "r")


def test_a_type_change_without_facts_starts_empty(spark, tmp_path):
    session, new = redeclared_state(spark, tmp_path, "x:number, y:number",
                                    "x:symbol, y:symbol", "symbol")
    result = session.replace_program(new)
    assert "note: redeclared input relation edge starts empty" in result.notes
    assert session.size("edge") == 0 and session.size("path") == 0
    session.close()
    assert_whole_and_rebuilds_to(spark, tmp_path / "state", {"edge": set()}, tmp_path / "r")


def test_renamed_attributes_keep_the_facts(spark, tmp_path):
    session, new = redeclared_state(spark, tmp_path, "x:number, y:number",
                                    "src:number, dst:number", "number")
    result = session.replace_program(new, tmp_path / "f")
    assert result.status == {"edge": "kept", "path": "kept"}
    assert rows_of(session.relation("path")) == {(1, 2), (2, 3), (3, 4), (1, 3), (2, 4),
                                                 (1, 4)}
    session.insert("edge", (4, 5))
    assert session.commit().notes == []  # not "already present"
    session.close()
    assert_whole_and_rebuilds_to(spark, tmp_path / "state",
                                 {"edge": {(1, 2), (2, 3), (3, 4), (4, 5)}}, tmp_path / "r")


def test_a_tiny_program_change_runs_in_the_driver_without_spark(cli, tmp_path, no_spark):
    """`update --program` of examples/tc (a new counted task over 306 paths) with a Spark that
    cannot start: the change runs in the driver, its outputs equal a run of the new program,
    and the state it wrote serves the next epoch (also without Spark) like a run on its facts."""
    tc = Path(__file__).resolve().parents[1] / "examples" / "tc"
    code, _, err = cli(["run", tc / "program.dl", "-F", tc / "facts", "-D", tmp_path / "o0",
                        "--state", tmp_path / "st"])
    assert (code, err) == (0, "")
    code, out, err = cli(["update", tmp_path / "st", "--program", tc / "tc2.dl",
                          "-D", tmp_path / "o1"])
    assert (code, err) == (0, ""), err
    assert "new: same_cycle" in out and "Spark start" not in out
    code, _, err = cli(["run", tc / "tc2.dl", "-F", tc / "facts", "-D", tmp_path / "r1"])
    assert code == 0, err

    def same(a, b):
        for name in ("path.csv", "cyclic.csv", "same_cycle.csv"):
            assert sorted((a / name).read_text().splitlines()) == \
                sorted((b / name).read_text().splitlines()), name
    same(tmp_path / "o1", tmp_path / "r1")
    assert (tmp_path / "r1" / "same_cycle.csv").read_text().strip()  # not vacuous
    (tmp_path / "d.diff").write_text("+edge(21,22)\n+edge(22,21)\n-edge(1,2)\n")
    code, _, err = cli(["update", tmp_path / "st", "--insert", tmp_path / "d.diff",
                        "-D", tmp_path / "o2"])
    assert (code, err) == (0, ""), err
    facts = tmp_path / "f2"
    facts.mkdir()
    lines = (tc / "facts" / "edge.facts").read_text().splitlines()
    (facts / "edge.facts").write_text("\n".join([ln for ln in lines if ln != "1\t2"]
                                                + ["21\t22", "22\t21"]) + "\n")
    code, _, err = cli(["run", tc / "tc2.dl", "-F", facts, "-D", tmp_path / "r2"])
    assert code == 0, err
    same(tmp_path / "o2", tmp_path / "r2")
    # A new input read from --facts, its rule over path: read and evaluated in the driver too.
    prog = tmp_path / "tc3.dl"
    prog.write_text((tc / "tc2.dl").read_text() + ".decl mark(x:number)\n.input mark\n"
                    ".decl marked(x:number, y:number)\nmarked(x, y) :- mark(x), path(x, y).\n"
                    ".output marked\n")
    (facts / "mark.facts").write_text("1\n2\n2\n21\n")
    code, out, err = cli(["update", tmp_path / "st", "--program", prog, "--facts", facts,
                          "-D", tmp_path / "o3"])
    assert (code, err) == (0, ""), err
    assert "new: mark, marked" in out
    code, _, err = cli(["run", prog, "-F", facts, "-D", tmp_path / "r3"])
    assert code == 0, err
    same(tmp_path / "o3", tmp_path / "r3")
    assert sorted((tmp_path / "o3" / "marked.csv").read_text().splitlines()) == \
        sorted((tmp_path / "r3" / "marked.csv").read_text().splitlines()) != []


def _csv(folder: Path, name: str) -> list[str]:
    return sorted((folder / f"{name}.csv").read_text().splitlines())


def test_ops_on_a_new_input_net_against_the_facts_it_starts_from(cli, tmp_path, no_spark):
    """`update --program NEW --facts DIR` with a diff in the same epoch: its ops on the new
    input q net against q's facts from DIR, those on e (in both programs) against e's stored
    base: removing a fact of either removes it, inserting one already there is a no-op (and
    said so); the outputs are those of a run of NEW on the final facts."""
    old = ".decl e(x:number, y:number)\n.input e\n.decl p(x:number, y:number)\n.output p\n" \
          "p(x, y) :- e(x, y).\n"
    new = old + ".decl q(x:number)\n.input q\n.decl r(x:number, y:number)\n.output r\n" \
                "r(x, y) :- q(x), e(x, y).\n.decl qq(x:number)\n.output qq\nqq(x) :- q(x).\n"
    (tmp_path / "old.dl").write_text(old)
    (tmp_path / "new.dl").write_text(new)
    write_facts(tmp_path / "f0", {"e": {(1, 2), (2, 3), (3, 4)}})
    write_facts(tmp_path / "f1", {"q": {(1,), (2,), (3,)}})
    code, _, err = cli(["run", tmp_path / "old.dl", "-F", tmp_path / "f0", "-D", tmp_path / "o0",
                        "-q", "--state", tmp_path / "st"])
    assert code == 0, err
    (tmp_path / "d.diff").write_text("-e(1, 2)\n-q(2)\n+e(2, 3)\n+q(3)\n+q(9)\n")
    code, out, err = cli(["update", tmp_path / "st", "--program", tmp_path / "new.dl",
                          "--facts", tmp_path / "f1", "--insert", tmp_path / "d.diff",
                          "-D", tmp_path / "o1"])
    assert (code, err) == (0, ""), err
    assert "note: 1 inserted fact(s) of e already present (no-op)" in out
    assert "note: 1 inserted fact(s) of q already present (no-op)" in out
    assert "not present" not in out  # q(2) was there: its removal is not a no-op
    # e: {(2,3), (3,4)}; q: {1, 3, 9}; r joins them on x: only 3 has an edge.
    want = {"p": ["2\t3", "3\t4"], "r": ["3\t4"], "qq": ["1", "3", "9"]}
    assert {n: _csv(tmp_path / "o1", n) for n in want} == want
    write_facts(tmp_path / "fin", {"e": {(2, 3), (3, 4)}, "q": {(1,), (3,), (9,)}})
    code, _, err = cli(["run", tmp_path / "new.dl", "-F", tmp_path / "fin", "-D",
                        tmp_path / "r1", "-q"])
    assert code == 0, err
    assert {n: _csv(tmp_path / "r1", n) for n in want} == want


def test_ord_and_limitsize_in_a_tiny_program_change_run_in_the_driver(cli, tmp_path,
                                                                      no_spark):
    """`update --program` bringing in a `.limitsize` relation, then `ord`, then a new
    constant of `ord`, with a Spark that cannot start: each runs in the driver and equals a
    run of the new program (l keeps the 3 smallest of p's tuples: Soufflé's limit, as
    engine/limitsize.py fixes which), and ord numbers as tests/test_ord.py documents."""
    old = ".decl e(x:symbol, y:symbol)\n.input e\n.decl p(x:symbol, y:symbol)\n.output p\n" \
          "p(x, y) :- e(x, y).\np(x, z) :- p(x, y), e(y, z).\n"
    lim = old + ".decl l(x:symbol, y:symbol)\n.limitsize l(n=3)\n.output l\nl(x, y) :- p(x, y).\n"
    ordinal = lim + ".decl o(x:symbol, n:number)\n.output o\no(x, ord(x)) :- e(x, _).\n"
    more = ordinal + ".decl o2(x:symbol, k:number)\n.output o2\no2(x, ord(\"Q\")) :- e(x, _).\n"
    for name, text in (("old", old), ("lim", lim), ("ord", ordinal), ("more", more)):
        (tmp_path / f"{name}.dl").write_text(text)
    # Lines in text order: a run numbers the symbols as read, a program change sorted.
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "e.facts").write_text("a\tb\nb\tc\nc\td\n")
    code, _, err = cli(["run", tmp_path / "old.dl", "-F", tmp_path / "f", "-D", tmp_path / "o",
                        "-q", "--state", tmp_path / "st"])
    assert code == 0, err
    for name, want in (("lim", {"l": ["a\tb", "a\tc", "a\td"]}),
                       ("ord", {"o": ["a\t0", "b\t1", "c\t2"]})):
        code, out, err = cli(["update", tmp_path / "st", "--program", tmp_path / f"{name}.dl",
                              "-D", tmp_path / f"o-{name}"])
        assert (code, err) == (0, ""), err
        code, _, err = cli(["run", tmp_path / f"{name}.dl", "-F", tmp_path / "f", "-D",
                            tmp_path / f"r-{name}", "-q"])
        assert code == 0, err
        for rel in ("p", *want):
            assert _csv(tmp_path / f"o-{name}", rel) == _csv(tmp_path / f"r-{name}", rel), rel
        assert {rel: _csv(tmp_path / f"o-{name}", rel) for rel in want} == want
    # Kept `ord` numbers a new constant first, then the symbols the epoch inserts; the
    # limited l is recomputed in the driver: "0" sorts before "a".
    (tmp_path / "d.diff").write_text('+e("0", "a")\n')
    code, out, err = cli(["update", tmp_path / "st", "--program", tmp_path / "more.dl",
                          "--insert", tmp_path / "d.diff", "-D", tmp_path / "o-more"])
    assert (code, err) == (0, ""), err
    got = {rel: _csv(tmp_path / "o-more", rel) for rel in ("o", "o2", "l")}
    assert got == {"o": ["0\t5", "a\t0", "b\t1", "c\t2"],  # a b c d numbered; Q 4; "0" 5
                   "o2": ["0\t4", "a\t4", "b\t4", "c\t4"],
                   "l": ["0\ta", "0\tb", "0\tc"]}
