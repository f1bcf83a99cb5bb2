"""Lower bounds on any valid schedule of a trace: total work over P, and the longest chain.

Constant: the trace. Computed in one topological pass over G, O(V + E).
"""

from __future__ import annotations

from levelflow.traces.model import JobTrace

MODELS = ("serial", "parallel")


def task_times(trace: JobTrace, processors: int, model: str) -> tuple[list[float], list[float]]:
    """Return (work, shortest possible running time) per task id under the given model."""
    dur = trace.durations
    if model == "serial":
        d = list(dur)
        return d, d
    work = list(dur)
    for v, w in trace.work.items():
        work[v] = w
    fastest = [w / processors for w in work]
    for v, s in trace.span.items():
        if s > fastest[v]:
            fastest[v] = s
    return work, fastest


def lower_bound(trace: JobTrace, processors: int, model: str = "serial",
                active: list[bool] | None = None) -> tuple[float, float, float]:
    """Return (work, span, max(work / P, span)) of the activated set W under the model."""
    if active is None:
        active = trace.active_set()
    work, fastest = task_times(trace, processors, model)
    parents = trace.graph.parents
    # reach[v]: the latest finish, on unlimited processors, of v and its W-ancestors in G:
    # the start rule waits for every W-ancestor, even through tasks that never run.
    reach = [0.0] * len(active)
    total = 0.0
    for v in trace.graph.order:
        r = 0.0
        for p in parents[v]:
            if reach[p] > r:
                r = reach[p]
        if active[v]:
            r += fastest[v]
            total += work[v]
        reach[v] = r
    span = max(reach, default=0.0)
    return total, span, max(total / processors, span)
