"""A command's wall time and its parts (Spark start, tasks, outputs, state), for its summary line.

Constant: the start time. Changes: seconds per named part, added as each part ends.
"""

from __future__ import annotations

import time
from contextlib import contextmanager


class WallClock:
    """Wall time since the command started, split into the parts it was spent on."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.parts: dict[str, float] = {}

    @contextmanager
    def part(self, name: str):
        """Time the block as part `name` (added to what it already holds)."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t)

    def add(self, name: str, seconds: float) -> None:
        """Count `seconds` more for part `name`."""
        self.parts[name] = self.parts.get(name, 0.0) + max(seconds, 0.0)

    def line(self, ran: int, total: int) -> str:
        """Return 'ran k of N tasks in W s (part s, ..., other s)', W the wall time so far."""
        wall = time.perf_counter() - self.t0
        other = wall - sum(self.parts.values())
        parts = [f"{name} {s:.2f} s" for name, s in self.parts.items()]
        if other >= 0.005:  # reading the program, checks, what no part names
            parts.append(f"other {other:.2f} s")
        return f"ran {ran} of {total} tasks in {wall:.2f} s ({', '.join(parts)})"
