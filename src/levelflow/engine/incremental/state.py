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
copied. Each manifest holds the program text of its epoch (a program change is an epoch like
any other, so the state's program is the current epoch's; older states read the same way).
Changes: one new epoch directory per commit, then CURRENT.
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
from levelflow.engine.incremental.integrity import (
    Stored,
    cause,
    observed,
    observed_result,
    part_files,
    scan,
    verify,
)
from levelflow.engine.types import empty_relation, relation_schema
from levelflow.errors import LevelflowError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from levelflow.tasks.ast import Program

# 3: ranks keep their invariant: the relations of a recursive task share one rank scale, and
# new ranks are saved even when the tuples did not change. A format-2 state can hold ranks that
# break the invariant (a later deletion then keeps unsupported tuples), so it is refused.
# 4: each stored relation records its part files, row counts and checksums (integrity.py). A
# format-3 state is still read: its row counts are verified, its content cannot be.
FORMAT = "levelflow-state/4"
READABLE = ("levelflow-state/3", FORMAT)
COUNT = "_cnt"
KEEP = 2  # epochs garbage collection keeps by default: the current one and the one before


def _schema(program: Program, name: str, kind: str, counted: set[str]):
    """Return the Parquet schema of a stored relation (`rel`: + _cnt or _it) or base facts."""
    from pyspark.sql.types import LongType, StructField

    schema = relation_schema(program.decls[name])
    if kind == "rel":
        schema = schema.add(StructField(COUNT if name in counted else RANK, LongType(), True))
    return schema


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
    # task name -> arranged.Held: where the task's state also lives on the executors
    arranged: dict = field(default_factory=dict)

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

    def __init__(self, path: str | os.PathLike, keep: int | None = None) -> None:
        self.path = Path(path)
        if keep is not None and keep < 1:
            raise StateError(f"{self.path}: error: must keep at least 1 epoch, got {keep}")
        self.keep = keep  # None: as the current manifest says (KEEP if it says nothing)
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
        if data.get("format") not in READABLE:
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

    def stored(self, program: Program, data: dict) -> list[Stored]:
        """Return every relation directory an epoch's manifest names, with what it recorded."""
        items = []
        for kind, table in (("rel", data["relations"]), ("base", data["base"])):
            for name, info in table.items():
                if info["epoch"] is None or name not in program.decls:
                    continue
                label = f"relation {name}" if kind == "rel" else f"base facts of {name}"
                items.append(Stored(label, self.epochs / str(info["epoch"]) / kind / name,
                                    _schema(program, name, kind, set(data["counted"])),
                                    int(info["rows"]), info.get("checksum"),
                                    info.get("files")))
        return items

    def verify(self, spark: SparkSession | None, program: Program, data: dict) -> None:
        """Raise StateError naming the first damaged file of an epoch; with no session, the
        listing only (missing, extra or resized part files), which needs no Spark."""
        problems = verify(spark, self.stored(program, data))
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise StateError(f"{problems[0]}{more}; the state is damaged and was not changed "
                             f"(see `levelflow state check {self.path}`)")

    def load(self, spark: SparkSession, program: Program, *, check: bool = True,
             epoch: int | None = None) -> Snapshot:
        """Return an epoch's snapshot (the current one by default), relations read lazily from
        Parquet after verifying every file against the manifest (unless `check` is False)."""
        import pyspark.sql.functions as F

        data = self.manifest(epoch)
        if check:
            self.verify(spark, program, data)
        counted = set(data["counted"])
        rel, rows, where = {}, {}, {}
        for name, decl in program.decls.items():
            info = data["relations"][name]
            extra = COUNT if name in counted else RANK
            where[name], rows[name] = info["epoch"], int(info["rows"])
            rel[name] = (empty_relation(spark, decl).withColumn(extra, F.lit(0).cast("bigint"))
                         if info["epoch"] is None else self._read(spark, program, name, "rel",
                                                                  info, counted))
        base, base_rows, base_where = {}, {}, {}
        for name in program.inputs:
            info = data["base"][name]
            base_where[name], base_rows[name] = info["epoch"], int(info["rows"])
            base[name] = (empty_relation(spark, program.decls[name]) if info["epoch"] is None
                          else self._read(spark, program, name, "base", info, counted))
        max_rank = {n: int(r) for n, r in data.get("max_rank", {}).items()}
        return Snapshot(int(data["epoch"]), rel, base, rows, base_rows, counted,
                        dict(data.get("scratch_seconds", {})), where, base_where,
                        max_rank=max_rank)

    def _read(self, spark, program: Program, name: str, kind: str, info: dict, counted: set):
        """Return the DataFrame of one stored relation directory."""
        path = self.epochs / str(info["epoch"]) / kind / name
        return spark.read.schema(_schema(program, name, kind, counted)).parquet(str(path))

    def commit(self, spark: SparkSession, program: Program, program_text: str, snap: Snapshot,
               changed: set[str], changed_base: set[str], extra: dict | None = None,
               before_switch=None) -> Snapshot:
        """Return `snap` as re-read from disk after writing it as the next epoch and switching.

        Only relations in `changed` / `changed_base` are written; the rest stay where they are.
        What is written is read back and verified before the switch. Until CURRENT is
        replaced, the previous epoch stays current and intact; old epochs are deleted only
        after the switch, and the last `keep` epochs always stay.
        """
        prev = self.manifest() if self.exists() else None
        epoch = int(prev["epoch"]) + 1 if prev is not None else 0
        self.epochs.mkdir(parents=True, exist_ok=True)
        tmp = self.epochs / f".tmp-{epoch}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            relations = self._write_all(spark, program, snap, tmp, epoch, changed,
                                        changed_base, prev)
            manifest = {
                "format": FORMAT, "epoch": epoch, "created": time.time(),
                "program_file": program.file, "program": program_text,
                "counted": sorted(snap.counted), **relations,
                "scratch_seconds": snap.scratch_seconds, "max_rank": snap.max_rank,
                "keep": self.keep_epochs(prev), **(extra or {}),
            }
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
            final = self.epochs / str(epoch)
            if final.exists():  # left by a run killed between the rename and the switch
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, Exception) and not isinstance(e, LevelflowError):
                raise StateError(f"{self.path}: error: cannot write epoch {epoch} "
                                 f"({cause(e)}); the state is unchanged at epoch "
                                 f"{epoch - 1}") from None
            raise
        if before_switch is not None:
            before_switch()  # a test hook: a crash here must leave the old epoch current
        self.switch(epoch)
        self.collect_garbage()
        return self.load(spark, program, check=False)  # just verified; the rest was on open

    def switch(self, epoch: int) -> None:
        """Make `epoch` current: CURRENT is replaced atomically, the last step of a commit."""
        cur = self.path / f".CURRENT.{uuid.uuid4().hex[:8]}"
        cur.write_text(f"{epoch}\n")
        os.replace(cur, self.path / "CURRENT")

    def keep_epochs(self, data: dict | None = None) -> int:
        """Return how many of the last epochs garbage collection keeps (the setting, else the
        manifest's, else KEEP)."""
        if self.keep is not None:
            return self.keep
        return int((data or {}).get("keep", KEEP))

    def _write_all(self, spark, program: Program, snap: Snapshot, tmp: Path, epoch: int,
                   changed: set[str], changed_base: set[str], prev: dict | None) -> dict:
        """Return the manifest's `relations` and `base` tables after writing what changed
        into `tmp` and reading it back: a mismatch raises StateError and nothing switches."""
        tables: dict[str, dict] = {"relations": {}, "base": {}}
        written = []
        for kind, key, names, frames, rows, where in (
                ("rel", "relations", program.decls, snap.rel, snap.rows, snap.where),
                ("base", "base", program.inputs, snap.base, snap.base_rows, snap.base_where)):
            todo = changed if kind == "rel" else changed_base
            for name in sorted(names):
                if name in todo and rows[name]:
                    df, obs = observed(frames[name])
                    df.write.parquet(str(tmp / kind / name))
                    written.append((key, name, kind, obs))
                    tables[key][name] = {"epoch": epoch, "rows": rows[name]}
                elif name in todo or where[name] is None:
                    tables[key][name] = {"epoch": None, "rows": 0}
                else:  # unchanged: the previous manifest already describes its files
                    tables[key][name] = dict(prev[key][name])
        self._read_back(spark, program, snap, tmp, written, tables)
        return tables

    def _read_back(self, spark, program: Program, snap: Snapshot, tmp: Path, written: list,
                   tables: dict) -> None:
        """Record the part files of every relation written into `tmp`, verified as read back."""
        items = [Stored(f"relation {n}" if kind == "rel" else f"base facts of {n}",
                        tmp / kind / n, _schema(program, n, kind, snap.counted),
                        tables[key][n]["rows"], None, None) for key, n, kind, _ in written]
        found = scan(spark, items)
        for i, (key, name, _kind, obs) in enumerate(written):
            expected = observed_result(obs)  # what Spark wrote, counted as it wrote it
            sizes = part_files(items[i].path)
            files = {f: [sizes[f], *found[i].get(f, (0, "0"))] for f in sizes}
            got = (sum(v[1] for v in files.values()),
                   f"{sum(int(v[2], 16) for v in files.values()):x}")
            if got != expected or got[0] != items[i].rows:
                raise StateError(f"{items[i].path}: error: {items[i].label} read back as "
                                 f"{got[0]} rows, {items[i].rows} were written; the state is "
                                 f"unchanged at epoch {snap.epoch - 1}")
            checksum = got[1]
            tables[key][name].update(checksum=checksum, files=files)

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

    def kept(self) -> tuple[set[str], list[dict]]:
        """Return the epochs garbage collection keeps (the current one and those before it,
        `keep` in all) and the readable manifests among them."""
        data = self.manifest()
        current = int(data["epoch"])
        window = range(current, max(current - self.keep_epochs(data), -1), -1)
        manifests = [data]
        for e in window[1:]:
            with contextlib.suppress(StateError):
                manifests.append(self.manifest(e))
        return {str(e) for e in window}, manifests

    def _delete_unreferenced(self) -> None:
        """Delete what no kept manifest names: older epochs, or the relations in them."""
        epochs, kept = self.kept()  # a kept epoch whose manifest is unreadable stays whole
        named = {(kind, n, str(i["epoch"])) for d in kept
                 for kind, key in (("rel", "relations"), ("base", "base"))
                 for n, i in d[key].items()}
        for child in self.epochs.iterdir():
            if child.name in epochs or not child.name.isdigit() and not child.name.startswith(
                    ".tmp-"):
                continue
            referenced = False
            for kind in ("rel", "base"):
                for sub in sorted((child / kind).glob("*")):
                    if (kind, sub.name, child.name) in named:
                        referenced = True
                    else:  # e.g. epoch 0's `path` once later epochs rewrote it
                        shutil.rmtree(sub, ignore_errors=True)
            if not referenced:
                shutil.rmtree(child, ignore_errors=True)
