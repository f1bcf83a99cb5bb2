"""The run-time state every scheduler shares: which tasks are activated, running, finished.

Constant: the TaskGraph and its level array.
Changes: state[v] (0 idle, 1 waiting = activated and not handed out, 2 running, 3 finished);
left[l] = activated unfinished tasks at level l; waiting[l] = tasks activated at level l and not yet
admitted to the ready set (may hold stale ids that a heuristic already handed out); the event logs
a bound Finder reads (None while no finder is bound), kept with the state on a `Shared` record.

`ActiveSet` is the mechanism (validation, counting, handing out); subclasses only decide which
waiting tasks are ready. A `Finder` is a readiness rule that runs beside an ActiveSet on the same
state, so that LevelBased and a heuristic can share one ready queue (Hybrid, Budget).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from levelflow.scheduler.base import Scheduler
from levelflow.tasks.graph import TaskGraph

IDLE, WAITING, RUNNING, FINISHED = 0, 1, 2, 3


class Shared:
    """What a Finder sees of its owner: the graph, task states, levels, cur, the event logs.

    `state` and `level` are the owner's own arrays; `cur` is the owner's lowest unfinished level
    (None for an owner that keeps none); the logs are None until a Finder asks for them.
    """

    __slots__ = ("graph", "state", "level", "cur", "act_log", "fin_log")

    def __init__(self, graph: TaskGraph, state: bytearray) -> None:
        self.graph = graph
        self.state = state
        self.level = graph.level
        self.cur: int | None = None
        self.act_log: list[int] | None = None
        self.fin_log: list[int] | None = None

    def name(self, v: int) -> str:
        """Return a task's display name and id for error messages."""
        if 0 <= v < len(self.state):
            return f"{self.graph.names[v]!r} (id {v})"
        return f"id {v}"


class ActiveSet(Scheduler):
    """Scheduler mechanism: task states, per-level counts, misuse checks; readiness is abstract."""

    __slots__ = ("_n", "_state", "_level", "_children", "_left", "_waiting", "_unfinished",
                 "shared", "_activations", "_handed_out")

    def __init__(self, graph: TaskGraph, *, costs: Sequence[float] | None = None) -> None:
        super().__init__(graph, costs=costs)
        self._n = len(graph)
        self._state = bytearray(self._n)
        self._level = graph.level
        self._children = graph.children
        # One sentinel slot past the last level keeps the level-advance loop branch-free.
        self._left = [0] * (graph.num_levels + 1)
        self._waiting: list[list[int]] = [[] for _ in range(graph.num_levels + 1)]
        self._unfinished = 0
        self.shared = Shared(graph, self._state)
        self._activations = 0
        self._handed_out = 0

    # --- the protocol -------------------------------------------------------------------------

    def activate(self, tasks: Iterable[int]) -> None:
        """Mark tasks as activated (already activated ones are ignored)."""
        tasks = list(tasks)
        state = self._state
        n = self._n
        for v in tasks:
            if not (0 <= v < n):
                raise ValueError(f"activate: {self.shared.name(v)} is not a task of this graph")
            if state[v] == FINISHED:
                raise ValueError(f"activate: task {self.shared.name(v)} has already finished")
        self._check_activate(tasks)
        if tasks:
            self._add(tasks)
            self._activated_at(min(map(self._level.__getitem__, tasks)))

    def _check_activate(self, tasks: list[int]) -> None:
        """Raise ValueError if a subclass cannot accept this activation (default: it can)."""

    def _add(self, tasks: Iterable[int]) -> None:
        """Activate the given tasks that are idle (their validity is already checked)."""
        state = self._state
        level = self._level
        left = self._left
        waiting = self._waiting
        log = self.shared.act_log
        count = 0
        for v in tasks:
            if state[v] == IDLE:
                state[v] = WAITING
                lv = level[v]
                left[lv] += 1
                waiting[lv].append(v)
                count += 1
                if log is not None:
                    log.append(v)
        self._unfinished += count
        self._activations += count

    def _activated_at(self, lv: int) -> None:
        """React to activations from outside done() whose lowest level is lv."""

    def done(self, task: int, activated: Iterable[int] = ()) -> None:
        """Record that a running task finished and activated the given children."""
        state = self._state
        try:
            if task < 0 or state[task] != RUNNING:
                raise IndexError
        except (IndexError, TypeError):
            raise ValueError(f"done: task {self.shared.name(task)} is not running") from None
        if activated:
            if type(activated) is not tuple:
                activated = tuple(activated)
            ch = self._children[task]
            if activated is not ch:  # the graph's own tuple means "all children": nothing to check
                # Membership in a long tuple is linear; hash it when the product would be large.
                if len(activated) > 2 and len(ch) > 8:
                    ch = set(ch)
                for c in activated:
                    if c not in ch:
                        raise ValueError(f"done: task {self.shared.name(task)} activated "
                                         f"{self.shared.name(c)}, which is not one of its children")
        state[task] = FINISHED
        level = self._level
        left = self._left
        left[level[task]] -= 1
        log = self.shared.fin_log
        if log is not None:
            log.append(task)
        self._unfinished -= 1
        if activated:
            self._add(activated)

    def is_active(self) -> bool:
        """Return True while any activated task has not finished."""
        return self._unfinished > 0

    def _take(self, tasks: list[int]) -> list[int]:
        """Return the still-waiting tasks among `tasks`, now marked running."""
        state = self._state
        out = []
        for v in tasks:
            if state[v] == WAITING:
                state[v] = RUNNING
                out.append(v)
        self._handed_out += len(out)
        return out

    def counters(self) -> dict[str, int]:
        """Return this scheduler's operation counts."""
        return {"activations": self._activations, "handed_out": self._handed_out,
                "finished": self._activations - self._unfinished}

    def memory(self) -> int:
        """Return the run-time state's size in bytes (one flag per task, counts per level)."""
        return self._n + 8 * len(self._left)


class Finder:
    """A readiness rule run beside an ActiveSet on its `Shared` state; reads the event logs.

    Subclasses implement `find`; they must return only tasks whose state is WAITING and whose
    activated ancestors in G have all finished, and must not change the state themselves.
    """

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        shared.act_log = []
        shared.fin_log = []

    def find(self, k: int) -> list[int]:
        """Return up to k waiting tasks that are ready by this rule (the caller hands them out)."""
        raise NotImplementedError

    def check_activate(self, tasks: list[int]) -> None:
        """Raise ValueError, before anything changes, if this rule cannot accept the activation."""

    def counters(self) -> dict[str, int]:
        """Return this rule's operation counts."""
        return {}

    def memory(self) -> int:
        """Return the memory this rule holds beyond the owner's state, in bytes."""
        return 0


class FinderScheduler(ActiveSet):
    """A scheduler that is nothing but a Finder (LogicBlox, Signal) on its own state."""

    __slots__ = ("finder",)
    finder_class: type[Finder] = Finder

    def __init__(self, graph: TaskGraph, *args: str, costs: Sequence[float] | None = None) -> None:
        super().__init__(graph, costs=costs)
        self.finder = self.finder_class(self.shared, *args)

    def _check_activate(self, tasks: list[int]) -> None:
        """Let the finder refuse an activation before anything changes."""
        self.finder.check_activate(tasks)

    def get_ready(self, k: int) -> list[int]:
        """Return up to k ready tasks and count them as running from now on."""
        if k <= 0 or not self._unfinished:
            return []
        return self._take(self.finder.find(k))

    def counters(self) -> dict[str, int]:
        """Return the mechanism's and the finder's operation counts."""
        c = super().counters()
        c.update(self.finder.counters())
        return c

    def memory(self) -> int:
        """Return the finder's memory in bytes."""
        return self.finder.memory()
