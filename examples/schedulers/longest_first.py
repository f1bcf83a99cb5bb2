"""A custom heuristic: LevelBased, but the longest ready task of the current level runs first."""

import heapq

from levelflow.scheduler import LevelBased, register


@register("longest-first")
class LongestFirst(LevelBased):
    """LevelBased order between levels; within a level, longest estimated duration first."""

    def admit(self, ready, new):
        """Add newly ready tasks to the level's ready heap, keyed by minus their cost."""
        costs = self.costs or [0.0] * len(self.graph)
        for v in new:
            heapq.heappush(ready, (-costs[v], v))

    def pick(self, ready, k):
        """Return up to k tasks, longest first."""
        return [heapq.heappop(ready)[1] for _ in range(min(k, len(ready)))]
