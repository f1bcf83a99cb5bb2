"""A session just opened loads its tasks' states onto the executors (an aggregate task's into
the driver) before its first epoch.

A state read from disk has no copy on the executors yet (a new process, or a closed session's
forgotten one): the first epoch of an arranged task would miss it, ship the whole state and
build its indexes there (10-13x a warm epoch on bench_shapes, and past the elastic budget,
which then recomputed the task and wrote it whole). `warm` runs that shipping job once per
task when the session opens, where the user already waits, with the state unchanged, and
waits for the driver's index of base facts, so the first epoch costs what the next ones do.
A bootstrap and an open also keep each subsumptive task's frames in the driver and count each
counted task in the driver, which keeps its counts (`warm_driver_and_counts`): a bootstrap past
BOOTSTRAP_COUNT_ROWS counted on the Spark side, and the first epoch shipped everything again.
"""

from __future__ import annotations

from levelflow.engine.choose import chosen
from levelflow.engine.incremental.backends.worker.counting_job import counted_update
from levelflow.engine.incremental.backends.worker.dist_job import distributed_update
from levelflow.engine.incremental.backends.worker.dred_job import arranged_update, plan_for
from levelflow.engine.incremental.strategies.aggregates import aggregate_task, kept_state
from levelflow.engine.incremental.strategies.renaming import renaming
from levelflow.engine.incremental.strategies.subsumed import hold_frames
from levelflow.engine.incremental.versions import TaskContext, Versions
from levelflow.engine.limitsize import limited
from levelflow.engine.plans.planner import LOCAL_ROWS
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
                       {n: snap.rel[n] for n in decls if n not in snap.counted}, snap.max_rank,
                       session.driver_rows, session.plan)


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
            update = distributed_update if plan.kind == "distributed" else arranged_update
            changes, _, held, _, _ = update(
                ctx, task, plan, held, relabel=session.snap.labels_any(task.relations))
            if any(c.plus_rows or c.minus_rows for c in changes.values()):  # a bug
                raise RuntimeError(f"task {task.name}: its state changed while loaded")
        session.snap.arranged[task.name] = held
    warm_aggregates(session, ctx, progress)
    warm_driver_and_counts(session, ctx, progress)
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


def _counts_kept(session, task) -> bool:
    """Return whether a counted task's epochs count over counts the driver keeps (epoch.py
    `_counts_kept`): not copied by renaming, not recomputed each epoch."""
    snap, program = session.snap, session.program
    if not any(r.body for r in task.rules) or task.relations[0] not in snap.counted or \
            task.subsumes or uses_autoinc(task.rules) or limited(program, task.relations) or \
            chosen(program.decls, task.relations) or \
            renaming(program, task, snap.counted) is not None:
        return False
    rows = sum(snap.rows[n] for n in task.reads_from) + \
        sum(snap.base_rows[n] for n in task.relations if n in snap.base_rows)
    return rows <= LOCAL_ROWS


def warm_driver_and_counts(session, ctx: TaskContext | None = None, progress=None) -> None:
    """Keep each subsumptive task's frames in the driver (strategies/subsumed.py) and count
    each counted task in the driver, which keeps its counts (counting_job.py), with nothing
    changed: after a bootstrap or an open, so that the first epoch runs as the next ones do.
    A task whose counts the driver already keeps (a bootstrap counted it there) is skipped."""
    if not session.arranged or session.mode == "scratch":
        return
    ctx = ctx or _context(session)
    for task in session.pt.tasks:
        if task.subsumes and not uses_autoinc(task.rules):
            if progress is not None:
                progress.phase(f"loading the state of task {task.name} into the driver")
            hold_frames(ctx, task)
        elif _counts_kept(session, task):
            held = session.snap.arranged.get(task.name)
            if held is not None and held.in_driver:
                continue
            if progress is not None:
                progress.phase(f"counting task {task.name} in the driver")
            # One job brings the old versions over, counted in the driver with nothing changed.
            changes, held = counted_update(ctx, task, held)
            if any(c.plus_rows or c.minus_rows for c in changes.values()):  # a bug
                raise RuntimeError(f"task {task.name}: its counts changed while loaded")
            session.snap.arranged[task.name] = held
