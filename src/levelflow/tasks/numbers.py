"""How levelflow holds and prints numbers, as Soufflé's 64-bit build does.

An `unsigned` is Soufflé's 64-bit unsigned integer, held as the int64 of the same bits (2^64 - 1
is held as -1); a float is printed as Soufflé's writer prints a double.
"""

from __future__ import annotations

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
U64 = 1 << 64


def unsigned_value(held: int) -> int:
    """Return the unsigned value (0 .. 2^64 - 1) an int64 holds."""
    return held % U64


def held_unsigned(value: int) -> int:
    """Return the int64 that holds unsigned `value` taken modulo 2^64 (its bits)."""
    value %= U64
    return value - U64 if value > INT64_MAX else value


def order_key(held: int) -> int:
    """Return an int64 whose signed order is the unsigned order of held values (the sign bit
    flipped), so `<` on keys is `<` on the unsigned numbers."""
    return held ^ INT64_MIN


def float_text(value: float) -> str:
    """Return a float as Soufflé writes it to an output (files, stdout, record fields): a C++
    stream at std::numeric_limits<double>::max_digits10, i.e. `%.17g` (`0.0009765625`, `0.5`,
    `1e+20`, `0.10000000000000001`)."""
    return f"{value:.17g}"
