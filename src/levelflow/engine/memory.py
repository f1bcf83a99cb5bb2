"""How many input rows the driver's machine holds: auto's limit for the driver plan on the
embedded local master (plans/driver.py). No heavy import: the CLI asks before Spark starts."""

from __future__ import annotations

import os

# Auto runs a task in the driver up to this many input rows (its lower relations' tuples and
# fact lines) where the driver is not where the executors are (a session on a cluster master).
# Evaluating a few thousand rows costs the driver less than a Spark job's floor;
# docs/performance.md ("The driver plan") has what was measured.
DRIVER_ROWS = 50_000
# On the embedded local master the executors' Python workers run on the driver's machine, in
# its memory: shipping a task's inputs to one of them is pure cost (a 3M-edge reachability:
# 6.3 s in the driver, 65 s under the local plan of which 34 s shipping). There auto runs a
# task in the driver while its inputs fit half the memory available, at this many bytes a row
# (measured: 3M-edge reachability and closure peak at 820 MB, about 210 B an input row over
# the process's own 200 MB; the rest is room for what the rules derive). The same evaluator in
# an executor's Python worker: planner.worker_rows, past which auto distributes on a cluster.
BYTES_PER_ROW = 512
# What evaluating a task holds in memory per input row at the least, wherever it runs
# (measured: the driver plan over 1M and 3M edge rows of a recursive task that derives nothing
# peaks 152-182 B a row above the process's own): a plan with less memory for a task's inputs
# cannot run it (plans/room.py).
LEAST_BYTES_PER_ROW = 150
# `driver_rows` of the entry points: by the session's master (plans/driver.rows_on).
BY_MASTER = -1
# A file's rows, at most, from its size where its lines cannot be sampled (gzip, Parquet):
# "1\t2\n" is 4 bytes.
BYTES_PER_LINE = 4


def memory_rows(available: int | None = None) -> int:
    """Return the input rows up to which auto runs a task in the driver on a local master:
    half of `available` bytes (default: the memory available now) at BYTES_PER_ROW, at least
    DRIVER_ROWS."""
    if available is None:
        available = available_memory()
    return max(DRIVER_ROWS, available // 2 // BYTES_PER_ROW)


def held_up_to(floor: int, driver_rows: int | None) -> int:
    """Return the rows the driver keeps of something: `floor`, or the session's driver rows
    (None: none) where more, since the driver holds those rows anyway."""
    return max(floor, driver_rows or 0)


def estimated_lines(path, sample: int = 1 << 16) -> int:
    """Return a fact file's lines estimated from its size and its first `sample` bytes' lines
    (at least BYTES_PER_LINE bytes a line); a gzipped or Parquet file at that floor."""
    size = os.path.getsize(path)
    if str(path).endswith(".parquet"):
        return size // BYTES_PER_LINE
    try:
        with open(path, "rb") as f:
            head = f.read(sample)
    except OSError:
        return size // BYTES_PER_LINE
    lines = head.count(b"\n")
    if head[:2] == b"\x1f\x8b" or not lines:
        return size // BYTES_PER_LINE
    return size * lines // len(head) if size > len(head) else lines


def available_memory() -> int:
    """Return the bytes of memory available to a new allocation (Linux's MemAvailable, else
    the machine's physical memory)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return DRIVER_ROWS * BYTES_PER_ROW * 2
