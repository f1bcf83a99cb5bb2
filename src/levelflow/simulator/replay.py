"""Discrete-event replay of a job trace under a scheduler with P simulated processors.

Constant: the trace (durations, who activates whom), P, the model.
Changes: the simulated clock `now`, the event heap of running tasks, idle processors, and the
scheduler's own state (driven only through activate / get_ready / done / is_active).

The event heap is SimPy's: entries (time, priority, seq, task); every event is a task finishing
(priority 0) and the monotonic seq breaks ties, so equal inputs give equal runs.

Models:
- serial: a task holds one processor for its `duration`.
- parallel (fully parallelizable tasks): when get_ready hands out r tasks while q processors are
  idle, the q processors are split as evenly as possible (earlier tasks get the remainder); a task
  given c processors holds them all for max(work / c, span), where work defaults to `duration` and
  span to 0. Its schedule row names the lowest processor of its group.

The loop is `levelflow.driver.drive`; this module is its workers (a placement per model) and
its clock. Overhead is real time (perf_counter) inside scheduler calls only. With charge_overhead
the driver is one serial master: each call advances the simulated clock by its real duration,
and tasks handed out by a call start when it returns.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

from levelflow.driver import drive
from levelflow.scheduler.base import Scheduler
from levelflow.scheduler.metered import Metered
from levelflow.simulator.bounds import MODELS, lower_bound, task_times
from levelflow.simulator.result import SimResult, SimulationError
from levelflow.traces.model import JobTrace

Progress = Callable[[int, int], None]


# More simulated processors than this would only exhaust memory (a list slot each).
MAX_PROCESSORS = 1 << 20


def default_processors(trace: JobTrace, processors: int | None = None) -> int:
    """Return the processor count to use: the argument, else the trace's, else 8."""
    if processors is not None:
        return processors
    return trace.processors or 8


def build_scheduler(spec: str | Scheduler, trace: JobTrace) -> tuple[Scheduler, str, float]:
    """Return (scheduler, its display name, seconds spent building it) for a spec or instance."""
    if isinstance(spec, Scheduler):
        if spec.graph is not trace.graph:
            raise ValueError(f"scheduler {spec.name!r} was built on another graph than the trace's")
        return spec, getattr(spec, "name", type(spec).__name__), 0.0
    from levelflow.scheduler import make_scheduler

    t = time.perf_counter()
    sched = make_scheduler(spec, trace.graph, costs=trace.durations)
    return sched, spec, time.perf_counter() - t


def _activation_lists(trace: JobTrace) -> list | tuple:
    """Return, indexed by task id, the children each task activates when it runs."""
    if trace.activations is None:
        return trace.graph.children
    acts: list = [()] * len(trace.graph)
    for v, cs in trace.activations.items():
        acts[v] = cs
    return acts


def simulate(trace: JobTrace, scheduler: str | Scheduler, processors: int | None = None,
             model: str = "serial", charge_overhead: bool = False,
             record_schedule: bool = False, progress: Progress | None = None,
             label: str | None = None) -> SimResult:
    """Return the result of replaying `trace` under `scheduler` (a spec or a fresh instance).

    `label` names the scheduler in the result and in errors (default: the spec, or the
    instance's `name`); `progress(done, total)` is called every ~0.5% of the activated tasks.
    """
    P = _check_args(trace, processors, model)
    sched, name, setup_s = build_scheduler(scheduler, trace)
    name = label or name
    active = trace.active_set()
    _, _, bound = lower_bound(trace, P, model, active)
    ticks = _Ticks(progress, sum(active) if progress is not None else 0)
    placement = (Serial if model == "serial" else Parallel)(trace, P, record_schedule, ticks)
    metered = Metered(sched, time.perf_counter, placement.advance if charge_overhead else None)
    metered.activate(trace.initial)
    memory = sched.memory()
    ran = drive(metered, placement, name=name)
    ticks.last(ran)
    makespan = placement.now
    return SimResult(
        scheduler=name, processors=P, makespan=makespan, overhead_s=metered.total(),
        overhead_by_call=metered.seconds,
        utilization=placement.busy_time / (P * makespan) if makespan > 0 else 0.0, tasks=ran,
        counters=dict(sched.counters()), memory=max(memory, sched.memory()), lower_bound=bound,
        makespan_over_lower_bound=makespan / bound if bound > 0 else 1.0,
        model=model, charge_overhead=charge_overhead, setup_s=setup_s,
        trace=trace.name, schedule=placement.rows)


def _check_args(trace: JobTrace, processors: int | None, model: str) -> int:
    """Return the processor count to simulate; raise SimulationError naming a bad argument."""
    P = default_processors(trace, processors)
    if not isinstance(P, int) or P < 1:
        raise SimulationError(f"processors: must be an integer >= 1, got {P!r}")
    if P > MAX_PROCESSORS:  # each simulated processor is a slot in memory
        raise SimulationError(f"processors: at most {MAX_PROCESSORS:,} can be simulated, "
                              f"got {P:,}")
    if model not in MODELS:
        raise SimulationError(f"model: unknown model {model!r} (choose from {', '.join(MODELS)})")
    return P


class _Ticks:
    """Calls progress(done, total) every ~0.5% of the total, and once at the end."""

    __slots__ = ("progress", "total", "tick", "next")

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress = progress
        self.total = total
        self.tick = max(1, total // 200)
        self.next = self.tick if progress is not None else float("inf")

    def ran(self, count: int) -> None:
        """Report `count` tasks started so far if a tick has passed."""
        if count >= self.next:
            self.progress(count, self.total)
            self.next = count + self.tick

    def last(self, count: int) -> None:
        """Report the final count."""
        if self.progress is not None:
            self.progress(count, self.total)


class _Placement:
    """The simulated processors: the event heap of running tasks and the simulated clock.

    The driver's workers; subclasses decide how many processors a started task holds.
    """

    __slots__ = ("acts", "heap", "seq", "now", "busy_time", "ran", "rows", "free", "ticks")

    def __init__(self, trace: JobTrace, P: int, record: bool, ticks: _Ticks) -> None:
        self.acts = _activation_lists(trace)
        self.heap: list = []  # (end time, priority, seq, task)
        self.seq = 0
        self.now = 0.0
        self.busy_time = 0.0  # processor-seconds held by tasks
        self.ran = 0
        self.rows: list | None = [] if record else None  # (task, processor, start, end)
        self.free = list(range(P - 1, -1, -1))  # idle processor ids, lowest on top
        self.ticks = ticks

    def advance(self, seconds: float) -> None:
        """Move the clock on by real time spent in a scheduler call (charge_overhead)."""
        self.now += seconds

    def _push(self, v: int, length: float) -> None:
        heapq.heappush(self.heap, (self.now + length, 0, self.seq, v))
        self.seq += 1

    def busy(self) -> bool:
        """Return True while any task runs."""
        return bool(self.heap)

    def finished(self):
        """Yield (task, activated) for each task that has finished by the next event time."""
        # Every task finished by the time the driver looks is reported before the next
        # get_ready, so the scheduler sees all the processors freed at this instant at once.
        heap = self.heap
        if heap[0][0] > self.now:
            self.now = heap[0][0]
        while heap and heap[0][0] <= self.now:
            v = heapq.heappop(heap)[3]
            self._release(v)
            yield v, self.acts[v]

    def _release(self, v: int) -> None:
        raise NotImplementedError


class Serial(_Placement):
    """Serial model: a task holds one processor for its duration."""

    __slots__ = ("dur", "idle_count", "proc_of")

    def __init__(self, trace: JobTrace, P: int, record: bool, ticks: _Ticks) -> None:
        super().__init__(trace, P, record, ticks)
        self.dur = trace.durations
        self.idle_count = P  # the free list is kept only when recording (P may be 2^20)
        self.proc_of = [0] * len(self.dur) if record else None

    def idle(self) -> int:
        """Return the number of idle processors."""
        return self.idle_count

    def start(self, ready: list[int]) -> None:
        """Start each ready task on one idle processor."""
        self.idle_count -= len(ready)
        rows, now = self.rows, self.now
        for v in ready:
            dv = self.dur[v]
            self.busy_time += dv
            self._push(v, dv)
            if rows is not None:
                p = self.free.pop()
                self.proc_of[v] = p
                rows.append((v, p, now, now + dv))
        self.ran += len(ready)
        self.ticks.ran(self.ran)

    def _release(self, v: int) -> None:
        self.idle_count += 1
        if self.rows is not None:
            self.free.append(self.proc_of[v])


class Parallel(_Placement):
    """Parallel model: the idle processors are split as evenly as possible among the ready tasks."""

    __slots__ = ("work", "span", "held")

    def __init__(self, trace: JobTrace, P: int, record: bool, ticks: _Ticks) -> None:
        super().__init__(trace, P, record, ticks)
        self.work, _ = task_times(trace, P, "parallel")
        self.span = trace.span
        self.held: dict[int, list[int]] = {}  # running task -> the processors it holds

    def idle(self) -> int:
        """Return the number of idle processors."""
        return len(self.free)

    def start(self, ready: list[int]) -> None:
        """Split the idle processors among the ready tasks; earlier tasks get the remainder."""
        free, now = self.free, self.now
        share, extra = divmod(len(free), len(ready))
        for i, v in enumerate(ready):
            c = share + (1 if i < extra else 0)
            group = [free.pop() for _ in range(c)]
            self.held[v] = group
            length = max(self.work[v] / c, self.span.get(v, 0.0))
            self.busy_time += c * length
            self._push(v, length)
            if self.rows is not None:
                self.rows.append((v, min(group), now, now + length))
        self.ran += len(ready)
        self.ticks.ran(self.ran)

    def _release(self, v: int) -> None:
        self.free.extend(sorted(self.held.pop(v), reverse=True))
