"""Unsigned numbers as Soufflé's 64-bit `unsigned`: C's unsigned arithmetic (modulo 2^64),
comparisons above 2^63, `as(x, unsigned)` keeping the bits, division, shifts and aggregates,
under the local and global plans and through an epoch.

Every expected value here is worked out from C's rules for a 64-bit unsigned (what Soufflé's
RamUnsigned is): a result is taken modulo 2^64, `/` and `%` and `>>` act on the unsigned value,
a number converted to unsigned keeps its bits (-1 is 2^64 - 1). Outputs print the unsigned value.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.engine.incremental import IncrementalSession
from levelflow.engine.runner import run_program
from levelflow.tasks import build_tasks, parse_program

U64 = 2**64
TOP = U64 - 1  # 18446744073709551615
HALF = 2**63  # 9223372036854775808

PROGRAM = """
.decl u(x:unsigned)
.input u
.decl n(x:number)
.input n
.decl big(x:unsigned)
big(x) :- u(x), x > 9223372036854775807u.
.decl lt(x:unsigned, y:unsigned)
lt(x, y) :- u(x), u(y), x < y.
.decl diff(x:unsigned, y:unsigned, d:unsigned)
diff(x, y, x - y) :- u(x), u(y), x != y.
.decl ops(x:unsigned, q:unsigned, r:unsigned, s:unsigned, p:unsigned, b:unsigned)
ops(x, x / 3, x % 3, x bshr 60, x * 2, bnot x) :- u(x).
.decl casts(x:number, u:unsigned, back:number, f:float, t:symbol)
casts(x, as(x, unsigned), as(as(x, unsigned), number), utof(itou(x)), to_string(itou(x))) :-
  n(x).
.decl agg(s:unsigned, lo:unsigned, hi:unsigned)
agg(s, lo, hi) :- s = sum x : u(x), lo = min x : u(x), hi = max x : u(x).
.decl chain(x:unsigned)
chain(x) :- u(x), x > 18446744073709551610u.
chain(x - 1) :- chain(x), x > 18446744073709551612u.
.output big, lt, diff, ops, casts, agg, chain
"""


def expected(us: set[int], ns: set[int]) -> dict[str, list[str]]:
    """Return each output's lines (sorted) for inputs u = us and n = ns, by C's unsigned rules."""
    def line(*values) -> str:
        return "\t".join(map(str, values))
    chain, x = set(), TOP  # the facts above 2^64 - 6 step down while above 2^64 - 4
    for start in (v for v in us if v > U64 - 6):
        x = start
        chain.add(x)
        while x > U64 - 4:
            x -= 1
            chain.add(x)
    return {k: sorted(v) for k, v in {
        "big": [line(x) for x in us if x > HALF - 1],
        "lt": [line(x, y) for x in us for y in us if x < y],
        "diff": [line(x, y, (x - y) % U64) for x in us for y in us if x != y],
        "ops": [line(x, x // 3, x % 3, x >> 60, (2 * x) % U64, TOP - x) for x in us],
        "casts": [line(x, x % U64, x, format(float(x % U64), ".17g"), x % U64) for x in ns],
        "agg": [line(sum(us) % U64, min(us), max(us))],
        "chain": [line(x) for x in chain],
    }.items()}


US = {1, 5, HALF, TOP}
NS = {-1, 3}


def _facts(folder: Path, us: set[int], ns: set[int]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "u.facts").write_text("".join(f"{x}\n" for x in sorted(us)))
    (folder / "n.facts").write_text("".join(f"{x}\n" for x in sorted(ns)))
    return folder


def _outputs(folder: Path) -> dict[str, list[str]]:
    return {p.stem: sorted(p.read_text().splitlines()) for p in folder.glob("*.csv")}


def test_the_expectations_are_souffles_own_examples():
    """A few values of `expected` written out, as C computes them."""
    ex = expected(US, NS)
    assert f"1\t5\t{U64 - 4}" in ex["diff"] and f"{TOP}\t1\t{U64 - 2}" in ex["diff"]
    assert f"{HALF}\t{3074457345618258602}\t2\t8\t0\t{HALF - 1}" in ex["ops"]
    assert f"{TOP}\t6148914691236517205\t0\t15\t{TOP - 1}\t0" in ex["ops"]
    assert "-1\t18446744073709551615\t-1\t1.8446744073709552e+19\t18446744073709551615" \
        in ex["casts"]
    assert ex["agg"] == [f"{HALF + 5}\t1\t{TOP}"]  # the sum wraps past 2^64
    assert ex["chain"] == sorted(str(TOP - k) for k in range(4))


@pytest.mark.parametrize("plan", ["local", "global"])
def test_unsigned_semantics_under_every_plan(spark, tmp_path, plan):
    pt = build_tasks(parse_program(PROGRAM, "u.dl"))
    facts = _facts(tmp_path / "facts", US, NS)
    run_program(spark, pt, facts, tmp_path / "out", jobs=2, plan=plan)
    assert _outputs(tmp_path / "out") == expected(US, NS)


def test_unsigned_values_are_maintained_by_an_epoch(spark, tmp_path):
    """An epoch inserts 0 and 2^64 - 3 and removes 5 (a diff writes them in decimal): every
    output is then what the rules give on the new facts."""
    pt = build_tasks(parse_program(PROGRAM, "u.dl"))
    facts = _facts(tmp_path / "facts", US, NS)
    session = IncrementalSession.bootstrap(spark, pt, facts, tmp_path / "state")
    diff = tmp_path / "e.diff"
    diff.write_text(f"+u(0)\n+u({TOP - 2})\n-u(5)\n+n(-9223372036854775808)\n")
    from levelflow.engine.incremental.updates import read_update_file

    session.extend(read_update_file(session.program, diff, +1))
    session.commit()
    session.write_outputs(tmp_path / "out")
    us, ns = {0, 1, HALF, TOP, TOP - 2}, NS | {-(2**63)}
    assert _outputs(tmp_path / "out") == expected(us, ns)
    session.close()
