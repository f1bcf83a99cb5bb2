"""The maintained state: every relation with what incremental evaluation needs, per epoch.

In memory a `Snapshot` holds, per relation, its tuples (columns c0..) — with a derivation count
column `_cnt` for relations of counted (non-recursive) tasks, a rank column `_it` for the others
(DRed) — and, per input relation, its base facts apart. On disk a `StateDir` is

    STATEDIR/CURRENT             the current epoch and its manifest's checksum (replaced
                                 atomically, last: durable.py)
    STATEDIR/LOCK                flock'ed by the one writer
    STATEDIR/READERS             flock'ed shared by every open session (its epoch's files stay)
    STATEDIR/epochs/<n>/manifest.json
    STATEDIR/epochs/<n>/rel/<name>/    Parquet: a base of a relation written in epoch n
    STATEDIR/epochs/<n>/base/<name>/   Parquet: a base of an input's base facts
    STATEDIR/epochs/<n>/seg/rel/<name>/, seg/base/<name>/   a delta segment of epoch n

The manifest names, per relation, the epoch directory holding its base and the chain of
segments since (segments.py), so unchanged relations are never copied and a changed one costs
what changed: a commit appends a segment when the epoch's update says which stored rows it
removed and added (TaskUpdate.stored), else writes a new base. `compact` folds long chains
into new bases of the same epoch, swapping its manifest by one rename.
Each manifest holds the program text of its epoch (a program change is an epoch like any
other, so the state's program is the current epoch's).
Changes: one new epoch directory per commit, then CURRENT, each flushed to disk first.
What needs no Spark (CURRENT, manifests, commit records, switching) is files.py's `StateFiles`.
"""

from __future__ import annotations

import contextlib
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from levelflow.engine.evaluate import RANK
from levelflow.engine.incremental.backends.driver_rows import (
    LazyFrame,
    frame_of_file,
    frame_of_table,
    held_empty,
)
from levelflow.engine.incremental.state.durable import fsync_path
from levelflow.engine.incremental.state.errors import StateError
from levelflow.engine.incremental.state.files import FORMAT, StateFiles
from levelflow.engine.incremental.state.integrity import cause
from levelflow.engine.incremental.state.local_base import LOCAL_BASE_ROWS, local_base
from levelflow.engine.incremental.state.segments import chain_rows, compose
from levelflow.engine.incremental.state.snapshot import COUNT, Snapshot
from levelflow.engine.incremental.state.write import (
    EarlyWrites,
    local_table,
    plan_writes,
    read_back,
    stored_schema,
    write_all,
)
from levelflow.engine.types import column_names
from levelflow.errors import LevelflowError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from levelflow.tasks.ast import Program

__all__ = ["StateDir", "StateError"]

# A stored relation of at most this many rows (base and chain) is read by the driver when the
# state is loaded: an epoch in the driver (plans/driver.py) finds it there.
HELD_ROWS = 50_000


class StateDir(StateFiles):
    """A state directory on disk: read the current epoch, write the next one atomically.
    Relations of up to `held_rows` rows are read by the driver (a session sets its own)."""

    held_rows = HELD_ROWS
    early: EarlyWrites | None = None  # a first epoch's base facts, written while it runs

    def load(self, spark: SparkSession, program: Program, *, check: bool = True,
             epoch: int | None = None) -> Snapshot:
        """Return an epoch's snapshot (the current one by default), relations read lazily from
        Parquet after verifying every file against the manifest (unless `check` is False)."""
        data = self.manifest(epoch)
        if check:
            self.verify(spark, program, data)
        counted = set(data["counted"])
        rel, rows, where = {}, {}, {}
        for name, decl in program.decls.items():
            info = data["relations"][name]
            extra = COUNT if name in counted else RANK
            where[name], rows[name] = info["epoch"], int(info["rows"])
            rel[name] = (held_empty(spark, decl, extra) if info["epoch"] is None
                         else self._read(spark, program, name, "rel", info, counted))
        base, base_rows, base_where = {}, {}, {}
        for name in program.inputs:
            info = data["base"][name]
            base_where[name], base_rows[name] = info["epoch"], int(info["rows"])
            base[name] = (held_empty(spark, program.decls[name]) if info["epoch"] is None
                          else self._read(spark, program, name, "base", info, counted))
        max_rank = {n: int(r) for n, r in data.get("max_rank", {}).items()}
        return Snapshot(int(data["epoch"]), rel, base, rows, base_rows, counted,
                        dict(data.get("scratch_seconds", {})), where, base_where,
                        max_rank=max_rank, labelled=set(data.get("labelled", [])))

    def _read(self, spark, program: Program, name: str, kind: str, info: dict, counted: set):
        """Return the DataFrame of one stored relation, built on first use: its base, then its
        segments applied (each read lists its files in the JVM: 0.3 s an epoch for relations
        that a warm session's next epoch mostly never reads)."""
        path = self.epochs / str(info["epoch"]) / kind / name
        schema = stored_schema(program, name, kind, counted)
        cols = column_names(program.decls[name].arity)
        if chain_rows(info) + int(info.get("base_rows", info["rows"])) <= HELD_ROWS:
            # Small: read by the driver now (pyarrow), its rows kept beside the frame. A file
            # that cannot be read is left to the lazy frame: found where it is used (a repair
            # that rebuilds the relation never reads it).
            try:
                table = local_base(self.epochs, kind, name, info, None, schema, cols)
            except (OSError, pa.ArrowException):
                table = None
            if table is not None:
                return frame_of_table(spark, table, schema)
        elif chain_rows(info) + int(info.get("base_rows", info["rows"])) <= \
                min(self.held_rows, LOCAL_BASE_ROWS):
            # Within what the session runs in the driver: read there too, on first use.
            return frame_of_file(spark, lambda: local_base(self.epochs, kind, name, info, None,
                                                           schema, cols), schema)
        return LazyFrame(lambda: compose(spark, spark.read.schema(schema).parquet(str(path)),
                                         self.epochs, kind, name, info, schema, cols))

    def commit(self, spark: SparkSession, program: Program, program_text: str, snap: Snapshot,
               changed: set[str], changed_base: set[str], extra: dict | None = None,
               before_switch=None, collect: bool = True) -> Snapshot:
        """Return `snap` as re-read from disk after writing it as the next epoch and switching.

        Only relations in `changed` / `changed_base` are written; the rest stay where they are.
        What is written is read back and verified before the switch. Until CURRENT is
        replaced, the previous epoch stays current and intact; old epochs are deleted only
        after the switch, and the last `keep` epochs always stay.
        """
        prev = self.manifest() if self.exists() else None
        epoch = int(prev["epoch"]) + 1 if prev is not None else 0
        early, self.early = self.early, None  # a first epoch's (writing_early): its directory
        if early is not None:
            tmp = early.tmp
        else:
            self.epochs.mkdir(parents=True, exist_ok=True)
            tmp = self.epochs / f".tmp-{epoch}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
        try:
            relations = self._write_all(spark, program, snap, tmp, epoch, changed,
                                        changed_base, prev, early)
            manifest = {
                "format": FORMAT, "epoch": epoch, "created": time.time(),
                "program_file": program.file, "program": program_text,
                "counted": sorted(snap.counted), **relations,
                "scratch_seconds": snap.scratch_seconds, "max_rank": snap.max_rank,
                "labelled": sorted(snap.labelled), "keep": self.keep_epochs(prev),
                **_carried(prev), **(extra or {}),
            }
            digest = self.publish(tmp, epoch, manifest)
        except BaseException as e:
            if early is not None:  # its writes end before their directory goes
                early.wait()
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, Exception) and not isinstance(e, LevelflowError):
                raise StateError(f"{self.path}: error: cannot write epoch {epoch} "
                                 f"({cause(e)}); the state is unchanged at epoch "
                                 f"{epoch - 1}") from None
            raise
        if before_switch is not None:
            before_switch()  # a test hook: a crash here must leave the old epoch current
        self.switch(epoch, digest)
        if prev is None:  # a new state directory: its own entry on disk too
            fsync_path(self.path.resolve().parent)
        if collect:  # else the caller collects once it dropped the old snapshot
            self.collect_garbage()
        return self.load(spark, program, check=False)  # just verified; the rest was on open

    def _write_all(self, spark, program: Program, snap: Snapshot, tmp: Path, epoch: int,
                   changed: set[str], changed_base: set[str], prev: dict | None,
                   early: EarlyWrites | None = None) -> dict:
        """Return the manifest's `relations` and `base` tables after writing what changed
        into `tmp` (but what `early` wrote there) and reading it back: a mismatch raises
        StateError and nothing switches."""
        tables, written, frames = plan_writes(program, snap, tmp, epoch, changed, changed_base,
                                              prev)
        write_all(frames, early)
        self.read_back(spark, snap.epoch - 1, written, early)
        return tables

    def read_back(self, spark, current: int, written: list,
                  early: EarlyWrites | None = None) -> None:
        """Verify what a commit wrote as read back (write.read_back; `current`: the epoch a
        mismatch leaves current)."""
        read_back(spark, current, written, early)

    @contextlib.contextmanager
    def writing_early(self, program: Program, frames: dict[str, object], counted: set[str]):
        """Within a new state's first epoch (first_epoch): write the base facts the driver
        holds (`frames`: input -> its frame) while the block runs, for its commit to take
        (write.EarlyWrites: the write and read back of 3M edges, 0.15-0.3 s, off the commit);
        also each one's relation where no rule adds to it (its facts, each counted once),
        hashed as read_back would. Left untaken (a refused epoch), they are removed when their
        writes end."""
        import numpy as np

        derived = {a.relation for rule in (*program.rules, *program.subsumptions)
                   for a in rule.heads}
        tables = {}
        for name, df in frames.items():
            table = local_table(df, stored_schema(program, name, "base", set()))
            if table is None or not table.num_rows:
                continue
            tables[Path("base", name)] = table
            if name in counted and name not in derived and program.decls[name].arity:
                tables[Path("rel", name)] = table.append_column(
                    COUNT, pa.array(np.ones(table.num_rows, np.int64)))
        if tables:
            self.epochs.mkdir(parents=True, exist_ok=True)
            tmp = self.epochs / f".tmp-0-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
            self.early = EarlyWrites(tmp, {tmp / p: t for p, t in tables.items()},
                                     {tmp / p for p in tables if p.parts[0] == "rel"})
        try:
            yield
        finally:
            early, self.early = self.early, None
            if early is not None:  # no commit took it
                early.wait()
                shutil.rmtree(early.tmp, ignore_errors=True)

def _carried(prev: dict | None) -> dict:
    """Return what every later manifest carries on from the previous one: the micro-batches of
    each stream applied so far (levelflow.streaming), the plan the state keeps its recursive
    tasks under when not auto's choice."""
    return {k: prev[k] for k in ("streams", "plan") if k in prev} if prev is not None else {}
