"""Soufflé's intrinsic functors: their types, and the plain Python value of the ones every
backend evaluates the same way (a Python function over rows: exact integer `^`, text parsing,
float printing) or that constant folding needs. `match` is tasks/ecmascript.py's and
engine/regex_match.py's.

A function here returns None where Soufflé's answer is an error or undefined behaviour (an
overflow, `0 ^ -1`, `to_number("x")`, a float outside the integers): the row derives nothing.

An `unsigned` is Soufflé's 64-bit unsigned integer, held as the int64 of the same bits (2^64 - 1
is held as -1): `+ - *` wrap modulo 2^64, `/ % < <= > >= min max` and `bshr` read the bits as
unsigned (`unsigned_value`), and number <-> unsigned conversions keep the bits, as Soufflé's
do. A backend compares held values by `order_key`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from levelflow.tasks.ast import BinOp, Call, Rule
from levelflow.tasks.numbers import U64, held_unsigned, order_key, unsigned_value

NUMERIC = ("number", "unsigned", "float")
INTEGRAL = ("number", "unsigned")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

ARITH_OPS = ("+", "-", "*", "/", "%", "^")
INTEGRAL_OPS = ("band", "bor", "bxor", "bshl", "bshr", "bshru", "land", "lor", "lxor")
# Conversions: name -> (argument types it takes, result type).
CASTS = {
    "itou": (("number",), "unsigned"), "utoi": (("unsigned",), "number"),
    "itof": (("number",), "float"), "ftoi": (("float",), "number"),
    "utof": (("unsigned",), "float"), "ftou": (("float",), "unsigned"),
    "to_number": (NUMERIC + ("symbol",), "number"),
    "to_unsigned": (NUMERIC + ("symbol",), "unsigned"),
    "to_float": (NUMERIC + ("symbol",), "float"),
    "to_string": (NUMERIC + ("symbol",), "symbol"),
}
# Fixed signatures: name -> (argument types, result type).
# `ord` is lowered to a join with the symbol table before it is evaluated (tasks/ordinals.py).
FIXED = {"strlen": (("symbol",), "number"), "substr": (("symbol", "number", "number"), "symbol"),
         "ord": (("symbol",), "number")}
CONSTRAINTS = ("contains", "match")  # boolean functors: body literals, never values
# The longest symbol levelflow holds, in characters: one a functor makes (`cat`, a record or
# ADT's text, a user functor's result) or a fact file or diff brings. Soufflé has no bound, so
# `s(cat(x, x)) :- s(x).` runs until memory is gone; 1 Mi characters is far beyond any name,
# path or text a fact carries, is reached by such a doubling in 20 rounds (a few MB made), and
# an Arrow batch of them between Spark and a Python worker still fits its 2 GiB of string
# offsets at 500 rows of 4-byte characters. (substr, to_string and a record's field cannot
# make a symbol longer than their arguments.)
MAX_SYMBOL = 1 << 20
# Every functor name a term may call (`range` only as `x = range(...)`).
CALLS = frozenset({*CASTS, *FIXED, "min", "max", "cat", "bnot", "lnot", "range", "autoinc"})


def uses_autoinc(rules: Iterable[Rule]) -> bool:
    """Return whether a rule head calls `autoinc()` (its task is renumbered, never updated)."""
    def has(term) -> bool:
        if isinstance(term, Call):
            return term.name == "autoinc" or any(map(has, term.args))
        return isinstance(term, BinOp) and (has(term.left) or has(term.right))
    return any(has(a) for rule in rules for h in rule.heads for a in h.args)


class FunctorTypeError(ValueError):
    """A functor applied to arguments of types it does not take (the message says which)."""


class FunctorUnsupported(FunctorTypeError):
    """A functor applied to types Soufflé takes and levelflow does not (a refusal, not a
    type mismatch)."""


def _join(name: str, types: list[str | None], allowed: tuple[str, ...]) -> str | None:
    """Return the one type of arguments that must agree ("int" constants take the others')."""
    if "int" in types and not set(allowed) & set(NUMERIC):
        raise FunctorTypeError(f"'{name}' does not take a number")
    known = {t for t in types if t not in (None, "int")}
    if len(known) > 1:
        raise FunctorTypeError(f"'{name}' mixes {' and '.join(sorted(known))}")
    if not known:
        return "number" if "int" in types else None
    ty = known.pop()
    if ty not in allowed:
        raise FunctorTypeError(f"'{name}' does not take a {ty}")
    return ty


def call_type(name: str, types: list[str | None]) -> str | None:
    """Return the result type of functor `name` over arguments of these types (None: unknown).

    An argument type is a primitive, "int" (an integer constant) or None (unknown).
    """
    n = len(types)
    if name.startswith("#"):  # a record functor the front end wrote (tasks/records.py)
        from levelflow.tasks.record_values import pack_mismatch, result_kind
        mismatch = pack_mismatch(name, types)
        if mismatch is not None:
            raise FunctorTypeError(mismatch)
        return result_kind(name)
    if name.startswith("@"):  # a user functor, bound by tasks/user_functors.py
        if "|" not in name:
            raise FunctorUnsupported(f"functor '{name}' is not declared (.functor "
                                     f"{name[1:]}(types): type)")
        return signature_type(name, types)
    if name in CASTS:
        allowed, result = CASTS[name]
        _arity(name, n, 1)
        got = "number" if types[0] == "int" else types[0]
        if got is not None and got not in allowed:
            raise FunctorTypeError(f"'{name}' takes {' or '.join(allowed)}, not {got}")
        return result
    if name in FIXED:
        allowed, result = FIXED[name]
        _arity(name, n, len(allowed))
        for want, got in zip(allowed, types, strict=True):
            if got is not None and got != want and not (got == "int" and want in NUMERIC):
                shown = "number" if got == "int" else got
                raise FunctorTypeError(f"'{name}' takes ({', '.join(allowed)}), not {shown}")
        return result
    if name in ("min", "max"):
        if n < 1:
            raise FunctorTypeError(f"'{name}' takes at least one argument")
        return _join(name, types, NUMERIC + ("symbol",))
    if name == "cat":
        if n < 1:
            raise FunctorTypeError("'cat' takes at least one argument")
        return _join(name, types, ("symbol",))
    if name in ("bnot", "lnot"):
        _arity(name, n, 1)
        return _join(name, types, INTEGRAL)
    if name == "range":
        if n not in (2, 3):
            raise FunctorTypeError("'range' takes two or three arguments (from, to[, step])")
        return _join(name, types, NUMERIC)
    if name == "autoinc":  # the checker gives it one argument: its rule's first number
        if n > 1:
            _arity(name, n, 0)
        return "number"
    raise FunctorTypeError(f"unknown functor '{name}'")


def signature_type(encoded: str, types: list[str | None]) -> str:
    """Return a bound call's result type; raise FunctorTypeError on a wrong argument."""
    from levelflow.tasks.user_functors import decode

    name, params, result, _ = decode(encoded)
    if len(types) != len(params):
        raise FunctorTypeError(f"'@{name}' takes {len(params)} arguments, not {len(types)}")
    for want, got in zip(params, types, strict=True):
        if got is not None and got != want and not (got == "int" and want in NUMERIC):
            shown = "number" if got == "int" else got
            raise FunctorTypeError(f"'@{name}' takes ({', '.join(params)}), not {shown}")
    return result


def _arity(name: str, n: int, want: int) -> None:
    if n != want:
        raise FunctorTypeError(f"'{name}' takes {want} argument{'s' if want != 1 else ''}, "
                               f"not {n}")


def binop_type(op: str, left: str | None, right: str | None) -> str | None:
    """Return the type of `left op right` (arithmetic, bitwise or logical)."""
    allowed = INTEGRAL if op in INTEGRAL_OPS else NUMERIC
    return _join(op, [left, right], allowed)


# -- plain values, one row at a time ---------------------------------------------------------

def c_arith(op: str, a, b, on_floats: bool):
    """Return `a op b` for + - * / % as C computes it, unchecked for range: integer division
    truncates toward zero and `%` takes the dividend's sign, `%` on floats is fmod; None for
    `/` or `%` by zero."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    if on_floats:
        return a / b if op == "/" else math.fmod(a, b)
    q = abs(a) // abs(b)  # Python's // floors; C truncates
    q = q if (a >= 0) == (b >= 0) else -q
    return q if op == "/" else a - b * q


def unsigned_arith(op: str, a: int, b: int) -> int | None:
    """Return `a op b` on held unsigned values for + - * / % (wrapping modulo 2^64, as C's
    unsigned arithmetic does); None for `/` or `%` by zero."""
    a, b = unsigned_value(a), unsigned_value(b)
    if op in ("/", "%") and b == 0:
        return None
    value = (a + b if op == "+" else a - b if op == "-" else a * b if op == "*"
             else a // b if op == "/" else a % b)
    return held_unsigned(value)


def fits(value: int, kind: str) -> int | None:
    """Return an integer result as `kind` holds it: a 64-bit signed value (None outside), or an
    unsigned one taken modulo 2^64 (C's conversion to unsigned)."""
    if kind == "unsigned":
        return held_unsigned(value)
    return value if INT64_MIN <= value <= INT64_MAX else None


def power(a, b, kind: str):
    """Return a ^ b: exact on integers (C's pow truncated: 2 ^ -1 is 0), C's pow on floats."""
    if kind == "float":
        try:
            return math.pow(a, b)
        except (OverflowError, ValueError):
            return None  # C's pow gives inf or NaN: no value, as an overflow
    if kind == "unsigned":  # a power past 2^64 - 1 is an overflow: no value
        a, b = unsigned_value(a), unsigned_value(b)
        if a > 1 and b >= 64:
            return None
        value = a ** b
        return held_unsigned(value) if value < U64 else None
    if b < 0:
        if a == 0:
            return None  # pow(0, -1) is infinite; its integer is undefined
        return 1 if a == 1 else (1 - 2 * (b % 2) if a == -1 else 0)
    if abs(a) > 1 and b >= 64:
        return None
    return fits(a ** b, kind)


_INT_TEXT = re.compile(r"[ \t]*[+-]?[0-9]+", re.ASCII)
_FLOAT_TEXT = re.compile(r"[ \t]*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?",
                         re.ASCII)


def text_to_number(text: str, kind: str) -> int | float | None:
    """Return the number a symbol spells (decimal, optional sign), or None if it spells none."""
    if kind == "float":
        if not _FLOAT_TEXT.fullmatch(text):
            return None
        value = float(text)
        return value if math.isfinite(value) else None
    if not _INT_TEXT.fullmatch(text):
        return None
    value = int(text)
    if kind == "unsigned":  # strtoull: a minus sign negates modulo 2^64; past 2^64 - 1, none
        return held_unsigned(value) if -U64 < value < U64 else None
    return fits(value, kind)


def number_to_text(value, kind: str) -> str:
    """Return a number as `to_string` spells it: C++'s std::to_string (floats as `%f`)."""
    if kind == "float":
        return f"{value:f}" if math.isfinite(value) else ("nan" if value != value else
                                                          "-inf" if value < 0 else "inf")
    return str(unsigned_value(value) if kind == "unsigned" else value)


def float_to_int(value: float, kind: str) -> int | None:
    """Return a float truncated toward zero, or None outside the integers of `kind` (UB in C)."""
    if not math.isfinite(value):
        return None
    if kind == "unsigned":
        return held_unsigned(int(value)) if -1.0 < value < 2.0**64 else None
    return fits(int(value), kind)


def convert(name: str, value, source: str):
    """Return `name(value)` for a cast from a value of type `source` (None: no value)."""
    result = CASTS[name][1]
    if value is None:
        return None
    if result == "symbol":
        return value if source == "symbol" else number_to_text(value, source)
    if source == "symbol":
        return text_to_number(value, result)
    if result == "float":
        return float(unsigned_value(value) if source == "unsigned" else value)
    if source == "float":
        return float_to_int(value, result)
    return fits(value, result)


def substr(text: str, start: int, length: int) -> str:
    """Return C++'s text.substr(start, length): "" when start is outside the text (Soufflé
    prints a warning and gives the empty string); a negative length runs to the end."""
    if not 0 <= start <= len(text):
        return ""
    return text[start:] if length < 0 else text[start:start + length]


_MASK = (1 << 64) - 1


def wrap(value: int, kind: str) -> int:
    """Return a result modulo 2^64 as the int64 that holds it (Soufflé's bit operations are
    defined modulo 2^64; a number and an unsigned are held alike)."""
    return held_unsigned(value & _MASK)


def binary(op: str, a, b, kind: str):
    """Return `a op b` for `^` and the bitwise, shift and logical operators (None: no value)."""
    if op == "^":
        return power(a, b, kind)
    if op in ("land", "lor", "lxor"):
        x, y = a != 0, b != 0
        return int(x and y if op == "land" else x or y if op == "lor" else x != y)
    if op == "band":
        return wrap(a & b, kind)
    if op == "bor":
        return wrap(a | b, kind)
    if op == "bxor":
        return wrap(a ^ b, kind)
    shift = b & 63  # Soufflé masks the shift count to the word size, as Java does
    if op == "bshl":
        return wrap(a << shift, kind)
    if op == "bshr":  # on an unsigned, C's >> shifts zeros in
        return wrap((a & _MASK if kind == "unsigned" else a) >> shift, kind)
    if op == "bshru":
        return wrap((a & _MASK) >> shift, kind)
    raise ValueError(f"unknown operator {op}")


MAX_FLOAT_RANGE = 10_000_000  # values of one float range: more is refused, not generated


def float_range(lo: float, hi: float, step: float | None = None) -> list[float] | None:
    """Return Soufflé's range over floats: lo, lo+step, ... while below hi (above, for a
    negative step), adding step each time as its C++ loop does (so rounding accumulates the
    same way); the step is 1 or -1 by direction; a zero step gives lo once when lo != hi.
    None (no value) for a NaN or infinite bound or step, or more than MAX_FLOAT_RANGE values."""
    if step is None:
        step = 1.0 if lo <= hi else -1.0
    if not all(map(math.isfinite, (lo, hi, step))):
        return None
    if step == 0:
        return [lo] if lo != hi else []
    if (hi - lo) / step > MAX_FLOAT_RANGE:
        return None
    out, x = [], lo
    while (x < hi) if step > 0 else (hi < x):
        if x + step == x:  # the step vanishes beside x: Soufflé's loop would never end
            return None
        out.append(x)
        x += step
    return out


def range_count(lo: float, hi: float, step: float | None = None) -> int:
    """Return how many values range(lo, hi[, step]) makes (Soufflé's: `hi` excluded, the step
    1 or -1 by direction, a zero step `lo` once when lo != hi); a float range's loop may make
    one value fewer."""
    if step is None:
        step = 1 if lo <= hi else -1
    if step == 0:
        return int(lo != hi)
    if not all(map(math.isfinite, (lo, hi, step))):
        return 0  # no value (float_range)
    span = (hi - lo) / step if isinstance(step, float) or isinstance(lo + hi, float) \
        else None
    if span is not None:
        return max(math.ceil(span), 0)
    return max(-((lo - hi) // step), 0)  # ceil((hi - lo) / step), exactly


def grows_symbols(name: str) -> bool:
    """Return whether a symbol-valued functor can make a symbol longer than its arguments."""
    return name == "cat" or name.startswith(("#pack", "@"))


def functor_name(name: str) -> str:
    """Return a functor's name as the program wrote it (a record's packing is its brackets)."""
    if name.startswith("#pack"):
        return "a record or ADT term"
    return name.split("|", 1)[0]  # a user functor: @f|types|result|module


def apply_plain(name: str):
    """Return the plain Python function of a record functor (`#pack:...`, `#get:...`) or of
    a user functor (`@f|...`, tasks/user_functors.py)."""
    if name.startswith("@"):
        from levelflow.tasks.user_functors import function as user_function
        return user_function(name)
    from levelflow.tasks.record_values import function
    return function(name)


def apply(name: str, args: list, source: str | None, kind: str):
    """Return functor `name` over plain values (`source`: the first argument's type, `kind`:
    the result's); None where it has no value. `range` and `autoinc` are not values."""
    if name.startswith(("#", "@")):
        return apply_plain(name)(*args)
    if name in CASTS:
        return convert(name, args[0], source)
    if name == "strlen":
        return len(args[0])
    if name == "substr":
        return substr(*args)
    if name in ("min", "max"):
        pick = min if name == "min" else max
        return pick(args, key=order_key) if kind == "unsigned" else pick(args)
    if name == "cat":
        return "".join(args)
    if name == "bnot":
        return wrap(~args[0], kind)
    if name == "lnot":
        return int(args[0] == 0)
    raise ValueError(f"functor {name} has no single value")
