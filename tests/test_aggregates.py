"""Aggregates (count, sum, min, max, mean): Soufflé's answers written out by hand, the naive
reference under every plan, and the one-line refusals.

Each aggregate is lowered in front (tasks/aggregates.py) to a generated relation whose rule
groups its body's rows (engine/rules.py `aggregate_rows`) over Polars in the local and
partitioned plans and Spark in the global plan; both must give the reference's tuples.
"""

from __future__ import annotations

import pytest
from test_functors import _run_all_plans

from levelflow.tasks import parse_program
from levelflow.tasks.errors import DatalogError

FACTS = {
    "e": {(1, 2), (1, 3), (2, 3), (3, 4), (5, 5)},
    "n": {(k,) for k in range(1, 7)},
    "w": {(1, 2.5), (1, 0.5), (2, 4.0), (4, -1.25)},
    "u": {(1, 3), (1, 4), (2, 9)},
    "big": {(1, 2**62), (2, 2**62), (3, 2**62)},
}

DECLS = """
.decl e(x:number, y:number)
.input e
.decl n(x:number)
.input n
.decl w(x:number, v:float)
.input w
.decl u(x:number, v:unsigned)
.input u
.decl big(k:number, v:number)
.input big
"""

FORMS = DECLS + """
.decl deg(x:number, c:number)
deg(x, c) :- n(x), c = count : { e(x, _) }.
.decl outdeg(x:number, c:number)
outdeg(x, count : e(x, _)) :- n(x).
.decl total(s:number)
total(s) :- s = sum y : e(_, y).
.decl lo(x:number, m:number)
lo(x, min y : { e(x, y) }) :- n(x).
.decl hi(x:number, m:number)
hi(x, m) :- n(x), m = max y : { e(x, y), y != 5 }.
.decl avg(a:float)
avg(a) :- a = mean x * y : { e(x, y) }.
.decl prod(s:number)
prod(s) :- s = sum x * y : { e(x, y) }.
.decl wsum(x:number, s:float, m:float)
wsum(x, s, m) :- n(x), s = sum v : { w(x, v) }, m = mean v : { w(x, v) }.
.decl wmin(m:float)
wmin(min v : w(_, v)).
.decl usum(x:number, s:unsigned, m:unsigned)
usum(x, s, m) :- n(x), s = sum v : { u(x, v) }, m = max v : u(x, v).
.decl nested(x:number, c:number)
nested(x, c) :- n(x), c = count : { e(x, y), 1 < count : { e(y, _) } + 1 }.
.decl inexpr(x:number)
inexpr(x) :- n(x), 2 * x = 2 * sum y : { e(x, y) } - 8.
.decl none(m:number)
none(m) :- m = min y : e(7, y).
.decl zero(c:number, s:number)
zero(c, s) :- c = count : e(7, _), s = sum y : e(7, y).
.decl overflow(k:number, s:number)
overflow(k, s) :- n(k), k < 3, s = sum v : big(_, v).
.decl fine(s:number)
fine(s) :- s = sum v : { big(k, v), k < 2 }.
.decl local(x:number, c:number)
local(x, c) :- n(x), c = count : { e(x, y), n(y), y > x }.
"""


def test_every_aggregate_form_agrees_under_every_plan(spark, tmp_path):
    ref = _run_all_plans(spark, tmp_path, FORMS, FACTS)
    assert ref["deg"] == {(1, 2), (2, 1), (3, 1), (4, 0), (5, 1), (6, 0)}
    assert ref["outdeg"] == ref["deg"]
    assert ref["total"] == {(17,)}  # over the tuples: 3 appears twice
    assert ref["lo"] == {(1, 2), (2, 3), (3, 4), (5, 5)}  # no minimum of nothing
    assert ref["hi"] == {(1, 3), (2, 3), (3, 4)}
    assert ref["avg"] == {((2 + 3 + 6 + 12 + 25) / 5,)}
    assert ref["prod"] == {(48,)}
    # The mean of nothing has no value, so x = 3 gets no row (its sum would be 0.0).
    assert ref["wsum"] == {(1, 3.0, 1.5), (2, 4.0, 4.0), (4, -1.25, -1.25)}
    assert ref["wmin"] == {(-1.25,)}
    assert ref["usum"] == {(1, 7, 4), (2, 9, 9)}
    assert ref["nested"] == {(1, 2), (2, 1), (3, 0), (4, 0), (5, 1), (6, 0)}
    assert ref["inexpr"] == {(1,)}  # 2 * 1 = 2 * 5 - 8
    assert ref["none"] == set()
    assert ref["zero"] == {(0, 0)}
    assert ref["overflow"] == set()  # 3 * 2^62 leaves 64 bits: no value
    assert ref["fine"] == {(2**62,)}
    assert ref["local"] == {(1, 2), (2, 1), (3, 1), (4, 0), (5, 0), (6, 0)}


@pytest.mark.parametrize("body,message", [
    # Soufflé's witness problem: only min and max give the bindings that reach their value
    ("r(y) :- n(x), c = count : { e(x, y) }, c > 0.",
     r"f\.dl:4:3: .*variable 'y' is bound only inside the count aggregate at 4:19 but used "
     r"outside it: only a min or max aggregate gives its witnesses"),
    ("r(x) :- n(x), x = sum \"a\" : e(x, _).", r"'sum' takes numbers"),
    ("r(y) :- n(x), y = sum z : { e(x, z) }, z > 0.",
     r"f\.dl:4:40: .*variable 'z' is bound only inside the sum aggregate"),
    ("r(y) :- n(x), c = mean z : { e(x, z), e(z, y) }, c > 0.",
     r"variable 'y' is bound only inside the mean aggregate"),
    # neither injected nor a witness: local to the aggregate, so ungrounded outside it
    ("r(y) :- n(x), c = count : { e(x, _), y > 0 }.",
     r"f\.dl:4:3: .*variable 'y' is not grounded"),
    ("r(c) :- n(c), c = count : r(_).",
     r"f\.dl:\d+:\d+: .*aggregate over 'r' inside a recursive cycle with 'r'"),
    # Soufflé's parser refuses it too ("disjunctions in aggregation clauses are currently not
    # supported"); the line says so and how to write it
    ("r(x) :- n(x), x = count : { e(x, _) ; n(x) }.",
     r"f\.dl:4:27: error: a disjunction inside an aggregate is not supported, as in Soufflé "
     r"\(an auxiliary relation with a rule per disjunct does it\)$"),
])
def test_aggregate_misuse_is_one_located_line(body, message):
    text = ".decl n(x:number)\n.decl e(x:number, y:number)\n.decl r(x:number)\n" + body + "\n"
    with pytest.raises(DatalogError, match=message) as err:
        parse_program(text, "f.dl")
    assert "\n" not in str(err.value)
