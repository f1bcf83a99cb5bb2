"""Random layered job traces with an exact shape: N nodes, E edges, L levels, I initial tasks.

Node ids are sorted by level: level l holds ids starts[l] .. starts[l+1]-1. Every node above level
0 gets one parent drawn from the level just below it (so its longest-path level is exactly its
layer); the remaining edges go from any lower level to a higher one, without duplicates.
Each task activates each of its children independently with probability p, decided up front.
"""

from __future__ import annotations

import math

import numpy as np

from levelflow.tasks.graph import TaskGraph
from levelflow.traces.jobtrace import TraceError, paused_gc
from levelflow.traces.model import JobTrace

MEDIAN_SECONDS = 1.0
MEDIAN_TINY = 5e-6
SIGMA = 1.0
# Above this share of the free (u, v) pairs, rejection sampling would stall: enumerate instead.
_DENSE_SHARE = 0.25


def _max_pairs(sizes: np.ndarray) -> int:
    """Return how many edges fit between layers of these sizes (u in a lower layer than v)."""
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    return int(np.dot(sizes.astype(object), starts.astype(object)))


def _balanced(nodes: int, levels: int, first: int) -> np.ndarray:
    """Return layer sizes as equal as possible with at least `first` nodes on layer 0."""
    q, r = divmod(nodes, levels)
    sizes = np.array([q + 1] * r + [q] * (levels - r), dtype=np.int64)
    if sizes[0] < first:
        q, r = divmod(nodes - first, levels - 1)
        sizes = np.array([first] + [q + 1] * r + [q] * (levels - 1 - r), dtype=np.int64)
    return sizes


def _layer_sizes(nodes: int, edges: int, levels: int, rng: np.random.Generator) -> np.ndarray:
    """Return random layer sizes (each >= 1) that can hold exactly `edges` edges."""
    # Every node above layer 0 needs a parent edge, so layer 0 holds at least nodes - edges.
    first = max(1, nodes - edges)
    if first > nodes - (levels - 1):
        raise TraceError(f"gen: {edges} edges are too few for {levels} levels: every node "
                         f"above level 0 needs a parent (need at least {levels - 1})")
    free = nodes - first - (levels - 1)
    weights = rng.dirichlet(np.full(levels, 2.0))
    sizes = np.ones(levels, dtype=np.int64) + rng.multinomial(free, weights)
    sizes[0] += first - 1
    if _max_pairs(sizes) >= edges:
        return sizes
    sizes = _balanced(nodes, levels, first)
    most = _max_pairs(sizes)
    if most < edges:
        raise TraceError(f"gen: {edges} edges are too many for {nodes} nodes in {levels} levels "
                         f"(at most {most})")
    return sizes


def _extra_edges(count: int, taken: np.ndarray, sizes: np.ndarray, starts: np.ndarray,
                 level_of: np.ndarray, nodes: int, rng: np.random.Generator) -> np.ndarray:
    """Return `count` new edge keys u*nodes+v with level(u) < level(v), none in `taken`."""
    if count == 0:
        return np.empty(0, dtype=np.int64)
    free = _max_pairs(sizes) - len(taken)
    if count > _DENSE_SHARE * free:
        # Dense: list every forward pair once and draw without replacement.
        vs = np.arange(sizes[0], nodes, dtype=np.int64)
        below = starts[level_of[vs]]
        v_all = np.repeat(vs, below)
        offsets = np.arange(len(v_all), dtype=np.int64) - np.repeat(np.cumsum(below) - below,
                                                                    below)
        keys = offsets * nodes + v_all
        keys = keys[~np.isin(keys, taken)]
        return rng.choice(keys, size=count, replace=False)
    chosen = np.empty(0, dtype=np.int64)
    uniform_v = True
    while len(chosen) < count:
        need = count - len(chosen)
        k = need + need // 8 + 64
        if uniform_v:
            v = rng.integers(sizes[0], nodes, size=k)
        else:
            # Pair-uniform: weight v by its number of possible parents (never saturates).
            v = rng.choice(np.arange(sizes[0], nodes), size=k,
                           p=starts[level_of[sizes[0]:]] / _max_pairs(sizes))
        u = rng.integers(0, starts[level_of[v]])
        keys = u * nodes + v
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]  # keep draw order: a sorted prefix would favour small u
        keys = keys[~np.isin(keys, taken)]
        if len(chosen):
            keys = keys[~np.isin(keys, chosen)]
        if len(keys) < max(1, need // 10):
            uniform_v = False  # low-level nodes are saturated; stop aiming at them
        chosen = np.concatenate((chosen, keys[:need]))
    return chosen


def generate_trace(nodes: int, edges: int, levels: int, initial: int, p: float, seed: int,
                   tiny: bool = False, name: str | None = None) -> JobTrace:
    """Return a random layered trace with exactly these node, edge, level and initial counts."""
    if nodes < 1:
        raise TraceError(f"gen: --nodes must be at least 1, got {nodes}")
    if not 1 <= levels <= nodes:
        raise TraceError(f"gen: --levels must be between 1 and --nodes ({nodes}), got {levels}")
    if edges < 0:
        raise TraceError(f"gen: --edges must be >= 0, got {edges}")
    if not 0 <= initial <= nodes:
        raise TraceError(f"gen: --initial must be between 0 and --nodes ({nodes}), got {initial}")
    if not (0.0 <= p <= 1.0):
        raise TraceError(f"gen: --p must be a probability in [0, 1], got {p}")
    rng = np.random.default_rng(seed)
    sizes = _layer_sizes(nodes, edges, levels, rng)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    level_of = np.repeat(np.arange(levels, dtype=np.int64), sizes)

    # One parent on the layer just below each node above layer 0 fixes its level.
    v_must = np.arange(sizes[0], nodes, dtype=np.int64)
    below = level_of[v_must] - 1
    u_must = starts[below] + rng.integers(0, sizes[below]) if len(v_must) else v_must
    must = u_must * nodes + v_must
    more = _extra_edges(edges - len(must), np.sort(must), sizes, starts, level_of, nodes, rng)
    keys = np.concatenate((must, more))
    us, vs = (keys // nodes).tolist(), (keys % nodes).tolist()

    names = [f"t{i}" for i in range(nodes)]
    with paused_gc():
        graph = TaskGraph(names, zip(us, vs, strict=True))
    assert graph.num_levels == levels and graph.num_edges == edges

    mu = math.log(MEDIAN_TINY if tiny else MEDIAN_SECONDS)
    durations = rng.lognormal(mean=mu, sigma=SIGMA, size=nodes).tolist()

    activations = None
    if p < 1.0:
        on = (rng.random(len(keys)) < p).tolist()
        lists: dict[int, list[int]] = {}
        for u, v, yes in zip(us, vs, on, strict=True):
            if yes:
                lst = lists.get(u)
                if lst is None:
                    lists[u] = [v]
                else:
                    lst.append(v)
        activations = {u: tuple(lst) for u, lst in sorted(lists.items())}
    if name is None:
        name = f"gen-n{nodes}-e{edges}-l{levels}-i{initial}-p{p:g}-s{seed}{'-tiny' if tiny else ''}"
    return JobTrace(graph=graph, durations=durations, initial=tuple(range(initial)),
                    activations=activations, name=name)
