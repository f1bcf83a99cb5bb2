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
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from levelflow.engine.evaluate import RANK
from levelflow.engine.incremental.backends.driver_rows import (
    LazyFrame,
    frame_of_table,
    held_empty,
)
from levelflow.engine.incremental.state.durable import (
    SUM_KEY,
    current_text,
    fsync_path,
    fsync_tree,
    manifest_sum,
    manifest_text,
    parse_current,
    write_durably,
)
from levelflow.engine.incremental.state.errors import StateError
from levelflow.engine.incremental.state.garbage import delete_unreferenced
from levelflow.engine.incremental.state.integrity import (
    Stored,
    cause,
    verify,
)
from levelflow.engine.incremental.state.local_base import local_base
from levelflow.engine.incremental.state.locks import DirLocks
from levelflow.engine.incremental.state.segments import (
    chain_rows,
    compose,
    segment_path,
    segment_schema,
)
from levelflow.engine.incremental.state.snapshot import COUNT, Snapshot
from levelflow.engine.incremental.state.write import (
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

# 3: ranks keep their invariant: the relations of a recursive task share one rank scale, and
# new ranks are saved even when the tuples did not change. A format-2 state can hold ranks that
# break the invariant (a later deletion then keeps unsupported tuples), so it is refused.
# 4: each stored relation records its part files, row counts and checksums (integrity.py). A
# format-3 state is still read: its row counts are verified, its content cannot be.
# 5: a relation is a base plus a chain of delta segments (segments.py); an entry's `rows` is
# the relation's size, `base_rows` its base's. Formats 3 and 4 read as bases without chains.
# 6: the manifest carries its own checksum and CURRENT names the current manifest's
# (durable.py). Formats 3 to 5 are read without them; the next commit writes them.
FORMAT = "levelflow-state/6"
READABLE = ("levelflow-state/3", "levelflow-state/4", "levelflow-state/5", FORMAT)
KEEP = 2  # epochs garbage collection keeps by default: the current one and the one before
# A stored relation of at most this many rows (base and chain) is read by the driver when the
# state is loaded: an epoch in the driver (plans/driver.py) finds it there.
HELD_ROWS = 50_000


class StateDir(DirLocks):
    """A state directory on disk: read the current epoch, write the next one atomically."""

    def __init__(self, path: str | os.PathLike, keep: int | None = None) -> None:
        self.path = Path(path)
        if keep is not None and keep < 1:
            raise StateError(f"{self.path}: error: must keep at least 1 epoch, got {keep}")
        self.keep = keep  # None: as the current manifest says (KEEP if it says nothing)
        self._reader_fd: int | None = None
        self.notes: list[str] = []  # what a commit has to tell (an epoch set aside)

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
        return self._current()[0]

    def _current(self) -> tuple[int, str | None]:
        """Return (the current epoch, the checksum CURRENT names for its manifest or None)."""
        try:
            return parse_current((self.path / "CURRENT").read_text())
        except (OSError, ValueError):
            raise StateError(f"{self.path}: error: not a levelflow state directory (no valid "
                             f"CURRENT file)") from None

    def manifest(self, epoch: int | None = None) -> dict:
        """Return the manifest of an epoch (the current one by default), its checksum verified
        and, for the current epoch, matched against the one CURRENT names."""
        current, named = self._current()
        epoch = current if epoch is None else epoch
        path = self.epochs / str(epoch) / "manifest.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise StateError(f"{path}: error: cannot read manifest ({e})") from None
        if not isinstance(data, dict) or data.get("format") not in READABLE:
            found = data.get("format") if isinstance(data, dict) else None
            raise StateError(f"{path}: error: unknown state format {found!r} "
                             f"(expected {FORMAT!r}; recreate it with levelflow run --state)")
        own = data.get(SUM_KEY)
        if (own is not None or data["format"] == FORMAT) and own != manifest_sum(data):
            raise StateError(f"{path}: error: manifest checksum differs (the manifest was "
                             f"edited or damaged after it was written)")
        # A compaction killed between its manifest's rename and CURRENT's names the manifest
        # it replaced (the same relations, stored otherwise).
        if epoch == current and (named is not None or own is not None) \
                and named not in (own, data.get("compacted_from")):
            raise StateError(f"{path}: error: manifest is not the one CURRENT names (CURRENT "
                             f"was edited, or the manifest replaced)")
        return data

    def stored(self, program: Program, data: dict) -> list[Stored]:
        """Return every directory an epoch's manifest names (bases, segments), with what it
        recorded."""
        items = []
        for kind, table in (("rel", data["relations"]), ("base", data["base"])):
            for name, info in table.items():
                if info["epoch"] is None or name not in program.decls:
                    continue
                label = f"relation {name}" if kind == "rel" else f"base facts of {name}"
                schema = stored_schema(program, name, kind, set(data["counted"]))
                items.append(Stored(label, self.epochs / str(info["epoch"]) / kind / name,
                                    schema, int(info.get("base_rows", info["rows"])),
                                    info.get("checksum"), info.get("files")))
                items += [Stored(f"{label} (segment of epoch {seg['epoch']})",
                                 segment_path(self.epochs, kind, name, seg["epoch"]),
                                 segment_schema(schema), int(seg["rows"]), seg.get("checksum"),
                                 seg.get("files")) for seg in info.get("segments", [])]
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
            # Small: read by the driver now (pyarrow), its rows kept beside the frame.
            table = local_base(self.epochs, kind, name, info, None, schema, cols)
            return frame_of_table(spark, table, schema)
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
                "labelled": sorted(snap.labelled), "keep": self.keep_epochs(prev),
                **_carried(prev), **(extra or {}),
            }
            digest = self.publish(tmp, epoch, manifest)
        except BaseException as e:
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

    def publish(self, tmp: Path, epoch: int, manifest: dict) -> str:
        """Return the manifest's checksum after writing it into `tmp`, flushing all of `tmp`
        and renaming it to `epochs/<epoch>` (not yet current: CURRENT is switched after).

        A directory already there is newer than CURRENT: a commit killed before its switch,
        or an acknowledged epoch whose CURRENT was rolled back. It is never deleted: it is
        set aside as `epochs/.aside-<epoch>-<id>`, and `notes` says so.
        """
        text, digest = manifest_text(manifest)
        (tmp / "manifest.json").write_text(text)
        fsync_tree(tmp)  # Spark's and pyarrow's part files too: on disk before CURRENT
        final = self.epochs / str(epoch)
        if final.exists():
            aside = self.epochs / f".aside-{epoch}-{uuid.uuid4().hex[:8]}"
            os.replace(final, aside)
            self.notes.append(f"note: {final} was newer than CURRENT (epoch {epoch - 1}): "
                              f"it was never made current, or CURRENT was rolled back; "
                              f"kept aside as {aside}")
        os.replace(tmp, final)
        fsync_path(self.epochs)
        return digest

    def switch(self, epoch: int, digest: str | None = None) -> None:
        """Make `epoch` current: CURRENT (naming its manifest's checksum) is replaced
        atomically and flushed, the last step of a commit."""
        if digest is None:
            digest = self.manifest_file_sum(epoch)
        write_durably(self.path / "CURRENT", current_text(epoch, digest))

    def manifest_file_sum(self, epoch: int) -> str | None:
        """Return the checksum an epoch's manifest file records (None: written before them)."""
        try:
            return json.loads((self.epochs / str(epoch) / "manifest.json").read_text()
                              ).get(SUM_KEY)
        except (OSError, ValueError) as e:
            raise StateError(f"{self.epochs / str(epoch)}: error: cannot read manifest "
                             f"({e})") from None

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
        tables, written, frames = plan_writes(program, snap, tmp, epoch, changed, changed_base,
                                              prev)
        write_all(frames)
        self.read_back(spark, snap.epoch - 1, written)
        return tables

    def read_back(self, spark, current: int, written: list) -> None:
        """Verify what a commit wrote as read back (write.read_back; `current`: the epoch a
        mismatch leaves current)."""
        read_back(spark, current, written)

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
            delete_unreferenced(self.epochs, *self.kept())
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


def _carried(prev: dict | None) -> dict:
    """Return what every later manifest carries on from the previous one: the micro-batches of
    each stream applied so far (levelflow.streaming)."""
    return {"streams": prev["streams"]} if prev is not None and "streams" in prev else {}
