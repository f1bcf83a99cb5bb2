"""The precedence graph of a program's relations and its strongly connected components.

SCCs are found on integer ids by an iterative Tarjan, so deep chains are safe. The graph is built
once from the rules (`rule_graph.precedence`), by the checker (stratification), and kept on the
Program for `build_tasks`. Nothing here imports the AST, which names `Precedence`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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


@dataclass(frozen=True, slots=True)
class Precedence:
    """The relations' precedence graph (body relation -> head relation) and its SCCs."""

    ids: dict[str, int]  # relation -> id, in declaration order
    succ: list[list[int]]  # per relation id: the heads of rules reading it, sorted
    comps: list[list[int]]  # SCCs of relation ids, each after every SCC it reaches
    comp_of: list[int]  # relation id -> index into comps

    def recursive(self, comp: int) -> bool:
        """Return whether an SCC is recursive: several relations, or one that reads itself."""
        members = self.comps[comp]
        return len(members) > 1 or members[0] in self.succ[members[0]]
