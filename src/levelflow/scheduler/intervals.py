"""Every node's ancestors as a merged list of post-order intervals (Agrawal, Borgida & Jagadish
1989; Nuutila 1995).

Constant after construction: post[v], a post-order number from an iterative DFS over parents (the
reversed graph), node_of[p] its inverse, and spans[v] = array('i', [a0, b0, a1, b1, ...]) sorted,
disjoint, non-adjacent closed intervals of post numbers whose union is {v} and all of v's
ancestors. Post numbers are a topological order: every ancestor is numbered below its descendants.

Why it works: a DFS subtree of the reversed graph has contiguous post numbers [low(v), post(v)];
v's ancestors are its subtree plus the ancestors of each parent, so merging the parents' lists
(computed first, in topological order) with v's own tree interval gives v's list. The lists are
4-byte arrays, not tuples: on a 200k-node trace they hold 65M intervals, and a tuple's 8-byte
pointers would double their size.
"""

from __future__ import annotations

from array import array

from levelflow.tasks.graph import TaskGraph

BYTES_PER_INTERVAL = 16  # two 8-byte ends, as a compact C implementation would store them


class TooManyIntervals(Exception):
    """The interval lists passed the cap given to ancestor_spans; `count` is how many were built."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} intervals built before the cap was passed")
        self.count = count


def post_order(graph: TaskGraph) -> tuple[list[int], list[int]]:
    """Return (post, low): post-order numbers of a DFS over parents, and each subtree's lowest."""
    n = len(graph)
    parents = graph.parents
    post = [-1] * n
    low = [0] * n
    seen = bytearray(n)
    counter = 0
    # Roots are tried sinks first (reverse topological order), so trees are as big as possible.
    for root in reversed(graph.order):
        if seen[root]:
            continue
        seen[root] = 1
        low[root] = counter
        nodes = [root]
        pos = [0]
        while nodes:
            v = nodes[-1]
            ps = parents[v]
            i = pos[-1]
            while i < len(ps) and seen[ps[i]]:
                i += 1
            if i < len(ps):
                pos[-1] = i + 1
                u = ps[i]
                seen[u] = 1
                low[u] = counter
                nodes.append(u)
                pos.append(0)
            else:
                nodes.pop()
                pos.pop()
                post[v] = counter
                counter += 1
    return post, low


def union(starts: list[int], ends: list[int]) -> list[int]:
    """Return the flat [a0, b0, a1, ...] union of the closed intervals whose ends these are.

    Sorts both lists in place. Sorting the starts and the ends apart (plain ints sort much faster
    than pairs) is enough: the i+1 lowest ends all come before the next start exactly where the
    union has a gap, since that many intervals have started and that many have ended there.
    """
    starts.sort()
    ends.sort()
    out = [starts[0]]
    for e, s in zip(ends[:-1], starts[1:], strict=True):  # the last end closes the last one
        if e + 1 < s:  # a gap, not just two adjacent intervals
            out.append(e)
            out.append(s)
    out.append(ends[-1])
    return out


def merge(pieces: list[tuple[int, int]]) -> tuple[int, ...]:
    """Return the flat (a0, b0, a1, b1, ...) union of closed intervals, adjacent ones joined."""
    return tuple(union([a for a, _ in pieces], [b for _, b in pieces]))


def ancestor_spans(graph: TaskGraph, max_intervals: int | None = None,
                   ) -> tuple[list[int], list[int], list[array]]:
    """Return (post, node_of, spans): post numbers, their inverse, and each node's intervals.

    With `max_intervals`, raise TooManyIntervals as soon as the lists built so far hold more
    than that many, so that no more than the cap plus one node's list is ever held.
    """
    post, low = post_order(graph)
    n = len(graph)
    node_of = [0] * n
    for v in range(n):
        node_of[post[v]] = v
    parents = graph.parents
    spans: list[array] = [array("i")] * n
    # Counted in list ends (two per interval) so the loop adds a len() and nothing else.
    cap = 2 * max_intervals if max_intervals is not None else float("inf")
    held = 0
    for v in graph.order:
        ps = parents[v]
        lo, hi = low[v], post[v]
        # Common case: one parent whose one interval lies in v's own tree interval: no merge.
        if not ps or (len(ps) == 1 and len(spans[ps[0]]) == 2
                      and lo <= spans[ps[0]][0] and spans[ps[0]][1] <= hi):
            sp = array("i", (lo, hi))
        else:
            starts = [lo]
            stops = [hi]
            for p in ps:
                psp = spans[p]
                starts += psp[::2]
                stops += psp[1::2]
            sp = array("i", union(starts, stops))
        spans[v] = sp
        held += len(sp)
        if held > cap:
            spans.clear()  # drop them before anyone can keep a reference
            raise TooManyIntervals(held // 2)
    return post, node_of, spans
