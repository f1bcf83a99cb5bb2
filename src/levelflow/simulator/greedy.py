"""The exact-readiness reference: greedy list scheduling that knows readiness for free.

Constant: the trace, P. Changes: the clock, the FIFO of ready tasks, each node's count of parents
that have not yet signalled. A node signals its children once its W-ancestors have all finished: a
task in W when it finishes, a node outside W as soon as all its parents signalled. A task in W is
ready exactly when all its parents signalled, i.e. when every W-ancestor in G has finished.
No scheduler, no overhead: the makespan a perfect scheduler gets with the same FIFO greed.
"""

from __future__ import annotations

import heapq
from collections import deque

from levelflow.traces.model import JobTrace


def greedy_schedule(trace: JobTrace, processors: int) -> list[tuple[int, int, float, float]]:
    """Return the exact-readiness greedy schedule as rows (task, processor, start, end)."""
    graph = trace.graph
    children = graph.children
    dur = trace.durations
    active = trace.active_set()
    waiting = [len(ps) for ps in graph.parents]
    ready: deque[int] = deque()
    rows: list[tuple[int, int, float, float]] = []

    def signal(sources: list[int]) -> None:
        # Nodes outside W pass the signal on at once; tasks in W become ready.
        stack = sources
        while stack:
            u = stack.pop()
            for c in children[u]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    if active[c]:
                        ready.append(c)
                    else:
                        stack.append(c)

    for v in graph.sources:
        if active[v]:
            ready.append(v)
        else:
            signal([v])
    free = list(range(processors - 1, -1, -1))
    heap: list[tuple[float, int, int, int]] = []
    now = 0.0
    seq = 0
    while ready or heap:
        while ready and free:
            v = ready.popleft()
            p = free.pop()
            rows.append((v, p, now, now + dur[v]))
            heapq.heappush(heap, (now + dur[v], seq, v, p))
            seq += 1
        now = heap[0][0]
        while heap and heap[0][0] <= now:
            _, _, v, p = heapq.heappop(heap)
            free.append(p)
            signal([v])
    return rows


def greedy_makespan(trace: JobTrace, processors: int) -> float:
    """Return the makespan of exact-readiness greedy list scheduling on P processors."""
    rows = greedy_schedule(trace, processors)
    return max((end for _, _, _, end in rows), default=0.0)
