"""Spark's row hash (`xxhash64(col, ...)`, seed 42) of stored rows, vectorized in numpy.

integrity.py's checksum is the sum over rows of Spark's xxhash64 of the row. The driver hashes
here what it writes (state.write_all) and what it verifies (`state check`), with no Spark job
and no JVM: per column, a value hashes with the hash so far as its seed, and a NULL leaves it
unchanged. As Spark's XXH64 does: an int (and a boolean, as 1 or 0) is `hashInt`, a long
`hashLong`, a double `hashLong` of its bits (-0.0 as 0.0, every NaN as Java's canonical NaN),
a string XXH64 of its UTF-8 bytes. A table with a column of any other type is Spark's to hash
(None).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

SEED = 42
_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_JAVA_NAN = np.uint64(0x7FF8000000000000)  # Double.doubleToLongBits of any NaN


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * _P2
    h = h ^ (h >> np.uint64(29))
    h = h * _P3
    return h ^ (h >> np.uint64(32))


def _hash_int(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    h = seed + _P5 + np.uint64(4)
    h = h ^ (values.astype(np.uint32).astype(np.uint64) * _P1)
    return _fmix(_rotl(h, 23) * _P2 + _P3)


def _hash_long(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    h = seed + _P5 + np.uint64(8)
    h = h ^ (_rotl(values.view(np.uint64) * _P2, 31) * _P1)
    return _fmix(_rotl(h, 27) * _P1 + _P4)


# Arrays are read through their buffers: pyarrow's to_numpy imports pandas (2 s cold), which
# a `state check` never needs otherwise.
def _bits(buffer, array: pa.Array) -> np.ndarray:
    """Return a bit-packed buffer of `array` (validity, booleans) as one uint8 per slot."""
    return np.unpackbits(np.frombuffer(buffer, np.uint8), bitorder="little")[
        array.offset:array.offset + len(array)]


def _values(array: pa.Array, dtype) -> np.ndarray:
    """Return a primitive array's value slots (a NULL's holds anything: row_hashes keeps the
    seed there)."""
    buffer = array.buffers()[1]
    if buffer is None or not len(array):
        return np.zeros(len(array), dtype)
    return np.frombuffer(buffer, dtype)[array.offset:array.offset + len(array)]


def _nulls(array: pa.Array) -> np.ndarray:
    """Return which slots of an array are NULL."""
    return _bits(array.buffers()[0], array) == 0


def _longs(array, seed):
    return _hash_long(_values(array, np.int64), seed)


def _ints(array, seed):
    return _hash_int(_values(array, np.int32), seed)


def _booleans(array, seed):
    ones = _bits(array.buffers()[1], array) if len(array) else np.zeros(0, np.uint8)
    return _hash_int(ones.astype(np.int32), seed)


def _doubles(array, seed):
    values = _values(array, np.float64) + 0.0  # -0.0 + 0.0 is 0.0
    bits = np.where(np.isnan(values), _JAVA_NAN, values.view(np.uint64))
    return _hash_long(bits.view(np.int64), seed)


def _words(data: np.ndarray, width: int) -> np.ndarray:
    """Return a view of `data` whose item i is the little-endian word of `width` bytes at
    byte i (unaligned: one gather reads a word wherever it starts)."""
    return np.ndarray((max(len(data) - width + 1, 0),), f"<u{width}", data, strides=(1,))


def _round(acc: np.ndarray, word: np.ndarray) -> np.ndarray:
    return _rotl(acc + word * _P2, 31) * _P1


def _stripes(words, starts, lengths, seed) -> np.ndarray:
    """Return XXH64's state after its 32-byte stripes, of values at least 32 bytes long."""
    n = lengths // 32
    order = np.argsort(-n, kind="stable")  # longest first: the rows a stripe k has are a prefix
    n, at = n[order], starts[order]
    v = [seed[order] + _P1 + _P2, seed[order] + _P2, seed[order].copy(), seed[order] - _P1]
    for k in range(int(n[0])):
        m = int(np.searchsorted(-n, -k, side="left"))  # rows with more than k stripes
        for lane in range(4):
            v[lane][:m] = _round(v[lane][:m], words[at[:m] + (32 * k + 8 * lane)])
    h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
    for acc in v:
        h = (h ^ _round(np.zeros_like(acc), acc)) * _P1 + _P4
    out = np.empty_like(h)
    out[order] = h
    return out


def _strings(array, seed):
    """Return XXH64 of each value's UTF-8 bytes, seeded per row (Spark's hashUnsafeBytes)."""
    offsets = np.frombuffer(array.buffers()[1], np.int64 if array.type == pa.large_string()
                            else np.int32)[array.offset:array.offset + len(array) + 1]
    data = array.buffers()[2]
    # Padded: a row's last step reads a word at any of its bytes (the rows past their end
    # keep their hash below, whatever the word).
    data = np.concatenate([np.frombuffer(data, np.uint8) if data is not None else
                           np.zeros(0, np.uint8), np.zeros(8, np.uint8)])
    starts, lengths = offsets[:-1].astype(np.int64), np.diff(offsets).astype(np.int64)
    h = seed + _P5
    long = np.nonzero(lengths >= 32)[0]
    if len(long):
        h[long] = _stripes(_words(data, 8), starts[long], lengths[long], seed[long])
    h = h + lengths.astype(np.uint64)
    at = starts + lengths // 32 * 32
    left = lengths % 32
    for width, steps in ((8, 3), (4, 1), (1, 3)):  # words, then a half word, then bytes
        words = _words(data, width)
        for _ in range(steps):
            more = left >= width
            if not more.any():
                break
            word = words[at].astype(np.uint64)
            if width == 8:
                new = _rotl(h ^ _round(np.zeros_like(word), word), 27) * _P1 + _P4
            elif width == 4:
                new = _rotl(h ^ (word * _P1), 23) * _P2 + _P3
            else:
                new = _rotl(h ^ (word * _P5), 11) * _P1
            h = np.where(more, new, h)
            at += width * more
            left -= width * more
    return _fmix(h)


# Rows hashed at once by checksum: a chunk's temporaries stay in the cache (3M rows of three
# int64 columns: 0.15 s in chunks of 64K rows, 0.45 s in chunks of 1M).
_CHUNK = 1 << 16
_HASHES = {pa.int64(): _longs, pa.int32(): _ints, pa.bool_(): _booleans,
           pa.float64(): _doubles, pa.string(): _strings, pa.large_string(): _strings}


def _hashable(table: pa.Table) -> bool:
    return all(t in _HASHES for t in table.schema.types)


def row_hashes(table: pa.Table, seed: np.ndarray | None = None) -> np.ndarray | None:
    """Return Spark's xxhash64 of each row as uint64 (`seed`: each row's hash over the
    columns before these), or None if a column's type is not one this module hashes."""
    if not _hashable(table):
        return None
    h = np.full(table.num_rows, SEED, np.uint64) if seed is None else seed
    with np.errstate(over="ignore"):
        for column in table.columns:
            array = column.combine_chunks()
            new = _HASHES[array.type](array, h)
            h = new if not array.null_count else np.where(_nulls(array), h, new)
    return h


def half_sums(h: np.ndarray) -> tuple[int, int]:
    """Return the sums of the low and of the high 32 bits of row hashes (integrity's)."""
    return (int((h & np.uint64(0xFFFFFFFF)).sum(dtype=np.uint64)),
            int((h >> np.uint64(32)).sum(dtype=np.uint64)))


def checksum(table: pa.Table) -> tuple[int, str] | None:
    """Return (rows, checksum) as integrity.scan computes them over the table's rows, or None
    where Spark must hash them."""
    sums = checksums(table, [table.num_columns])
    return None if sums is None else sums[0]


def checksums(table: pa.Table, widths: list[int]) -> list[tuple[int, str]] | None:
    """Return checksum() of the table's first w columns for each w in `widths`, in one pass
    (Spark's hash of a row's first w columns is the seed of its next column's), or None where
    Spark must hash them."""
    if not _hashable(table):
        return None
    totals = dict.fromkeys(widths, 0)
    for start in range(0, table.num_rows, _CHUNK):
        chunk, h, done = table.slice(start, _CHUNK), None, 0
        for w in sorted(totals):
            h, done = row_hashes(chunk.select(range(done, w)), h), w
            lo, hi = half_sums(h)
            totals[w] += (hi << 32) + lo
    return [(table.num_rows, f"{totals[w]:x}") for w in widths]
