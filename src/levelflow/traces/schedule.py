"""The `schedule/1` CSV (task,processor,start,end) and the jobtrace/1 validity rule for schedules.

A schedule is valid when its tasks are exactly W, each once; every task starts no earlier than
the end of each task in W that is its ancestor in G (not only in the active graph H); and, in the
serial model, no processor runs two tasks at once. Times are compared with tolerance TOL.
"""

from __future__ import annotations

import csv
import io
import operator
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from levelflow.errors import LevelflowError
from levelflow.traces.jobtrace import utf8_bytes
from levelflow.traces.model import JobTrace

HEADER = ("task", "processor", "start", "end")
TOL = 1e-9

Row = tuple  # (task: int | str, processor: int, start: float, end: float)


class ScheduleError(LevelflowError):
    """A schedule CSV that cannot be read (one line naming the file and line)."""


def write_schedule(rows: Iterable[Sequence], trace: JobTrace,
                   path: str | os.PathLike) -> None:
    """Write rows (task id, processor, start, end) as a schedule/1 CSV with task names."""
    names = trace.graph.names
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(HEADER)
    for task, proc, start, end in rows:
        out.writerow((names[task] if not isinstance(task, str) else task, int(proc),
                      repr(float(start)), repr(float(end))))
    raw = utf8_bytes(buf.getvalue(), str(path), ScheduleError)  # first: a bad name writes nothing
    try:
        Path(path).write_bytes(raw)
    except OSError as e:
        raise ScheduleError(f"{path}: cannot write: {e.strerror or e}") from None


def read_schedule(path: str | os.PathLike, trace: JobTrace | None = None) -> list[Row]:
    """Return the rows of a schedule/1 CSV: task names, or task ids when a trace is given."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScheduleError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ScheduleError(f"{source}: cannot read: {e}") from None
    index = trace.graph.index() if trace is not None else None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(h.strip() for h in header) != HEADER:
        raise ScheduleError(f"{source}: line 1: expected the header {','.join(HEADER)}, got "
                            f"{','.join(header or ())!r}")
    rows: list[Row] = []
    for fields in reader:
        line = reader.line_num
        if not fields:
            continue
        if len(fields) != 4:
            raise ScheduleError(f"{source}: line {line}: expected 4 fields "
                                f"(task,processor,start,end), got {len(fields)}")
        task = fields[0]  # ids are compared exactly: " a" is not "a"
        proc, start, end = (f.strip() for f in fields[1:])
        try:
            p = int(proc)
        except ValueError:
            raise ScheduleError(f"{source}: line {line}: processor {proc!r} is not an integer") \
                from None
        try:
            s, e = float(start), float(end)
        except ValueError:
            raise ScheduleError(f"{source}: line {line}: start/end {start!r}, {end!r} are not "
                                f"numbers") from None
        if index is not None:
            if task not in index:
                raise ScheduleError(f"{source}: line {line}: unknown task {task!r}")
            task = index[task]
        rows.append((task, p, s, e))
    return rows


def check_schedule(trace: JobTrace, rows: Iterable[Sequence], serial: bool = True) -> list[str]:
    """Return the violations of the validity rule by a schedule (empty when it is valid).

    Rows are (task, processor, start, end); task is an id, or a name from `read_schedule`.
    """
    problems: list[str] = []
    ran, start, end, by_proc = _read_rows(trace.graph, rows, problems)
    _check_order(trace, ran, start, end, problems)
    if serial:
        _check_overlaps(trace.graph.names, by_proc, problems)
    return problems


def _task_id(g, task, index: dict | None) -> tuple[int, dict | None]:
    """Return (task's id or -1, the name index, built on the first name seen)."""
    if isinstance(task, str):
        if index is None:
            index = g.index()
        return index.get(task, -1), index
    try:
        v = operator.index(task)
    except TypeError:
        return -1, index
    return (v if 0 <= v < len(g) else -1), index


def _read_rows(g, rows: Iterable[Sequence], problems: list[str]):
    """Return (ran, start, end per task id, rows per processor), noting bad rows in problems."""
    names = g.names
    n = len(g)
    index = None
    start = [0.0] * n
    end = [0.0] * n
    ran = [False] * n
    by_proc: dict[int, list[tuple[float, float, int]]] = {}
    for k, row in enumerate(rows):
        task, proc, s, e = row
        v, index = _task_id(g, task, index)
        if v < 0:
            problems.append(f"row {k}: unknown task {task!r}")
            continue
        s, e = float(s), float(e)
        if ran[v]:
            problems.append(f"task {names[v]!r} runs twice")
            continue
        if not (e >= s - TOL):
            problems.append(f"task {names[v]!r} ends at {e!r} before it starts at {s!r}")
        if s < -TOL:
            problems.append(f"task {names[v]!r} starts at {s!r}, before the run starts")
        ran[v], start[v], end[v] = True, s, e
        by_proc.setdefault(int(proc), []).append((s, e, v))
    return ran, start, end, by_proc


def _check_order(trace: JobTrace, ran, start, end, problems: list[str]) -> None:
    """Note tasks run but not activated (or the reverse) and tasks started before an ancestor."""
    g = trace.graph
    names = g.names
    n = len(g)
    active = trace.active_set()
    for v in range(n):
        if active[v] and not ran[v]:
            problems.append(f"task {names[v]!r} is activated but never runs")
        elif ran[v] and not active[v]:
            problems.append(f"task {names[v]!r} runs but is not activated")
    # wait[v] / blocker[v]: latest end among v's ancestors in G that are in W and ran, and which
    # one it is; pushed down in topological order, so this is O(V + E).
    wait = [-float("inf")] * n
    blocker = [-1] * n
    children = g.children
    for v in g.order:
        if ran[v] and active[v] and start[v] < wait[v] - TOL:
            b = blocker[v]
            problems.append(f"task {names[v]!r} starts at {start[v]!r} before its ancestor "
                            f"{names[b]!r} ends at {end[b]!r}")
        t, who = wait[v], blocker[v]
        if ran[v] and active[v] and end[v] > t:
            t, who = end[v], v
        for c in children[v]:
            if wait[c] < t:
                wait[c], blocker[c] = t, who


def _check_overlaps(names, by_proc: dict, problems: list[str]) -> None:
    """Note two tasks on one processor at once (the serial model)."""
    for proc in sorted(by_proc):
        last_end, last = -float("inf"), -1
        for s, e, v in sorted(by_proc[proc]):
            if s < last_end - TOL:
                problems.append(f"processor {proc} runs {names[last]!r} (until {last_end!r}) "
                                f"and {names[v]!r} (from {s!r}) at once")
            if e > last_end:
                last_end, last = e, v
