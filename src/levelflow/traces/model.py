"""The in-memory job trace (`jobtrace/1`, ../shared/spec/jobtrace.md) on integer ids.

Constant: the graph G, durations, initial set, activations. Nothing here changes after load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from levelflow.tasks.graph import TaskGraph


@dataclass(frozen=True, slots=True)
class JobTrace:
    """A task DAG with costs, the initially activated tasks and who activates whom."""

    graph: TaskGraph
    durations: Sequence[float]
    initial: tuple[int, ...]
    # activations[v] = children v activates when it runs; None means "every task activates all
    # its children" (the field was absent). A task missing from the dict activates nothing.
    activations: dict[int, tuple[int, ...]] | None = None
    name: str = ""
    processors: int | None = None
    work: dict[int, float] = field(default_factory=dict)  # only tasks that gave `work`
    span: dict[int, float] = field(default_factory=dict)  # only tasks that gave `span`
    extra: dict[int, dict] = field(default_factory=dict)  # per-node keys kept for round trips

    def activated_by(self, v: int) -> Sequence[int]:
        """Return the children that task v activates when it runs."""
        if self.activations is None:
            return self.graph.children[v]
        return self.activations.get(v, ())

    def active_set(self) -> list[bool]:
        """Return W as a boolean mask: the closure of `initial` under activations."""
        active = [False] * len(self.graph)
        stack = list(self.initial)
        for v in stack:
            active[v] = True
        while stack:
            for c in self.activated_by(stack.pop()):
                if not active[c]:
                    active[c] = True
                    stack.append(c)
        return active
