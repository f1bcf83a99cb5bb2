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

Overhead is real time (perf_counter) inside scheduler calls only. With charge_overhead the driver is
one serial master: each call advances the simulated clock by its real duration, and tasks handed
out by a call start when it returns.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

from levelflow.scheduler.base import Scheduler
from levelflow.simulator.bounds import MODELS, lower_bound, task_times
from levelflow.simulator.result import SchedulerStall, SimResult, SimulationError
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
    P = default_processors(trace, processors)
    if not isinstance(P, int) or P < 1:
        raise SimulationError(f"processors: must be an integer >= 1, got {P!r}")
    if P > MAX_PROCESSORS:  # each simulated processor is a slot in memory
        raise SimulationError(f"processors: at most {MAX_PROCESSORS:,} can be simulated, "
                              f"got {P:,}")
    if model not in MODELS:
        raise SimulationError(f"model: unknown model {model!r} (choose from {', '.join(MODELS)})")
    sched, name, setup_s = build_scheduler(scheduler, trace)
    name = label or name
    active = trace.active_set()
    _, _, bound = lower_bound(trace, P, model, active)
    total = sum(active) if progress is not None else 0
    loop = _run_serial if model == "serial" else _run_parallel
    makespan, split, busy, ran, rows, memory = loop(
        trace, sched, name, P, charge_overhead, record_schedule, progress, total)
    return SimResult(
        scheduler=name, processors=P, makespan=makespan, overhead_s=sum(split.values()),
        overhead_by_call=split,
        utilization=busy / (P * makespan) if makespan > 0 else 0.0, tasks=ran,
        counters=dict(sched.counters()), memory=memory, lower_bound=bound,
        makespan_over_lower_bound=makespan / bound if bound > 0 else 1.0,
        model=model, charge_overhead=charge_overhead, setup_s=setup_s,
        trace=trace.name, schedule=rows)


def _stall(name: str, ran: int, now: float) -> SchedulerStall:
    """Return the error for a scheduler that stalls with active work and nothing to run."""
    return SchedulerStall(
        f"scheduler {name!r} stalled at t={now:g} after {ran} tasks: is_active() is True but "
        f"get_ready() hands out nothing while no task is running (a scheduler bug)")


def _overflow(name: str, got: int, k: int) -> SchedulerStall:
    """Return the error for a scheduler that hands out more tasks than processors are idle."""
    return SchedulerStall(f"scheduler {name!r} handed out {got} tasks from get_ready({k})")


def _run_serial(trace: JobTrace, sched: Scheduler, name: str, P: int, charge: bool,
                record: bool, progress: Progress | None, total: int):
    """Return (makespan, overhead per call kind, busy, tasks, rows, memory) of a serial run."""
    dur = trace.durations
    acts = _activation_lists(trace)
    get_ready, done = sched.get_ready, sched.done
    pc = time.perf_counter
    push, pop = heapq.heappush, heapq.heappop
    heap: list = []
    rows: list | None = [] if record else None
    free = list(range(P - 1, -1, -1))  # idle processor ids, lowest on top (only when recording)
    proc_of = [0] * len(dur) if record else None
    tick = max(1, total // 200)
    next_tick = tick if progress is not None else float("inf")
    now = busy = o_get = o_done = o_alive = 0.0
    seq = ran = 0
    idle = P

    t = pc()
    sched.activate(trace.initial)
    d = pc() - t
    o_act = d
    if charge:
        now += d
    memory = sched.memory()
    while True:
        if idle:
            t = pc()
            ready = get_ready(idle)
            d = pc() - t
            o_get += d
            if charge:
                now += d
            if ready:
                k = len(ready)
                if k > idle:
                    raise _overflow(name, k, idle)
                idle -= k
                ran += k
                for v in ready:
                    dv = dur[v]
                    busy += dv
                    push(heap, (now + dv, 0, seq, v))
                    seq += 1
                    if record:
                        p = free.pop()
                        proc_of[v] = p
                        rows.append((v, p, now, now + dv))
                if ran >= next_tick:
                    progress(ran, total)
                    next_tick = ran + tick
        if not heap:
            t = pc()
            alive = sched.is_active()
            d = pc() - t
            o_alive += d
            if charge:
                now += d
            if not alive:
                break
            raise _stall(name, ran, now)
        # Every task that has finished by the time the driver looks is reported before the next
        # get_ready, so the scheduler sees all the processors freed at this instant at once.
        end = heap[0][0]
        if end > now:
            now = end
        while heap and heap[0][0] <= now:
            v = pop(heap)[3]
            idle += 1
            if record:
                free.append(proc_of[v])
            a = acts[v]
            t = pc()
            done(v, a)
            d = pc() - t
            o_done += d
            if charge:
                now += d
    if progress is not None:
        progress(ran, total)
    memory = max(memory, sched.memory())
    split = {"activate": o_act, "get_ready": o_get, "done": o_done, "is_active": o_alive}
    return now, split, busy, ran, rows, memory


def _run_parallel(trace: JobTrace, sched: Scheduler, name: str, P: int, charge: bool,
                  record: bool, progress: Progress | None, total: int):
    """Return (makespan, overhead per call kind, busy, tasks, rows, memory) of a parallel run."""
    work, _ = task_times(trace, P, "parallel")
    span = trace.span
    acts = _activation_lists(trace)
    pc = time.perf_counter
    heap: list = []
    rows: list | None = [] if record else None
    free = list(range(P - 1, -1, -1))
    held: dict[int, list[int]] = {}  # running task -> the processors it holds
    tick = max(1, total // 200)
    next_tick = tick if progress is not None else float("inf")
    now = busy = o_get = o_done = o_alive = 0.0
    seq = ran = 0

    t = pc()
    sched.activate(trace.initial)
    d = pc() - t
    o_act = d
    if charge:
        now += d
    memory = sched.memory()
    while True:
        idle = len(free)
        if idle:
            t = pc()
            ready = sched.get_ready(idle)
            d = pc() - t
            o_get += d
            if charge:
                now += d
            if ready:
                r = len(ready)
                if r > idle:
                    raise _overflow(name, r, idle)
                share, extra = divmod(idle, r)
                for i, v in enumerate(ready):
                    c = share + (1 if i < extra else 0)
                    group = [free.pop() for _ in range(c)]
                    held[v] = group
                    length = max(work[v] / c, span.get(v, 0.0))
                    busy += c * length
                    heapq.heappush(heap, (now + length, 0, seq, v))
                    seq += 1
                    if record:
                        rows.append((v, min(group), now, now + length))
                ran += r
                if ran >= next_tick:
                    progress(ran, total)
                    next_tick = ran + tick
        if not heap:
            t = pc()
            alive = sched.is_active()
            d = pc() - t
            o_alive += d
            if charge:
                now += d
            if not alive:
                break
            raise _stall(name, ran, now)
        end = heap[0][0]
        if end > now:
            now = end
        while heap and heap[0][0] <= now:
            v = heapq.heappop(heap)[3]
            free.extend(sorted(held.pop(v), reverse=True))
            t = pc()
            sched.done(v, acts[v])
            d = pc() - t
            o_done += d
            if charge:
                now += d
    if progress is not None:
        progress(ran, total)
    memory = max(memory, sched.memory())
    split = {"activate": o_act, "get_ready": o_get, "done": o_done, "is_active": o_alive}
    return now, split, busy, ran, rows, memory
