"""The Python API of incremental maintenance: bootstrap or open a state, insert, remove, commit.

    s = IncrementalSession.bootstrap(spark, "examples/tc/program.dl", "examples/tc/facts",
                                     statedir="state")
    s.insert("edge", (1, 2)); s.remove('edge(2, 3)')
    result = s.commit()            # EpochResult: result.deltas["path"].added is a DataFrame
    s.relation("path").count()

Constant: the program and its tasks. Changes: the current snapshot (replaced whole by a
successful commit, never touched by a failed one) and the pending ops of the next epoch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from pathlib import Path

from levelflow.engine.guard import MAX_TUPLES, check_limit
from levelflow.engine.incremental.backends.driver_rows import held_rows, unread_file
from levelflow.engine.incremental.elastic import LARGE_CHANGE, SWITCH, SWITCH_FLOOR_SECONDS
from levelflow.engine.incremental.epoch import Epoch
from levelflow.engine.incremental.net_change import net_change, present
from levelflow.engine.incremental.program_text import load_tasks
from levelflow.engine.incremental.results import EpochError, EpochResult
from levelflow.engine.incremental.state.base_delta import BaseDelta
from levelflow.engine.incremental.state.base_index import INDEX_ROWS, BaseIndex, read_base
from levelflow.engine.incremental.state.directory import HELD_ROWS, StateDir, StateError
from levelflow.engine.incremental.state.snapshot import empty_snapshot
from levelflow.engine.incremental.strategies.counting_spark import counted_relations
from levelflow.engine.incremental.strategies.subsumed import rekey_frames
from levelflow.engine.incremental.updates import Op, coerce_row, parse_literal
from levelflow.engine.incremental.versions import Versions
from levelflow.engine.memory import held_up_to
from levelflow.engine.plans.driver import BY_MASTER, resolved_rows
from levelflow.engine.plans.resident import check_root
from levelflow.tasks.tasks import ProgramTasks


def _resolved(options: dict, spark) -> int | None:
    """Return the session's driver rows, `options`' own resolved on `spark` (once: the memory
    available is read then), and set them in `options` for the session made from them."""
    options["driver_rows"] = resolved_rows(options.get("driver_rows", BY_MASTER), spark)
    return options["driver_rows"]


def _keep_held(before, after) -> None:
    """Give snapshot `after`, just read back from the files a commit wrote, the frames of
    `before` whose rows the driver holds where `after` would read them from those files again:
    they hold the same tuples (a 3M-row relation read back each epoch took 0.3 s)."""
    for old, new in ((before.rel, after.rel), (before.base, after.base)):
        for name, df in new.items():
            mine = old.get(name)
            if unread_file(df) and not unread_file(mine) and held_rows(mine) is not None:
                new[name] = old[name]


def _restarted(held: dict) -> dict:
    """Return where arranged tasks' states live, their Spark-side logs restarted from a
    snapshot just read from disk (its files hold the same tuples)."""
    return {task: dataclasses.replace(h, logs={}) for task, h in held.items()}


class IncrementalSession:
    """A maintained program on a SparkSession: pending base-fact ops and the current snapshot."""

    def __init__(self, spark, program_tasks: ProgramTasks, program_text: str, snap,
                 statedir: StateDir | None = None, *, scheduler="hybrid", jobs: int = 1,
                 mode: str = "elastic", switch: float = SWITCH,
                 switch_floor: float = SWITCH_FLOOR_SECONDS,
                 large_change: float | None = LARGE_CHANGE, arranged: bool = True,
                 max_tuples: int | None = MAX_TUPLES,
                 driver_rows: int | None = BY_MASTER, epoch_timeout: float | None = None,
                 plan: str = "auto") -> None:
        self.spark = spark
        self.pt = program_tasks
        self.program = program_tasks.program
        self.program_text = program_text
        self.snap = snap
        self.statedir = statedir
        self.scheduler, self.jobs = scheduler, jobs
        self.mode, self.switch, self.switch_floor = mode, switch, switch_floor
        self.large_change = large_change
        self.arranged = arranged  # recursive tasks updated where their state lives
        self.max_tuples = check_limit(max_tuples)  # per task (engine/guard.py); None: no limit
        # A task reading at most this many rows runs in the driver, from scratch and in its
        # epochs (plans/driver.py); None: on Spark; BY_MASTER: by the session's master.
        self.driver_rows = resolved_rows(driver_rows, spark)
        # Seconds an epoch's tasks may take before it is cancelled (EpochTimeout); None: no limit
        self.epoch_timeout = epoch_timeout
        # "distributed": recursive tasks the routing serves are kept partitioned over the
        # executors (backends/worker/dist_job.py) whatever their size; "auto": by their size.
        if plan not in ("auto", "distributed"):
            raise EpochError(f"plan: must be auto or distributed, got {plan!r}")
        self.plan = plan
        check_root()  # executor state's folder: refused in one line before any job if not private
        self.pending: list[Op] = []
        self.last: EpochResult | None = None
        # Base facts in the driver, for the no-op check (as many as the driver holds).
        self.base_index = BaseIndex(held_up_to(INDEX_ROWS, self.driver_rows))
        self._changed: dict = {}  # the epoch being committed: relation -> (decl, plus, minus)
        self._base_deltas: dict[str, BaseDelta] = {}  # input -> its base as of self.snap
        self._pending_bases: dict[str, BaseDelta] = {}  # ... as of the epoch being committed
        # stream name -> the last micro-batch applied (levelflow.streaming), as the manifest
        # of the current epoch records it
        self.streams: dict[str, int] = {}

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def bootstrap(cls, spark, program, factdir=None, statedir: str | os.PathLike | None = None,
                  *, inputs=None, progress=None, **options) -> IncrementalSession:
        """Return a session whose epoch 0 is the program evaluated from scratch on `factdir`.

        `inputs` maps input relations to DataFrames read instead of their fact files (once:
        the state keeps what they held then). `progress` (engine.progress) shows the facts
        read, the tasks run and the state written.
        """
        from levelflow.engine.checks import check_fact_files
        from levelflow.engine.incremental.backends.warm import warm_driver_and_counts
        from levelflow.engine.spark_io import with_frames

        pt, text = load_tasks(program)
        # DataFrames in `inputs` are read once, below, and cut: the state keeps that snapshot.
        prog = with_frames(pt.program, inputs or {})
        factdir = Path.cwd() if factdir is None else factdir
        check_fact_files(prog, factdir)
        state = (statedir if isinstance(statedir, StateDir) or statedir is None
                 else StateDir(statedir))
        driver_rows = _resolved(options, spark)
        if state is not None:  # the stored relations the driver reads itself
            state.held_rows = held_up_to(HELD_ROWS, driver_rows)
        if state is not None:
            state.refuse_existing()
        snap = empty_snapshot(spark, prog, counted_relations(pt))
        base, indexed = {}, {}
        for i, (name, io) in enumerate(prog.inputs.items(), 1):
            if progress is not None:
                progress.phase(f"reading facts of {name} ({i} of {len(prog.inputs)})")
            decl = prog.decls[name]
            ver = Versions(decl, snap.base[name], 0)
            df, rows, held = read_base(spark, decl, io, factdir, driver_rows)
            if held is not None:
                indexed[name] = held
            if rows:
                ver.set_change(df, rows, df, rows, None, 0)
            base[name] = ver
        session = cls(spark, pt, text, snap, state, **options)
        if progress is not None:
            progress.phase("evaluating epoch 0")
        # Refused (a task's memory, --max-tuples, a deadline), it leaves no half-made state.
        with contextlib.ExitStack() as stack:
            if state is not None:
                stack.enter_context(state.first_epoch())
                # The base facts go to disk while the tasks run, for the commit to take.
                stack.enter_context(state.writing_early(
                    prog, {n: v.new for n, v in base.items()}, snap.counted))
            session.last = session._run_epoch(base, bootstrap=True, progress=progress)
        # What the first epoch would load (a subsumptive task's frames, a counted task's
        # counts in the driver), loaded now while the user waits anyway.
        warm_driver_and_counts(session, progress=progress)
        session.base_index.seed(session.snap.epoch, indexed)
        session.base_index.prefetch(session.snap, prog.decls)
        return session

    @classmethod
    def open(cls, spark, statedir: str | os.PathLike, *, progress=None, warm: bool = True,
             **options) -> IncrementalSession:
        """Return a session on the current epoch of an existing state directory; with `warm`,
        its tasks' states loaded where their epochs run (backends/warm.py, said on `progress`)."""
        from levelflow.engine.incremental.backends.warm import warm as warm_states
        from levelflow.tasks import build_tasks, parse_stored

        state = statedir if isinstance(statedir, StateDir) else StateDir(statedir)
        state.held_rows = held_up_to(HELD_ROWS, _resolved(options, spark))
        state.hold_readers_lock()  # before reading: the epoch read stays on disk while we live
        data = state.manifest()
        pt = build_tasks(parse_stored(data["program"], data["program_file"]))
        options.setdefault("plan", data.get("plan", "auto"))  # as the state was bootstrapped
        session = cls(spark, pt, data["program"], state.load(spark, pt.program), state, **options)
        session.streams = dict(data.get("streams", {}))
        session.base_index.prefetch(session.snap, pt.program.decls)
        if warm:
            warm_states(session, progress)
        return session

    def staged(self, program_tasks: ProgramTasks, program_text: str, snap) -> IncrementalSession:
        """Return a session on another program and snapshot with this one's options and state
        directory (a program change's epoch runs on it before it is adopted)."""
        return type(self)(self.spark, program_tasks, program_text, snap, self.statedir,
                          scheduler=self.scheduler, jobs=self.jobs, mode=self.mode,
                          switch=self.switch, switch_floor=self.switch_floor,
                          large_change=self.large_change, max_tuples=self.max_tuples,
                          driver_rows=self.driver_rows, epoch_timeout=self.epoch_timeout,
                          plan=self.plan)

    # -- changes -------------------------------------------------------------------------------

    def _op(self, sign: int, relation: str, row) -> Op:
        if row is None:
            name, values = parse_literal(self.program, relation)
        else:
            name, values = relation, coerce_row(self.program, relation, row)
        op = Op(sign, name, values)
        self.pending.append(op)
        return op

    def insert(self, relation: str, row=None) -> Op:
        """Return the queued op inserting `row` into input `relation` (or a literal `r(1,"a")`)."""
        return self._op(+1, relation, row)

    def remove(self, relation: str, row=None) -> Op:
        """Return the queued op removing `row` from input `relation` (or a literal `r(1,"a")`)."""
        return self._op(-1, relation, row)

    def apply(self, inserts=None, removes=None, **options) -> EpochResult:
        """Return the EpochResult of one epoch removing, then inserting, the rows of the
        DataFrames given per input relation (with any pending ops before them).

        A DataFrame that does not fit its relation is refused in one line and nothing is
        applied; nor is anything if the epoch fails (its rows are not left queued). `options`
        go to `commit`.
        """
        from levelflow.engine.incremental.frame_changes import ops_of_frames

        ops = ops_of_frames(self.program, inserts or {}, removes or {})
        before = len(self.pending)
        self.pending.extend(ops)
        try:
            return self.commit(**options)
        except BaseException:
            del self.pending[before:before + len(ops)]
            raise

    def extend(self, ops) -> None:
        """Queue already validated ops (from update files)."""
        self.pending.extend(ops)

    def has_base(self, relation: str, row: tuple) -> bool:
        """Return whether `row` is a base fact of `relation` once the pending ops are applied."""
        present = self._present(relation, [row])
        state = row in present
        for op in self.pending:
            if op.relation == relation and op.row == row:
                state = op.sign > 0
        return state

    def _present(self, relation: str, rows) -> set[tuple]:
        """Return which of `rows` are base facts of `relation` now (net_change.py)."""
        return present(self, relation, rows)

    def _net_change(self, ops, new_constants: bool = False
                    ) -> tuple[dict[str, Versions], list[str]]:
        """Return per input relation its base Versions with the net change set, and notes;
        `ord`'s symbol table numbers the symbols the ops bring, and with `new_constants` (a
        program change) the program's new constants (engine/ordinals.py)."""
        from levelflow.engine.ordinals import new_symbol_ops

        return net_change(self, list(ops) + new_symbol_ops(self, ops, new_constants))

    # -- epochs --------------------------------------------------------------------------------

    def commit(self, *, before_switch=None, progress=None, compact: bool = True,
               streams: dict[str, int] | None = None) -> EpochResult:
        """Return the EpochResult of applying the pending ops as one epoch (atomic).

        `progress` (engine.progress) is told which tasks start and finish, as `run` tells it.
        With `compact`, chains past the policy are then compacted (`compact()`); a caller
        that answers first (serve) passes False and compacts after. `streams` (name -> batch
        id) is recorded in the epoch's manifest, in the same commit (levelflow.streaming).
        """
        ops, self.pending = self.pending, []
        self._changed, self._pending_bases = {}, {}
        try:
            with self._writing():  # before reading the old base: it may have moved on
                base, notes = self._net_change(ops)
                result = self._run_epoch(base, before_switch=before_switch, progress=progress,
                                         streams=streams)
        except BaseException:
            self.pending = ops + self.pending  # nothing applied: the ops stay queued
            raise
        self.base_index.committed(self.snap.epoch, self._changed)
        self._base_deltas.update(self._pending_bases)
        result.notes[:0] = notes
        if compact:
            try:
                self.compact()
            except StateError as e:  # the epoch is applied; its chains stay as they are
                result.notes.append(f"note: not compacted: {e}")
        return result

    def replace_program(self, program, factdir=None, *, progress=None,
                        before_switch=None) -> EpochResult:
        """Return the EpochResult of moving to `program` (a path or ProgramTasks) with the
        pending ops, as one epoch; new input relations take their facts from `factdir`."""
        from levelflow.engine.incremental.program_change import replace_program

        return replace_program(self, program, factdir, progress=progress,
                               before_switch=before_switch)

    def compact(self, *, force: bool = False, before_swap=None) -> list[str]:
        """Return the relations (`rel/NAME`, `base/NAME`) whose segment chains were folded
        into new bases: those past the policy (segments.py), or every chain with `force`."""
        from levelflow.engine.incremental.state.compact import compact

        if self.statedir is None:
            return []
        with self._writing():
            done = compact(self.spark, self.statedir, self.program, force=force,
                           before_swap=before_swap)
            if done:  # read the new bases from now on; then the old chains may go
                held, before = self.snap.arranged, self.snap
                self.snap = self.statedir.load(self.spark, self.program, check=False)
                rekey_frames(self.spark, before, self.snap)
                self.snap.arranged = _restarted(held)
                self.statedir.collect_garbage()
        return done

    def discard(self) -> list[Op]:
        """Return and drop the pending ops."""
        ops, self.pending = self.pending, []
        return ops

    @contextlib.contextmanager
    def _writing(self):
        """Hold the state's writer lock for the block, checking no other writer moved it."""
        if self.statedir is None:
            yield
            return
        with self.statedir.lock():
            if self.statedir.exists() and self.statedir.current() != self.snap.epoch:
                raise StateError(f"{self.statedir.path}: error: the state moved to epoch "
                                 f"{self.statedir.current()} under this session (epoch "
                                 f"{self.snap.epoch}); reopen it")
            yield

    def _run_epoch(self, base, *, bootstrap: bool = False, before_switch=None,
                   progress=None, change=None, streams=None) -> EpochResult:
        """Return the result of one epoch (run inside _writing); the snapshot is replaced only
        if it all succeeded."""
        t0 = time.perf_counter()
        epoch = Epoch(self.spark, self.pt, self.snap, base, mode=self.mode, switch=self.switch,
                      switch_floor=self.switch_floor, bootstrap=bootstrap,
                      large_change=self.large_change, progress=progress,
                      arranged=self.arranged, change=change, max_tuples=self.max_tuples,
                      driver_rows=self.driver_rows, timeout=self.epoch_timeout,
                      plan=self.plan)
        epoch.run(self.scheduler, self.jobs)
        snap, changed, changed_base = epoch.snapshot()
        t_write = time.perf_counter()
        if self.statedir is not None:
            if progress is not None:
                progress.phase(f"writing epoch {snap.epoch} to the state")
            held, before = snap.arranged, snap
            marks = {"streams": {**self.streams, **streams}} if streams else {}
            if bootstrap and self.plan != "auto":  # kept by every later manifest
                marks["plan"] = self.plan
            snap = self.statedir.commit(self.spark, self.program, self.program_text, snap,
                                        changed, changed_base, before_switch=before_switch,
                                        collect=False, extra=marks)
            _keep_held(before, snap)
            rekey_frames(self.spark, before, snap)  # the driver's frames hold the same tuples
            # The files hold the same tuples as the executors' copies; the Spark-side logs
            # start again from them (their old bases may be files of collected epochs).
            snap.arranged = _restarted(held)
        t_end = time.perf_counter()
        result = epoch.result(t_end - t0)
        result.write_seconds = t_end - t_write if self.statedir is not None else 0.0
        if self.statedir is not None:  # an epoch directory the commit set aside
            result.notes += self.statedir.notes
            self.statedir.notes.clear()
        if change is not None:  # a program change: what became of each task
            result.status = change.statuses(epoch)
        self.snap = snap
        self.streams.update(streams or {})
        self.last = result
        if self.statedir is not None:  # after the swap: nothing reads the old epoch's files
            self.statedir.collect_garbage()
        return result

    def close(self) -> None:
        """Let later commits by others delete this session's epoch files; read nothing after."""
        from levelflow.engine.plans.resident import forget

        forget(h.lineage for h in self.snap.arranged.values())
        if self.statedir is not None:
            self.statedir.release_readers_lock()

    # -- reading -------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """Return the current epoch number."""
        return self.snap.epoch

    def relation(self, name: str):
        """Return the current tuples of relation `name`, columns named as its attributes."""
        from levelflow.engine.spark_io import named

        if name not in self.program.decls:
            raise KeyError(f"no relation named {name!r}")
        return named(self.program.decls[name], self.snap.tuples(name))

    def size(self, name: str) -> int:
        """Return the number of tuples of relation `name`."""
        if name not in self.program.decls:
            raise KeyError(f"no relation named {name!r}")
        return self.snap.rows[name]

    def write_outputs(self, outdir, jobs: int = 1) -> dict[str, int]:
        """Return tuple counts per output relation after writing them all to `outdir`."""
        from levelflow.engine.outputs import write_outputs

        rels = {n: self.snap.tuples(n) for n in self.program.outputs}
        return write_outputs(self.program, rels, outdir, jobs=jobs)

