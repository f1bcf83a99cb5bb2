"""The maintained state: every relation with what incremental evaluation needs, per epoch.

In memory a `Snapshot` holds, per relation, its tuples (columns c0..) — with a derivation count
column `_cnt` for relations of counted (non-recursive) tasks, a rank column `_it` for the others
(DRed) — and, per input relation, its base facts apart. On disk a `StateDir` is

    STATEDIR/CURRENT             the current epoch number (replaced atomically, last)
    STATEDIR/LOCK                flock'ed by the one writer
    STATEDIR/READERS             flock'ed shared by every open session (its epoch's files stay)
    STATEDIR/epochs/<n>/manifest.json
    STATEDIR/epochs/<n>/rel/<name>/    Parquet, only for relations that changed in epoch n
    STATEDIR/epochs/<n>/base/<name>/   Parquet, only for base facts that changed in epoch n

The manifest names the epoch directory holding each relation, so unchanged relations are never
copied. Constant: the program text. Changes: one new epoch directory per commit, then CURRENT.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from levelflow.engine.evaluate import RANK
from levelflow.engine.types import empty_relation, relation_schema
from levelflow.errors import LevelflowError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from levelflow.tasks.ast import Program

# 3: ranks keep their invariant: the relations of a recursive task share one rank scale, and
# new ranks are saved even when the tuples did not change. A format-2 state can hold ranks that
# break the invariant (a later deletion then keeps unsupported tuples), so it is refused.
FORMAT = "levelflow-state/3"
COUNT = "_cnt"


class StateError(LevelflowError):
    """A state directory is missing, locked, corrupt or made by another program."""


@dataclass
class Snapshot:
    """One epoch's relations (tuples + `_cnt` or `_it`), base facts and bookkeeping."""

    epoch: int
    rel: dict  # relation name -> DataFrame (c0.. [+ _cnt])
    base: dict  # input relation name -> DataFrame of base facts (c0..)
    rows: dict[str, int]
    base_rows: dict[str, int]
    counted: set[str]
    scratch_seconds: dict[str, float] = field(default_factory=dict)  # task name -> seconds
    where: dict[str, int | None] = field(default_factory=dict)  # relation -> epoch dir
    base_where: dict[str, int | None] = field(default_factory=dict)
    pieces: dict[str, int] = field(default_factory=dict)  # relation -> cut pieces in its union
    max_rank: dict[str, int] = field(default_factory=dict)  # ranked relation -> highest rank

    def tuples(self, name: str) -> DataFrame:
        """Return the tuples of relation `name` (columns c0.., no count or rank)."""
        return self.rel[name].drop(COUNT if name in self.counted else RANK)


def empty_snapshot(spark: SparkSession, program: Program, counted: set[str]) -> Snapshot:
    """Return the epoch -1 snapshot: every relation and every base relation empty."""
    import pyspark.sql.functions as F

    rel = {}
    for name, decl in program.decls.items():
        extra = COUNT if name in counted else RANK
        rel[name] = empty_relation(spark, decl).withColumn(extra, F.lit(0).cast("bigint"))
    base = {name: empty_relation(spark, program.decls[name]) for name in program.inputs}
    return Snapshot(-1, rel, base, dict.fromkeys(program.decls, 0),
                    dict.fromkeys(program.inputs, 0), set(counted),
                    where=dict.fromkeys(program.decls), base_where=dict.fromkeys(program.inputs),
                    max_rank=dict.fromkeys(set(program.decls) - set(counted), 0))


class StateDir:
    """A state directory on disk: read the current epoch, write the next one atomically."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._reader_fd: int | None = None

    def hold_readers_lock(self) -> None:
        """Hold a shared lock on READERS until this object goes: no commit deletes what we read.

        Sessions read their epoch's Parquet lazily, so a commit by another process must not
        delete the previous epoch's files while a session (a shell, an API user) still reads
        them; it leaves them for a later commit instead.
        """
        if self._reader_fd is not None:
            return
        fd = self._lock_file("READERS")
        fcntl.flock(fd, fcntl.LOCK_SH)
        self._reader_fd = fd
        self._reader_closer = weakref.finalize(self, os.close, fd)

    def release_readers_lock(self) -> None:
        """Drop the shared READERS lock (the session will read nothing more)."""
        if self._reader_fd is not None:
            self._reader_closer()
            self._reader_fd = None

    def _lock_file(self, name: str) -> int:
        """Return an open descriptor of the lock file `name`, creating the directory."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            return os.open(self.path / name, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StateError(f"{self.path}: error: cannot use as a state directory "
                             f"({e.strerror})") from None

    @property
    def epochs(self) -> Path:
        return self.path / "epochs"

    def exists(self) -> bool:
        """Return whether the directory holds a committed epoch."""
        return (self.path / "CURRENT").is_file()

    def check_usable(self) -> None:
        """Raise StateError if the path exists but is not a directory (checked before Spark)."""
        if self.path.exists() and not self.path.is_dir():
            raise StateError(f"{self.path}: error: not a directory")

    def current(self) -> int:
        """Return the current epoch number; raise StateError if there is none."""
        try:
            text = (self.path / "CURRENT").read_text().strip()
            return int(text)
        except (OSError, ValueError):
            raise StateError(f"{self.path}: error: not a levelflow state directory (no valid "
                             f"CURRENT file)") from None

    def manifest(self, epoch: int | None = None) -> dict:
        """Return the manifest of an epoch (the current one by default)."""
        epoch = self.current() if epoch is None else epoch
        path = self.epochs / str(epoch) / "manifest.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise StateError(f"{path}: error: cannot read manifest ({e})") from None
        if data.get("format") != FORMAT:
            raise StateError(f"{path}: error: unknown state format {data.get('format')!r} "
                             f"(expected {FORMAT!r}; recreate it with levelflow run --state)")
        return data

    @contextlib.contextmanager
    def lock(self):
        """Hold the writer lock for the block; raise StateError if another writer has it."""
        fd = self._lock_file("LOCK")
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StateError(f"{self.path}: error: the state is locked by another "
                                 f"writer") from None
            yield
        finally:
            os.close(fd)

    def load(self, spark: SparkSession, program: Program) -> Snapshot:
        """Return the current epoch's snapshot, relations read lazily from Parquet."""
        import pyspark.sql.functions as F
        from pyspark.sql.types import LongType, StructField

        data = self.manifest()
        epoch = int(data["epoch"])
        counted = set(data["counted"])
        rel, rows, where = {}, {}, {}
        for name, decl in program.decls.items():
            info = data["relations"][name]
            extra = COUNT if name in counted else RANK
            schema = relation_schema(decl).add(StructField(extra, LongType(), True))
            e = info["epoch"]
            where[name], rows[name] = e, int(info["rows"])
            if e is None:
                rel[name] = empty_relation(spark, decl).withColumn(extra,
                                                                   F.lit(0).cast("bigint"))
            else:
                rel[name] = spark.read.schema(schema).parquet(
                    str(self.epochs / str(e) / "rel" / name))
        base, base_rows, base_where = {}, {}, {}
        for name in program.inputs:
            info = data["base"][name]
            e = info["epoch"]
            base_where[name], base_rows[name] = e, int(info["rows"])
            base[name] = (empty_relation(spark, program.decls[name]) if e is None else
                          spark.read.schema(relation_schema(program.decls[name])).parquet(
                              str(self.epochs / str(e) / "base" / name)))
        max_rank = {n: int(r) for n, r in data.get("max_rank", {}).items()}
        return Snapshot(epoch, rel, base, rows, base_rows, counted,
                        dict(data.get("scratch_seconds", {})), where, base_where,
                        max_rank=max_rank)

    def commit(self, spark: SparkSession, program: Program, program_text: str, snap: Snapshot,
               changed: set[str], changed_base: set[str], extra: dict | None = None,
               before_switch=None) -> Snapshot:
        """Return `snap` as re-read from disk after writing it as the next epoch and switching.

        Only relations in `changed` / `changed_base` are written; the rest stay where they are.
        Until CURRENT is replaced, the previous epoch stays current and intact.
        """
        epoch = self.current() + 1 if self.exists() else 0
        self.epochs.mkdir(parents=True, exist_ok=True)
        tmp = self.epochs / f".tmp-{epoch}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            where, base_where = dict(snap.where), dict(snap.base_where)
            for name in sorted(changed):
                if snap.rows[name]:
                    snap.rel[name].write.parquet(str(tmp / "rel" / name))
                    where[name] = epoch
                else:
                    where[name] = None
            for name in sorted(changed_base):
                if snap.base_rows[name]:
                    snap.base[name].write.parquet(str(tmp / "base" / name))
                    base_where[name] = epoch
                else:
                    base_where[name] = None
            manifest = {
                "format": FORMAT, "epoch": epoch, "created": time.time(),
                "program_file": program.file, "program": program_text,
                "counted": sorted(snap.counted),
                "relations": {n: {"epoch": where[n], "rows": snap.rows[n]}
                              for n in program.decls},
                "base": {n: {"epoch": base_where[n], "rows": snap.base_rows[n]}
                         for n in program.inputs},
                "scratch_seconds": snap.scratch_seconds,
                "max_rank": snap.max_rank,
                **(extra or {}),
            }
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
            final = self.epochs / str(epoch)
            if final.exists():  # left by a run killed between the rename and the switch
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if before_switch is not None:
            before_switch()  # a test hook: a crash here must leave the old epoch current
        cur = self.path / f".CURRENT.{uuid.uuid4().hex[:8]}"
        cur.write_text(f"{epoch}\n")
        os.replace(cur, self.path / "CURRENT")
        self.collect_garbage()
        return self.load(spark, program)

    def collect_garbage(self) -> None:
        """Delete epoch directories the current manifest no longer references (and temp dirs).

        Skipped while another session holds the readers lock: its epoch's files may be among
        them. The next commit made with no other reader open deletes them.
        """
        if not self.exists():
            return
        fd = self._reader_fd if self._reader_fd is not None else self._lock_file("READERS")
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            self._delete_unreferenced()
        finally:
            if fd == self._reader_fd:
                # Linux drops the shared lock while trying to convert it; take it back.
                fcntl.flock(fd, fcntl.LOCK_SH)
            else:
                os.close(fd)

    def _delete_unreferenced(self) -> None:
        """Delete what the current manifest does not name: old epochs, or relations in them."""
        data = self.manifest()
        current = str(data["epoch"])
        named = {("rel", n, str(i["epoch"])) for n, i in data["relations"].items()}
        named |= {("base", n, str(i["epoch"])) for n, i in data["base"].items()}
        for child in self.epochs.iterdir():
            if child.name == current:
                continue
            referenced = False
            for kind in ("rel", "base"):
                for sub in sorted((child / kind).glob("*")):
                    if (kind, sub.name, child.name) in named:
                        referenced = True
                    else:  # e.g. epoch 0's `path` once a later epoch rewrote it
                        shutil.rmtree(sub, ignore_errors=True)
            if not referenced:
                shutil.rmtree(child, ignore_errors=True)
