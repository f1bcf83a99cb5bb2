"""The terms one-tuple-at-a-time rounds evaluate (plans/tuples.py): each a closure over the
variable slots, with rules.py's and columnar.py's semantics (checked 64-bit arithmetic: no value,
None, drops the row); `runs_tuples` says whether a task's rules use only such terms.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

from levelflow.engine import rules as R
from levelflow.tasks.ast import Aggregate, BinOp, Call, Comparison, Negation
from levelflow.tasks.functor_check import subterms
from levelflow.tasks.functors import c_arith, unsigned_arith
from levelflow.tasks.numbers import order_key

_MIN, _MAX = -(2**63), 2**63 - 1
# c_arith's + - * on integers, range-checked by the caller.
_EXACT = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _int_op(op: str, a: int, b: int) -> int | None:
    """Return `a op b` on 64-bit integers as columnar._checked_int does; None if no value."""
    r = c_arith(op, a, b, False)
    return r if r is not None and _MIN <= r <= _MAX else None


def _float_op(op: str, a: float, b: float) -> float | None:
    """Return `a op b` on doubles; `/` and `%` by zero have no value, `%` is C's fmod."""
    return c_arith(op, float(a), float(b), True)


class ClosureOps(R.Ops):
    """rules.Ops for expressions only: each is a function of the variable slots (None: no value)."""

    __slots__ = ("slots", "literals")

    def __init__(self, slots: Mapping[str, int]) -> None:
        self.slots = slots  # variable column -> slot
        self.literals: dict[int, tuple] = {}  # id of a literal's function: (function, value)

    def lit(self, value, kind):
        value = float(value) if kind == "float" else value
        def fn(env):
            return value
        self.literals[id(fn)] = (fn, value)
        return fn

    def col(self, name):
        return operator.itemgetter(self.slots[name])  # env[slot], without a Python frame

    def arith(self, op, left, right, kind):
        if kind == "number" and op in _EXACT:  # _int_op's + - *, inline: the usual `x + 1`
            exact = _EXACT[op]
            if id(right) in self.literals:  # a constant operand is not a call per value
                b = self.literals[id(right)][1]

                def checked_const(env):
                    a = left(env)
                    if a is None:
                        return None
                    r = exact(a, b)
                    return r if _MIN <= r <= _MAX else None
                return checked_const

            def checked(env):
                a, b = left(env), right(env)
                if a is None or b is None:
                    return None
                r = exact(a, b)
                return r if _MIN <= r <= _MAX else None
            return checked
        fn = _float_op if kind == "float" else unsigned_arith if kind == "unsigned" else _int_op

        def value(env):
            a, b = left(env), right(env)
            return None if a is None or b is None else fn(op, a, b)
        return value

    def order_key(self, value):
        return lambda env: (lambda v: None if v is None else order_key(v))(value(env))

    def cast(self, expr, primitive):
        if primitive == "float":
            return lambda env: (lambda v: None if v is None else float(v))(expr(env))
        return lambda env: (lambda v: int(v) if isinstance(v, float) else v)(expr(env))


# The comparisons a variant tests (Variant._compare); any other keeps a task on frames.
COMPARE = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
           ">": operator.gt, ">=": operator.ge}

_PLAIN_ARITH = frozenset("+-*/%")


def runs_tuples(rules) -> bool:
    """Return whether TupleRounds evaluates every term of `rules`: no functor, no operator
    beyond + - * / %, no comparison beyond = != < <= > >= (else the rounds stay on frames)."""
    terms = []
    for rule in rules:
        for lit in (*rule.heads, *rule.body):
            if isinstance(lit, Comparison):
                if lit.op not in COMPARE:
                    return False
                terms += [lit.left, lit.right]
            else:
                terms += (lit.atom if isinstance(lit, Negation) else lit).args
    return all(not isinstance(t, BinOp | Call | Aggregate)
               or (isinstance(t, BinOp) and t.op in _PLAIN_ARITH)
               for term in terms for t in subterms(term))
