"""User-defined functors (`.functor f(...): T`) bound to a Python module with `--functors`:
the front end's checks, every plan against the naive reference (which imports the module on its
own), an update epoch equal to from scratch, and the CLI (run, run --state, update)."""

from __future__ import annotations

from pathlib import Path

import pytest
from naive_datalog import evaluate as naive_evaluate
from test_incremental_properties import rows_of, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.incremental.program_text import ProgramText, load_tasks
from levelflow.engine.runner import run_program
from levelflow.errors import LevelflowError
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.user_functors import bound

MODULE = '''
import math

def scale(x, s):
    return x * 2 + len(s)

def half(x):
    return None if x % 2 else x // 2  # None: no value, the row derives nothing

def shout(s, n):
    return s.upper() + "!" * n

def root(x):
    return math.sqrt(x) if x >= 0 else None

def big(x):
    return 2 ** 70 if x > 3 else x  # beyond 64 bits: no value, as an overflow

def ubump(u):
    return u + 1

def boom(x):
    raise ValueError("no " + str(x))

def wrong(x):
    return "text"
'''

PROGRAM = """
.type Id <: number
.functor scale(x: number, s: symbol): number
.functor half(Id): Id stateful
.functor shout(symbol, number): symbol
.functor root(x: float): float
.functor big(number): number
.functor ubump(unsigned): unsigned
.decl a(x:number, s:symbol)
.input a
.decl f(x:float)
.input f
.decl u(x:unsigned)
.input u
.decl scaled(x:number, y:number)
scaled(x, @scale(x, s)) :- a(x, s).
.decl halves(x:number, y:number)
halves(x, y) :- a(x, _), y = @half(x).
halves(x, z) :- halves(x, y), z = @half(y).
.decl loud(t:symbol)
loud(@shout(s, x)) :- a(x, s), x < 4.
.decl roots(x:float, r:float)
roots(x, @root(x)) :- f(x).
.decl bigs(x:number, y:number)
bigs(x, @big(x)) :- a(x, _).
.decl bumped(x:unsigned, y:unsigned)
bumped(x, @ubump(x)) :- u(x).
.decl chosen(x:number)
chosen(x) :- a(x, _), @half(x) = 2.
.decl folded(x:number)
folded(@scale(3, "ab")).
.output loud
.output roots
"""

FACTS = {"a": {(1, "ab"), (4, "c"), (8, "xyz"), (3, "")},
         "f": {(4.0,), (2.0,), (-1.0,)},
         "u": {(0,), (7,)}}
PLANS = ("local", "partitioned", "global")


@pytest.fixture
def module(tmp_path) -> Path:
    path = tmp_path / "fns.py"
    path.write_text(MODULE)
    return path


def _tasks(text: str, module: Path | None, name: str = "p.dl"):
    with bound(module):
        return build_tasks(parse_program(text, name))


def test_every_plan_gives_the_naive_reference(spark, tmp_path, module):
    pt = _tasks(PROGRAM, module)
    write_facts(tmp_path, FACTS)
    expected = naive_evaluate(pt, tmp_path)
    assert expected["scaled"] == {(1, 4), (4, 9), (8, 19), (3, 6)}
    assert expected["halves"] == {(4, 2), (4, 1), (8, 4), (8, 2), (8, 1)}  # 1, 3: no value
    assert expected["loud"] == {("AB!",), ("!!!",)}
    assert expected["roots"] == {(4.0, 2.0), (2.0, 2.0 ** 0.5)}
    assert expected["bigs"] == {(1, 1), (3, 3)}  # 2^70 is no number
    assert expected["bumped"] == {(0, 1), (7, 8)}
    assert expected["chosen"] == {(4,)} and expected["folded"] == {(8,)}
    for plan in PLANS:
        result = run_program(spark, pt, tmp_path, tmp_path / f"out-{plan}", jobs=2, plan=plan)
        for name in pt.program.decls:
            assert rows_of(result.relation(name)) == expected[name], (plan, name)


def test_an_update_epoch_equals_from_scratch(spark, tmp_path, module):
    pt = _tasks(PROGRAM, module)
    facts = {n: set(rows) for n, rows in FACTS.items()}
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    session.remove("a", (4, "c"))
    session.insert("a", (16, "q"))
    session.insert("f", (9.0,))
    session.commit()
    facts["a"] = facts["a"] - {(4, "c")} | {(16, "q")}
    facts["f"].add((9.0,))
    write_facts(tmp_path / "f1", facts)
    ref = naive_evaluate(pt, tmp_path / "f1")
    for name in pt.program.decls:
        assert rows_of(session.relation(name)) == ref[name], name
    assert {y for x, y in ref["halves"] if x == 16} == {8, 4, 2, 1}
    assert not {y for x, y in ref["halves"] if x == 4}


def test_a_raising_or_ill_typed_functor_is_one_line_naming_the_module(spark, tmp_path, module):
    write_facts(tmp_path, {"a": {(1, "x")}})
    for fn, says in (("boom", "functor boom raised ValueError: no 1"),
                     ("wrong", "functor wrong returned 'text' (str), not a number")):
        text = (f".functor {fn}(number): number\n.decl a(x:number, s:symbol)\n.input a\n"
                f".decl r(x:number)\nr(@{fn}(x)) :- a(x, _).\n")
        pt = _tasks(text, module)
        for plan in ("local", "global"):
            with pytest.raises(LevelflowError) as info:
                run_program(spark, pt, tmp_path, tmp_path / "out", jobs=1, plan=plan)
            assert f"{module}: error: {says}" in str(info.value), (plan, str(info.value))


@pytest.mark.parametrize(("text", "binding", "message"), [
    (".functor f(number): number\n", None,
     r"^p\.dl:1:1: error: functor 'f' has no binding: pass --functors FILE\.py"),
    (".functor nothere(number): number\n", "module",
     r"^p\.dl:1:1: error: functor 'nothere' has no binding: .*fns\.py defines no function "
     r"nothere$"),
    (".decl r(x:number)\nr(x) :- r(y), x = @g(y).\n", "module",
     r"^p\.dl:2:19: error: functor '@g' is not declared \(\.functor g\(types\): type\)$"),
    (".functor half(number): number\n.decl r(x:number)\nr(x) :- r(y), x = @half(y, 1).\n",
     "module", r"^p\.dl:3:19: error: type mismatch: '@half' takes 1 arguments, not 2$"),
    ('.functor half(number): number\n.decl r(x:number)\nr(x) :- r(_), x = @half("a").\n',
     "module", r"^p\.dl:3:19: error: type mismatch: '@half' takes \(number\), not symbol$"),
    (".functor half(number): symbol\n.decl r(x:number)\nr(@half(x)) :- r(x).\n", "module",
     r"^p\.dl:3:3: .*symbol"),
    (".functor half(number): number\n.functor half(number): number\n", "module",
     r"^p\.dl:2:1: error: functor 'half' is declared twice$"),
    (".functor half(Nope): number\n", "module", r"^p\.dl:1:15: .*Nope"),
    (".decl r(x:number)\nr(x) :- r(y), x = @ (y).\n", None,
     r"^p\.dl:2:19: error: expected a functor name after '@'"),
])
def test_functor_misuse_is_one_located_line(module, text, binding, message):
    with pytest.raises(DatalogError, match=message) as info:
        _tasks(text, module if binding else None)
    assert "\n" not in str(info.value)


def test_a_module_that_fails_to_import_is_named(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('nope')\n")
    with pytest.raises(DatalogError, match=r"^p\.dl:1:1: error: functor 'f' has no binding: "
                                           r"cannot import .*bad\.py: RuntimeError: nope$"):
        _tasks(".functor f(number): number\n", bad)


def test_the_python_api_binds_the_module(tmp_path, module):
    import levelflow

    program = tmp_path / "p.dl"
    program.write_text(PROGRAM)
    pt = levelflow.load(program, functors=module)
    (rule,) = [r for r in pt.program.rules if r.heads[0].relation == "scaled"]
    assert rule.heads[0].args[1].name == f"@scale|number,symbol|number|{module}"
    with pytest.raises(DatalogError, match="functor 'scale' has no binding"):
        levelflow.load(program)


def test_a_posted_program_is_never_bound(module):
    """serve loads posted text as a ProgramText, outside any `--functors` binding: a client
    cannot make it import code, even one naming a module on the server's disk."""
    text = ProgramText(".functor half(number): number\n", "posted.dl")
    with pytest.raises(DatalogError, match="posted.dl:1:1: error: functor 'half' has no "
                                           "binding: pass --functors"):
        load_tasks(text)


def test_cli_run_state_and_update_bind_the_module(cli_spark, cli, tmp_path, module):
    program = tmp_path / "p.dl"
    program.write_text(PROGRAM)
    write_facts(tmp_path / "facts", FACTS)
    state, out = tmp_path / "state", tmp_path / "out"
    code, _, err = cli(["run", program, "-F", tmp_path / "facts", "-D", out, "-q",
                        "--functors", module])
    assert code == 0, err
    assert sorted((out / "loud.csv").read_text().splitlines()) == ["!!!", "AB!"]
    assert "2\t1.4142135623730951" in (out / "roots.csv").read_text()  # Soufflé's %.17g
    code, _, err = cli(["run", program, "-F", tmp_path / "facts", "-D", out, "-q",
                        "--state", state, "--functors", module])
    assert code == 0, err
    (tmp_path / "a.facts").write_text("2\thi\n")
    code, out_text, err = cli(["update", state, "--insert", tmp_path / "a.facts"])
    assert code == 1 and err.count("\n") == 1 and "functor 'scale' has no binding" in err
    code, out_text, err = cli(["update", state, "--insert", tmp_path / "a.facts",
                               "--functors", module])
    assert code == 0, err
    assert "loud\t+1\t-0" in out_text  # shout("hi", 2)
    code, _, err = cli(["run", program, "-F", tmp_path / "facts", "-D", out,
                        "--functors", tmp_path / "none.py"])
    assert code == 1 and err == f"{tmp_path / 'none.py'}: error: --functors: no such Python " \
                                "file\n"
