"""A session just opened loads its tasks' states onto the executors (an aggregate task's into
the driver) before its first epoch.

A state read from disk has no copy on the executors yet (a new process, or a closed session's
forgotten one): the first epoch of an arranged task would miss it, ship the whole state and
build its indexes there (10-13x a warm epoch on bench_shapes, and past the elastic budget,
which then recomputed the task and wrote it whole). `warm` runs that shipping job once per
task when the session opens, where the user already waits, with the state unchanged, and
waits for the driver's index of base facts, so the first epoch costs what the next ones do.
"""

from __future__ import annotations

from levelflow.engine.incremental.backends.worker.dred_job import arranged_update, plan_for
from levelflow.engine.incremental.strategies.aggregates import aggregate_task, kept_state
from levelflow.engine.incremental.versions import TaskContext, Versions
from levelflow.tasks.functors import uses_autoinc


def _context(session) -> TaskContext:
    """Return a TaskContext over the session's snapshot with nothing changed."""
    snap, decls = session.snap, session.program.decls
    versions = {n: Versions(d, snap.tuples(n), snap.rows[n], snap.pieces.get(n, 1))
                for n, d in decls.items()}
    base = {n: Versions(decls[n], snap.base[n], snap.base_rows[n])
            for n in session.program.inputs}
    return TaskContext(session.spark, session.program, versions,
                       {n: snap.rel[n] for n in snap.counted}, base,
                       {n: snap.rel[n] for n in decls if n not in snap.counted}, snap.max_rank)


def warm_tasks(session, ctx: TaskContext) -> list:
    """Return (task, plan) of the tasks whose epochs run where their state lives (arranged.py)
    and whose state is not there yet."""
    out = []
    for task in session.pt.tasks:
        if not task.rules or task.relations[0] in session.snap.counted or \
                uses_autoinc(task.rules) or task.name in session.snap.arranged or \
                aggregate_task(task):  # kept in the driver: warm_aggregates
            continue
        plan = plan_for(ctx, task)
        if plan is not None:
            out.append((task, plan))
    return out


def warm(session, progress=None) -> list[str]:
    """Load each arranged task's state onto the executors (one job each, nothing changed) and
    the driver's index of base facts; return the names of the tasks loaded."""
    ctx = _context(session)
    # Under the scratch strategy every epoch recomputes its tasks: nothing to load.
    tasks = warm_tasks(session, ctx) if session.arranged and session.mode != "scratch" else []
    for i, (task, plan) in enumerate(tasks, 1):
        if progress is not None:
            progress.phase(f"loading the state of task {task.name} onto the executors "
                           f"({i} of {len(tasks)})")
        held = None
        # Twice: the first job ships the state; the second runs as a warm epoch does (in the
        # driver's job when its input is small), so that the Python worker an epoch lands on
        # has imported the task's modules and read the state already.
        for _ in range(2):
            changes, _, held, _ = arranged_update(ctx, task, plan, held)
            if any(c.plus_rows or c.minus_rows for c in changes.values()):  # a bug
                raise RuntimeError(f"task {task.name}: its state changed while loaded")
        session.snap.arranged[task.name] = held
    warm_aggregates(session, ctx, progress)
    if progress is not None:
        progress.phase("loading the base facts into the driver")
    session.base_index.wait()
    return [task.name for task, _ in tasks]


def warm_aggregates(session, ctx: TaskContext, progress=None) -> None:
    """Build the driver's state of each aggregate task that keeps one (aggregate_state.py):
    one job each, so that the first epoch updates as the next ones do."""
    if not session.arranged or session.mode == "scratch":
        return
    for task in session.pt.tasks:
        if aggregate_task(task) and task.name not in session.snap.arranged and \
                not uses_autoinc(task.rules):
            if progress is not None:
                progress.phase(f"loading the state of task {task.name} into the driver")
            held = kept_state(ctx, task)
            if held is not None:
                session.snap.arranged[task.name] = held
