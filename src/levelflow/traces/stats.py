"""Summary figures of a job trace: its shape, the activated set W, work, span and a lower bound.

The span follows the start rule of jobtrace/1: a task in W waits for every task in W that is its
ancestor in G, so finish[v] = duration[v] + max(finish[a] for a in W, a an ancestor of v in G).
"""

from __future__ import annotations

from levelflow.traces.model import JobTrace

DEFAULT_PROCESSORS = 8


def active_span(trace: JobTrace, active: list[bool] | None = None) -> float:
    """Return the span of W: the latest finish time on unlimited processors under the start rule."""
    g = trace.graph
    if active is None:
        active = trace.active_set()
    dur = trace.durations
    children = g.children
    # wait[v] = latest finish among v's W-ancestors in G, pushed down in topological order.
    wait = [0.0] * len(g)
    span = 0.0
    for v in g.order:
        t = wait[v]
        if active[v]:
            t += dur[v]
            if t > span:
                span = t
        for c in children[v]:
            if wait[c] < t:
                wait[c] = t
    return span


def trace_stats(trace: JobTrace, processors: int | None = None) -> dict:
    """Return a dict of figures: nodes, edges, levels, initial, active, work, span, lower_bound."""
    g = trace.graph
    n = len(g)
    p = processors or trace.processors or DEFAULT_PROCESSORS
    active = trace.active_set()
    dur = trace.durations
    w_ids = [v for v in range(n) if active[v]]
    work = float(sum(dur[v] for v in w_ids))
    span = active_span(trace, active)
    level = g.level
    children = g.children
    return {
        "name": trace.name,
        "nodes": n,
        "edges": g.num_edges,
        "levels": g.num_levels,
        "sources": sum(1 for ps in g.parents if not ps),
        "sinks": sum(1 for cs in children if not cs),
        "max_level_width": max((len(b) for b in g.by_level), default=0),
        "initial": len(trace.initial),
        "active": len(w_ids),
        "active_edges": sum(1 for u in w_ids for c in children[u] if active[c]),
        "active_levels": len({level[v] for v in w_ids}),
        "all_children_activated": trace.activations is None,
        "work": work,
        "span": span,
        "max_duration": max((float(dur[v]) for v in w_ids), default=0.0),
        "processors": p,
        "lower_bound": max(work / p, span),
    }
