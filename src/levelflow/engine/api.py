"""The Python entry points: load a program, run it on a SparkSession, read the relations back.

    prog = levelflow.load("examples/tc/program.dl")
    result = levelflow.run(prog, "examples/tc/facts", spark=spark, jobs=2)
    result.relation("path").count(); result.ran, result.total
    levelflow.run(prog, inputs={"edge": edges_df}, spark=spark)   # a DataFrame as an input

A session passed in is used as it is: nothing here sets its config (only thread-local properties
while tasks run). Without one, `run` starts (or reuses) a local session in the background and
leaves it running so that the returned DataFrames stay usable; a run whose tasks all run in the
driver does not wait for it.
"""

from __future__ import annotations

import os
from pathlib import Path

from levelflow.engine.guard import MAX_TUPLES
from levelflow.engine.runner import RunError, RunResult, run_program
from levelflow.tasks.ast import Program
from levelflow.tasks.tasks import ProgramTasks


def load(path: str | os.PathLike, functors: str | os.PathLike | None = None) -> ProgramTasks:
    """Return the program at `path` parsed, checked and condensed into tasks; its `.functor`s
    bound to the Python module at `functors` (`--functors`)."""
    from levelflow.tasks import build_tasks, load_program
    from levelflow.tasks.user_functors import bound, check_module

    with bound(check_module(functors)):
        return build_tasks(load_program(path))


def _as_tasks(program: str | os.PathLike | Program | ProgramTasks, confined=None
              ) -> ProgramTasks:
    """Return ProgramTasks for a path (its includes only inside `confined`'s folders when
    given), a parsed Program, or ProgramTasks as they are."""
    if isinstance(program, ProgramTasks):
        return program
    if isinstance(program, Program):
        from levelflow.tasks import build_tasks

        return build_tasks(program)
    if confined is not None:
        from levelflow.tasks import build_tasks, load_program

        return build_tasks(load_program(program, confined=confined))
    return load(program)


def run(program: str | os.PathLike | Program | ProgramTasks, factdir=None, outdir=None, *,
        spark=None, master: str = "local[*]", driver_memory: str = "2g", scheduler="hybrid",
        jobs: int = 2, checkpoint: str = "local", trace_out=None, schedule_out=None,
        progress=None, plan: str = "auto", local_rows: int | None = None,
        confine: bool = False, max_tuples: int | None = MAX_TUPLES,
        inputs: dict | None = None) -> RunResult:
    """Return the RunResult of running `program` from scratch on `spark` (or a local session).

    The options are `levelflow run`'s: `plan` (auto|driver|local|partitioned|
    distributed|global), `local_rows`
    (auto's threshold, `--local-rows`), `confine` (`--confine`); `master` and `driver_memory`
    only when no session is passed; `max_tuples` (`--max-tuples`, None: no limit): a task that
    would make more tuples raises TupleLimit. For `--state`, use IncrementalSession.bootstrap.
    `inputs` maps input relations to DataFrames read instead of their fact files (columns by
    the declaration's attribute names, else by position; engine/spark_io.py).
    """
    import dataclasses

    from levelflow.engine.paths import check_io_paths, confined_includes
    from levelflow.engine.spark_io import with_frames

    program_tasks = _as_tasks(program, confined_includes(
        confine, (factdir if factdir is not None else Path.cwd(),)))
    if inputs:
        program_tasks = dataclasses.replace(
            program_tasks, program=with_frames(program_tasks.program, inputs))
    if local_rows is not None and (not isinstance(local_rows, int) or local_rows < 0):
        raise RunError(f"local_rows: must be a number of rows >= 0, got {local_rows!r}")
    if confine:
        check_io_paths(program_tasks.program, Path(factdir) if factdir is not None else Path.cwd(),
                       Path(outdir) if outdir is not None else None, confine)
    if spark is None:  # started in the background: tasks in the driver never wait for it
        from levelflow.engine.session import DeferredSession, make_session

        spark = DeferredSession(lambda: make_session(master=master, driver_memory=driver_memory),
                                master=master)
    if checkpoint == "reliable" and not spark.sparkContext.getCheckpointDir():
        raise RunError("checkpoint: 'reliable' needs a checkpoint directory on the session "
                       "(spark.sparkContext.setCheckpointDir(...))")
    return run_program(spark, program_tasks, Path(factdir) if factdir is not None else None,
                       outdir, scheduler=scheduler, jobs=jobs, trace_out=trace_out,
                       schedule_out=schedule_out, progress=progress, checkpoint=checkpoint,
                       plan=plan, plan_rows=local_rows, max_tuples=max_tuples)
