"""A Gantt chart of a schedule: one row per busy processor, a utilization strip above it.

Bars narrower than a pixel are drawn without edges (edges alone would paint a busy processor
white); bars too many to draw merge when they would share a pixel; tasks are named when few.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from levelflow.text import for_matplotlib

Row = tuple[int, int, float, float]

MAX_BARS = 40_000
RESOLUTION = 2_000  # bars closer than makespan / RESOLUTION merge: they would share a pixel
PLOT_PIXELS = 1_000  # about the width of the time axis in pixels (12 in at 100 dpi)
LABEL_TASKS = 30  # name the tasks in their bars up to this many


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


def utilization(rows: Sequence[Row], processors: int) -> tuple[list[float], list[float]]:
    """Return (times, fraction of processors busy from each time on), a step function."""
    events = sorted([(s, 1) for _, _, s, _ in rows] + [(e, -1) for _, _, _, e in rows])
    times, busy, n = [0.0], [0.0], 0
    for t, d in events:
        n += d
        if times[-1] == t:
            busy[-1] = n / processors
        else:
            times.append(t)
            busy.append(n / processors)
    return times, busy


def _bars(rows: Sequence[Row], max_bars: int) -> tuple[dict[int, list], bool]:
    """Return per busy processor its bars, exact (one per task) or merged, and whether exact."""
    exact = len(rows) <= max_bars
    if exact:
        per_proc: dict[int, list[tuple[float, float]]] = {}
        for _, p, s, e in rows:
            per_proc.setdefault(p, []).append((s, e - s))
        return per_proc, True
    busy = max((p for _, p, _, _ in rows), default=-1) + 1
    return {p: b for p, b in enumerate(merge_bars(rows, busy)) if b}, False


def _draw_rows(ax, per_proc: dict[int, list], shown: list[int], pixel: float, exact: bool
               ) -> None:
    """Draw one row of bars per shown processor; only bars wider than 2 pixels get an edge."""
    for y, p in enumerate(shown):
        bars = per_proc[p]
        widths = [0.5 if exact and w >= 2 * pixel else 0.0 for _, w in bars]
        ax.broken_barh(bars, (y - 0.4, 0.8), facecolors="tab:blue", edgecolor="white",
                       linewidths=widths)
    if len(shown) <= 40:  # processor ids as labels: rows are only the busy ones
        ax.set_yticks(range(len(shown)), [str(p) for p in shown])


def plot_gantt(rows: Sequence[Row], processors: int, path: str | Path, title: str = "",
               max_bars: int = MAX_BARS, names: Sequence[str] | None = None) -> int:
    """Write a PNG Gantt chart of the schedule to `path`; return the number of bars drawn.

    Only busy processors get a row; `names` (by task id) label the bars when tasks are few.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_proc, exact = _bars(rows, max_bars)
    # Past the cap even after merging, draw the first busy processors only and say so.
    shown, drawn = [], 0
    for p in sorted(per_proc):
        if drawn + len(per_proc[p]) > max_bars and shown:
            break
        shown.append(p)
        drawn += len(per_proc[p])
    makespan = max((r[3] for r in rows), default=0.0)
    height = min(0.25 * len(shown) + 2.5, 40.0)
    fig, (top, ax) = plt.subplots(2, 1, figsize=(12, height), sharex=True,
                                  gridspec_kw={"height_ratios": [1, max(len(shown), 3)]})
    times, busy = utilization(rows, processors)
    top.fill_between(times, busy, step="post", color="tab:green", linewidth=0)
    top.set_ylim(0, 1)
    top.set_ylabel("busy", fontsize=8)
    _draw_rows(ax, per_proc, shown, (makespan or 1.0) / PLOT_PIXELS, exact)
    if names is not None and len(rows) <= LABEL_TASKS:
        row_of = {p: y for y, p in enumerate(shown)}
        for task, p, s, e in rows:
            if p in row_of:
                ax.text((s + e) / 2, row_of[p], for_matplotlib(names[task]), ha="center",
                        va="center", fontsize=7, color="white", clip_on=True)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("processor")
    ax.set_ylim(-0.5, max(len(shown), 1) - 0.5)
    ax.invert_yaxis()
    notes = [] if exact else [f"{len(rows)} tasks merged into {drawn} bars"]
    if len(per_proc) < processors:
        notes.append(f"{processors - len(per_proc)} of {processors} processors idle, not drawn")
    if len(shown) < len(per_proc):
        notes.append(f"first {len(shown)} of {len(per_proc)} busy processors")
    top.set_title(for_matplotlib(title) + (f" ({'; '.join(notes)})" if notes else ""),
                  fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return drawn
