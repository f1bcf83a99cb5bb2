"""Functors and operators: Soufflé's answers (edge cases written out by hand), the naive
reference under every plan, and incremental epochs equal to from-scratch evaluation.

Every functor goes through one rule body (engine/rules.py) over two backends: Polars in the
local and partitioned plans, Spark in the global plan; both must give the reference's tuples.
"""

from __future__ import annotations

import random

import pytest
from naive_datalog import evaluate as naive_evaluate
from naive_datalog import format_row
from test_incremental_properties import rows_of, write_facts

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.plans.planner import choose_plan
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, parse_program
from levelflow.tasks.errors import DatalogError

PLANS = ("local", "global", "partitioned")  # partitioned last: a repeat of global unless recursive

ARITH = """
.decl n(x:number)
.input n
.decl u(x:unsigned)
.input u
.decl f(x:float)
.input f
.decl ops(x:number, y:number, q:number, r:number, p:number, a:number, o:number, e:number)
ops(x, y, x / y, x % y, x ^ 2, x band y, x bor y, x bxor y) :- n(x), n(y), y != 0.
.decl shifts(x:number, y:number, l:number, r:number, ru:number)
shifts(x, y, x bshl y, x bshr y, x bshru y) :- n(x), n(y).
.decl logic(x:number, y:number, a:number, o:number, e:number, nx:number, bx:number)
logic(x, y, x land y, x lor y, x lxor y, lnot x, bnot x) :- n(x), n(y).
.decl pow(x:number, y:number, p:number)
pow(x, y, x ^ y) :- n(x), n(y).
.decl extremes(x:number, lo:number, hi:number, m:number)
extremes(x, min(x, 3, -1), max(x, 2), max(x)) :- n(x).
.decl casts(x:number, u:unsigned, f:float, back:number, s:symbol)
casts(x, to_unsigned(x), to_float(x), to_number(to_float(x) / 2), to_string(x)) :- n(x).
.decl ucasts(x:unsigned, i:number, f:float, d:unsigned, m:unsigned)
ucasts(x, utoi(x), utof(x), x - 3, max(x, 4)) :- u(x).
.decl fcasts(x:float, i:number, u:unsigned, s:symbol, p:float, h:float)
fcasts(x, ftoi(x), ftou(x), to_string(x), x ^ 2.0, max(x, 1)) :- f(x).
.decl itou_(x:number, u:unsigned, f:float)
itou_(x, itou(x), itof(x)) :- n(x).
.decl lits(x:number, s:symbol)
lits(x, to_string(2 ^ 3)) :- n(x), x > 2 ^ 5.
.output ops
.output fcasts
"""

STRINGS = """
.decl s(t:symbol)
.input s
.decl n(x:number)
.input n
.decl cut(t:symbol, i:number, k:number, c:symbol)
cut(t, i, k, substr(t, i, k)) :- s(t), n(i), n(k).
.decl glued(a:symbol, b:symbol, c:symbol, l:number)
glued(a, b, cat(a, "-", b), strlen(cat(a, b))) :- s(a), s(b).
.decl has(a:symbol, b:symbol)
has(a, b) :- s(a), s(b), contains(a, b).
.decl lacks(a:symbol, b:symbol)
lacks(a, b) :- s(a), s(b), !contains(a, b).
.decl matched(t:symbol)
matched(t) :- s(t), match("a.*", t).
.decl unmatched(t:symbol)
unmatched(t) :- s(t), !match("[a-c]+[0-9]?", t).
.decl anchored(t:symbol)
anchored(t) :- s(t), match("a|b1", t).
.decl pat(p:symbol, t:symbol)
pat(p, t) :- s(p), s(t), match(cat(p, "*"), t).
.decl parsed(t:symbol, x:number)
parsed(t, to_number(t)) :- s(t).
.decl order(lo:symbol, hi:symbol)
order(min(a, b), max(a, b)) :- s(a), s(b).
.decl plus(t:symbol)
plus(a + "+" + to_string(strlen(a))) :- s(a).
plus(to_string(3) + "." + to_string(14)).
.output glued
"""

RANGES = """
.decl n(x:number)
.input n
.decl up(x:number, y:number)
up(x, y) :- n(x), y = range(0, x).
.decl stepped(x:number, y:number)
stepped(x, y) :- n(x), y = range(x, -x, -2).
.decl zero(x:number, y:number)
zero(x, y) :- n(x), y = range(x, 3, 0).
.decl within(x:number)
within(x) :- n(x), x = range(-1, 2).
.decl ten(y:number)
ten(y) :- y = range(0, 10, 3).
.decl headed(x:number, y:number, z:number)
headed(x, range(0, x), range(x, 0, -2)) :- n(x), x < 4.
.decl fact(y:number)
fact(range(range(1, 3), 3)).
"""

# Float ranges add the step as Soufflé's C++ loop does, so rounding accumulates: 0.0 to 1.0 by
# 0.1 gives 11 values, the last 0.9999999999999999.
FLOAT_RANGES = """
.decl f(x:float)
.input f
.decl fr(x:float, y:float)
fr(x, y) :- f(x), y = range(x, 4.0, 0.7).
.decl tenth(y:float)
tenth(y) :- y = range(0.0, 1.0, 0.1).
.decl down(y:float)
down(y) :- y = range(1.5, -1).
.decl still(x:float, y:float)
still(x, y) :- f(x), y = range(x, 0.5, 0.0).
.decl documented(y:float)
documented(y) :- y = range(5, 3.75, -0.5).
.output tenth
"""

# Recursion through functors: a carried key (src) keeps the partitioned plan applicable.
RECURSIVE = """
.decl seed(src:number, t:symbol)
.input seed
.decl walk(src:number, n:number, t:symbol)
walk(src, 0, t) :- seed(src, t).
walk(src, n + 1, cat(t, to_string(n bxor src))) :- walk(src, n, t), n < 4, strlen(t) < 12.
.decl grid(src:number, y:number)
grid(src, y) :- seed(src, _), y = range(0, src).
grid(src, y + 2) :- grid(src, y), y + 2 < src * 2.
.decl tagged(src:number, t:symbol)
tagged(src, t) :- walk(src, _, t), match(".*[13].*", t).
"""

# autoinc(): each rule numbers its distinct bindings in sorted order (by variable name), the
# k-th such rule from k * 2^32, so numbers never meet across rules; a recursive task reads it.
AUTOINC = """
.decl s(t:symbol)
.input s
.decl id(t:symbol, n:number)
id(t, autoinc()) :- s(t).
.decl pair(a:symbol, b:symbol, n:number)
pair(a, b, autoinc() + 1) :- s(a), s(b), a < b, strlen(b) = 2.
.decl next(a:number, b:number)
next(a, b) :- id(_, a), id(_, b), b = a + 1.
next(a, c) :- next(a, b), id(_, c), c = b + 1.
"""

FACTS = {
    "n": {(x,) for x in (-7, -2, 0, 1, 3, 5, 62, 64)},
    "u": {(x,) for x in (0, 2, 7)},
    "f": {(x,) for x in (-2.5, 0.1, 3.0, 1e19)},
    "s": {(t,) for t in ("a", "ab", "abc", "b1", "12", " -3", "x7y", "")},
    "seed": {(1, "a"), (2, "b"), (3, "c1")},
}


def _tasks(text: str):
    return build_tasks(parse_program(text, "f.dl"))


def _distinct_plans(pt) -> list[str]:
    """Return the plans of PLANS that give some task another plan than the ones before do.

    A forced `partitioned` leaves a non-recursive task its one `global` pass (plans/planner.py),
    so on a program without recursion it runs exactly what `global` runs: a pure repeat.
    """
    decls, seen, plans = pt.program.decls, set(), []
    for plan in PLANS:
        kinds = tuple(choose_plan(t, decls, 0, plan).kind for t in pt.tasks)
        if kinds not in seen:
            seen.add(kinds)
            plans.append(plan)
    return plans


def _run_all_plans(spark, tmp_path, text: str, facts: dict) -> dict:
    """Return the naive reference after asserting every distinct plan derives exactly it."""
    pt = _tasks(text)
    used = {n: rows for n, rows in facts.items() if n in pt.program.inputs}
    write_facts(tmp_path, used)
    expected = naive_evaluate(pt, tmp_path)
    for plan in _distinct_plans(pt):
        out = tmp_path / f"out-{plan}"
        result = run_program(spark, pt, tmp_path, out, jobs=2, plan=plan)
        for name in pt.program.decls:
            got = rows_of(result.relation(name))
            assert got == expected[name], (plan, name, got ^ expected[name])
        for name in pt.program.outputs:  # floats printed as Soufflé prints them (%.17g)
            lines = (out / f"{name}.csv").read_text().splitlines()
            types = pt.program.decls[name].types
            assert sorted(lines) == sorted(format_row(r, types) for r in expected[name])
    return expected


def test_arithmetic_bitwise_and_casts_agree_under_every_plan(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, ARITH, FACTS)
    ops = {r[:2]: r[2:] for r in ref["ops"]}
    assert ops[(-7, 3)][:2] == (-2, -1)  # C truncates: -7 / 3 = -2, -7 % 3 = -1
    assert ops[(5, -7)][:2] == (0, 5)  # the remainder takes the dividend's sign
    assert ops[(-7, 3)][2:] == (49, -7 & 3, -7 | 3, -7 ^ 3)
    shifts = {r[:2]: r[2:] for r in ref["shifts"]}
    assert shifts[(1, 62)] == (2**62, 0, 0)
    assert shifts[(-2, 62)] == (-(2**63), -1, 3)  # bshl wraps; bshru fills with zeros
    assert shifts[(1, 64)] == (1, 1, 1)  # the count is taken modulo 64, as Soufflé masks it
    assert shifts[(-7, -7)] == (-(7 << 57), -1, 127)  # -7 & 63 = 57
    logic = {r[:2]: r[2:] for r in ref["logic"]}
    assert logic[(0, 5)] == (0, 1, 1, 1, -1)
    assert logic[(3, 5)] == (1, 1, 0, 0, -4)
    pow_ = {r[:2]: r[2] for r in ref["pow"]}
    assert pow_[(-2, 3)] == -8 and pow_[(3, 0)] == 1 and pow_[(5, -2)] == 0
    assert pow_[(1, -7)] == 1 and pow_[(-2, 62)] == 2**62
    assert (0, -7) not in pow_ and (3, 62) not in pow_  # 0 ^ -7 is infinite; 3 ^ 62 overflows
    assert {r[0]: r[1:] for r in ref["extremes"]}[-7] == (-7, 2, -7)
    casts = {r[0]: r[1:] for r in ref["casts"]}
    # to_unsigned(-7) is C's conversion: 2^64 - 7, held as the int64 of its bits (-7)
    assert casts[-7] == (-7, -7.0, -3, "-7") and casts[5] == (5, 5.0, 2, "5")
    ucasts = {r[0]: r[1:] for r in ref["ucasts"]}
    assert ucasts[7] == (7, 7.0, 4, 7)
    assert ucasts[2] == (2, 2.0, -1, 4)  # 2u - 3 wraps to 2^64 - 1 (held -1), as in C
    fcasts = {r[0]: r[1:] for r in ref["fcasts"]}
    assert -2.5 not in fcasts  # ftou(-2.5) is undefined in C++: no value
    assert fcasts[3.0] == (3, 3, "3.000000", 9.0, 3.0)
    assert fcasts[0.1] == (0, 0, "0.100000", 0.1**2, 1.0)  # to_string is std::to_string (%f)
    assert 1e19 not in fcasts  # beyond 64-bit integers: no ftoi
    assert {r[0]: r[1] for r in ref["itou_"]} == {x: x for (x,) in FACTS["n"]}  # same bits
    assert ref["lits"] == {(62, "8"), (64, "8")}  # functors of literals only
    lines = (tmp_path / "out-global" / "fcasts.csv").read_text().splitlines()
    assert "0.10000000000000001\t0\t0\t0.100000\t0.010000000000000002\t1" in lines  # %.17g
    assert "3\t3\t3\t3.000000\t9\t3" in lines


def test_string_functors_agree_under_every_plan(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, STRINGS, FACTS)
    cut = {r[:3]: r[3] for r in ref["cut"]}
    assert cut[("abc", 1, 1)] == "b" and cut[("abc", 1, 5)] == "bc"
    assert cut[("abc", 3, 1)] == "" and cut[("abc", 5, 1)] == ""  # out of range: ""
    assert cut[("abc", -2, 1)] == "" and cut[("abc", 0, -7)] == "abc"  # negative n: to the end
    assert ("b1", "ab", "b1-ab", 4) in ref["glued"] and ("", "", "-", 0) in ref["glued"]
    assert ("b1", "ab") not in ref["has"] and ("ab", "abc") in ref["has"]
    assert ("", "x7y") in ref["has"] and ("abc", "ab") in ref["lacks"]
    assert {t for (t,) in ref["matched"]} == {"a", "ab", "abc"}  # anchored: "xab" would fail
    assert {t for (t,) in ref["unmatched"]} == {"12", " -3", "x7y", ""}
    assert ref["anchored"] == {("a",), ("b1",)}  # the whole text must match: not "ab"
    assert ("a", "") in ref["pat"] and ("ab", "a") in ref["pat"] and ("ab", "ab") in ref["pat"]
    assert not {t for p, t in ref["pat"] if p == ""}  # "*" is a bad pattern: no match, no crash
    assert {t: x for t, x in ref["parsed"]} == {"12": 12, " -3": -3}  # others: no value
    assert ("12", "b1") in ref["order"] and ("", "") in ref["order"]
    # `+` of two symbols concatenates them, as Soufflé documents it
    assert ("ab+2",) in ref["plus"] and ("+0",) in ref["plus"] and ("3.14",) in ref["plus"]


def test_range_generates_a_row_per_value_under_every_plan(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, RANGES, FACTS)
    assert {y for x, y in ref["up"] if x == 3} == {0, 1, 2}
    assert {y for x, y in ref["up"] if x == -2} == {0, -1}  # from > to counts down
    assert not {y for x, y in ref["up"] if x == 0}
    assert {y for x, y in ref["stepped"] if x == 5} == {5, 3, 1, -1, -3}
    assert {y for x, y in ref["zero"] if x == 5} == {5} and not any(x == 3 for x, _ in
                                                                    ref["zero"])
    assert ref["within"] == {(0,), (1,)}
    assert ref["ten"] == {(0,), (3,), (6,), (9,)}
    # range in a head or a fact, as Soufflé normalises it: a fresh variable bound in the body
    assert {(y, z) for x, y, z in ref["headed"] if x == 3} == {(0, 3), (1, 3), (2, 3),
                                                                (0, 1), (1, 1), (2, 1)}
    assert ref["fact"] == {(1,), (2,)}


def test_float_range_accumulates_its_step_as_souffle_does(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, FLOAT_RANGES, FACTS)
    tenth = sorted(y for (y,) in ref["tenth"])
    assert len(tenth) == 11 and tenth[3] == 0.1 + 0.1 + 0.1 and tenth[-1] < 1.0
    assert ref["down"] == {(1.5,), (0.5,), (-0.5,)}
    assert ref["documented"] == {(5.0,), (4.5,), (4.0,)}  # Soufflé's aggregates page
    assert {y for x, y in ref["fr"] if x == 3.0} == {3.0, 3.7}
    assert not {y for x, y in ref["fr"] if x == 1e19}
    assert {x for x, _ in ref["still"]} == {-2.5, 0.1, 3.0, 1e19}  # step 0: from, once
    lines = (tmp_path / "out-local" / "tenth.csv").read_text().splitlines()
    # 17 significant digits, as Soufflé's writer prints a double: the accumulated error shows
    assert "0.30000000000000004" in lines and "0.99999999999999989" in lines


def test_functors_in_recursive_rules_agree_under_every_plan(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, RECURSIVE, FACTS)
    assert (1, 4, "a1032") in ref["walk"]  # n bxor 1 for n = 0..3
    assert {y for s, y in ref["grid"] if s == 3} == {0, 1, 2, 3, 4, 5}


def test_autoinc_numbers_bindings_apart_under_every_plan(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, AUTOINC, FACTS)
    ids = dict(ref["id"])
    assert sorted(ids.values()) == list(range(8)) and ids[""] == 0 and ids["x7y"] == 7
    assert {n for *_, n in ref["pair"]} == {2**32 + 1 + k for k in range(len(ref["pair"]))}
    assert (0, 7) in ref["next"]


@pytest.mark.parametrize("text", [AUTOINC, RECURSIVE, STRINGS + RANGES.replace(
    ".decl n(x:number)\n.input n\n", "")], ids=["autoinc", "recursive", "strings"])
def test_incremental_epochs_equal_from_scratch(spark, tmp_path, text):
    """Remove some inputs, then put them back: each epoch equals the naive reference."""
    pt = _tasks(text)
    facts = {n: set(rows) for n, rows in FACTS.items() if n in pt.program.inputs}
    write_facts(tmp_path / "f0", facts)
    session = IncrementalSession.bootstrap(spark, pt, tmp_path / "f0", mode="incremental")
    rng = random.Random(7)
    gone = {n: set(rng.sample(sorted(rows), len(rows) // 2)) for n, rows in facts.items()}
    for k, sign in enumerate((-1, +1), 1):
        for name, rows in gone.items():
            for row in rows:
                (session.insert if sign > 0 else session.remove)(name, row)
                (facts[name].add if sign > 0 else facts[name].discard)(row)
        session.commit()
        write_facts(tmp_path / f"ref{k}", facts)
        ref = naive_evaluate(pt, tmp_path / f"ref{k}")
        for name in pt.program.decls:
            assert rows_of(session.relation(name)) == ref[name], (k, name)


@pytest.mark.parametrize("body,message", [
    ("r(strlen(x)) :- n(x).", r"f\.dl:4:3: .*type mismatch: 'strlen' takes \(symbol\)"),
    ("r(x band 1.5) :- n(x).", r"'band' takes number or unsigned, not float"),
    ('r(x) :- n(x), contains(x, "a").', r"'contains' takes symbols"),
    ("r(x) :- n(x), y = cat(x).", r"'cat' does not take a number"),
    ("r(x) :- n(x), x = autoinc().", r"f\.dl:4:19: .*'autoinc\(\)' takes no arguments and "
                                      r"stands in a rule head"),
    ("r(autoinc()) :- r(_).", r"f\.dl:4:3: .*'autoinc\(\)' in a recursive rule"),
    ("r(x) :- n(x), x = substr(\"a\", 1).", r"'substr' takes 3 arguments"),
])
def test_functor_misuse_is_one_located_line(body, message):
    text = ".decl n(x:number)\n.input n\n.decl r(x:number)\n" + body + "\n"
    with pytest.raises(DatalogError, match=message) as info:
        _tasks(text)
    assert "\n" not in str(info.value)


def test_constant_functors_in_facts_are_folded():
    pt = _tasks('.decl r(a:number, b:symbol, c:number)\nr(2 ^ 10, cat("a", to_string(-3)), '
                '1 bshl 4 bor 1).\n')
    (fact,) = pt.program.facts
    assert [a.value for a in fact.heads[0].args] == [1024, "a-3", 17]
