"""Strongly connected components on integer ids (iterative Tarjan, so deep chains are safe)."""

from __future__ import annotations

from collections.abc import Sequence


def strongly_connected(n: int, succ: Sequence[Sequence[int]]) -> list[list[int]]:
    """Return the SCCs of nodes 0..n-1, each emitted after every SCC it can reach."""
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    comps: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        # Each frame is (node, position of the next successor to visit).
        work = [(root, 0)]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            v, k = work[-1]
            out = succ[v]
            if k < len(out):
                work[-1] = (v, k + 1)
                w = out[k]
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = True
                    work.append((w, 0))
                elif on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp: list[int] = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps
