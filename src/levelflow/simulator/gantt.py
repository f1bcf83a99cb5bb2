"""A Gantt chart of a schedule: one row per processor, one bar per task (merged when tiny)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

Row = tuple[int, int, float, float]

MAX_BARS = 40_000
RESOLUTION = 2_000  # bars closer than makespan / RESOLUTION merge: they would share a pixel


def merge_bars(rows: Sequence[Row], processors: int,
               resolution: int = RESOLUTION) -> list[list[tuple[float, float]]]:
    """Return per processor the busy intervals (start, width), merging gaps below the resolution."""
    makespan = max((r[3] for r in rows), default=0.0)
    gap = makespan / resolution if makespan > 0 else 0.0
    per_proc: list[list[tuple[float, float]]] = [[] for _ in range(processors)]
    for _, p, s, e in sorted(rows, key=lambda r: (r[1], r[2])):
        bars = per_proc[p]
        if bars and s - (bars[-1][0] + bars[-1][1]) <= gap:
            b0 = bars[-1][0]
            bars[-1] = (b0, max(e, b0 + bars[-1][1]) - b0)
        else:
            bars.append((s, e - s))
    return per_proc


def plot_gantt(rows: Sequence[Row], processors: int, path: str | Path, title: str = "",
               max_bars: int = MAX_BARS) -> int:
    """Write a PNG Gantt chart of the schedule to `path`; return the number of bars drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exact = len(rows) <= max_bars
    if exact:
        per_proc: list[list[tuple[float, float]]] = [[] for _ in range(processors)]
        for _, p, s, e in rows:
            per_proc[p].append((s, e - s))
    else:
        per_proc = merge_bars(rows, processors)
    # Past the cap even after merging, draw the first processors only and say so.
    shown, drawn = 0, 0
    for bars in per_proc:
        if drawn + len(bars) > max_bars and shown:
            break
        shown += 1
        drawn += len(bars)
    height = min(0.25 * shown + 1.5, 40.0)
    fig, ax = plt.subplots(figsize=(12, height))
    for p in range(shown):
        # Exact bars get a thin white edge so back-to-back tasks stay apart.
        ax.broken_barh(per_proc[p], (p - 0.4, 0.8), facecolors="tab:blue",
                       edgecolor="white" if exact else "none", linewidth=0.5)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("processor")
    ax.set_ylim(-0.5, max(shown, 1) - 0.5)
    ax.invert_yaxis()
    notes = []
    if not exact:
        notes.append(f"{len(rows)} tasks merged into {drawn} bars")
    if shown < processors:
        notes.append(f"first {shown} of {processors} processors")
    ax.set_title(title + (f" ({'; '.join(notes)})" if notes else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return drawn
