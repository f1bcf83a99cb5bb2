"""Every node's ancestors as a merged list of post-order intervals (Agrawal, Borgida & Jagadish
1989; Nuutila 1995).

Constant after construction: post[v], a post-order number from an iterative DFS over parents (the
reversed graph), node_of[p] its inverse, and spans[v] = (a0, b0, a1, b1, ...) sorted, disjoint,
non-adjacent closed intervals of post numbers whose union is {v} and all of v's ancestors.

Why it works: a DFS subtree of the reversed graph has contiguous post numbers [low(v), post(v)];
v's ancestors are its subtree plus the ancestors of each parent, so merging the parents' lists
(computed first, in topological order) with v's own tree interval gives v's list.
"""

from __future__ import annotations

from levelflow.tasks.graph import TaskGraph

BYTES_PER_INTERVAL = 16  # two 8-byte ends, as a compact C implementation would store them


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


def merge(pieces: list[tuple[int, int]]) -> tuple[int, ...]:
    """Return the flat (a0, b0, a1, b1, ...) union of closed intervals, adjacent ones joined."""
    pieces.sort()
    out: list[int] = []
    a, b = pieces[0]
    for x, y in pieces:
        if x <= b + 1:
            if y > b:
                b = y
        else:
            out.append(a)
            out.append(b)
            a, b = x, y
    out.append(a)
    out.append(b)
    return tuple(out)


def ancestor_spans(graph: TaskGraph) -> tuple[list[int], list[int], list[tuple[int, ...]]]:
    """Return (post, node_of, spans): post numbers, their inverse, and each node's intervals."""
    post, low = post_order(graph)
    n = len(graph)
    node_of = [0] * n
    for v in range(n):
        node_of[post[v]] = v
    parents = graph.parents
    spans: list[tuple[int, ...]] = [()] * n
    for v in graph.order:
        ps = parents[v]
        own = (low[v], post[v])
        if not ps:
            spans[v] = own
            continue
        if len(ps) == 1:
            # Common case: one parent; if it lies in v's own tree interval, nothing to merge.
            sp = spans[ps[0]]
            if len(sp) == 2 and low[v] <= sp[0] and sp[1] <= post[v]:
                spans[v] = own
                continue
        pieces = [own]
        for p in ps:
            sp = spans[p]
            pieces.extend(zip(sp[::2], sp[1::2], strict=True))
        spans[v] = merge(pieces)
    return post, node_of, spans
