"""A state directory's files, read and switched without Spark: CURRENT, each epoch's manifest
and commit record, what a manifest names, and making an epoch current.

    STATEDIR/CURRENT                     the current epoch and its manifest's checksum
    STATEDIR/epochs/<n>/manifest.json    epoch n: its relations, its program; its own checksum
    STATEDIR/epochs/<n>/COMMITTED        CURRENT's text when CURRENT was switched to epoch n

An epoch's commit completes when CURRENT names it (the commit point: one rename, flushed);
COMMITTED then records that, flushed before the commit returns, so that a CURRENT lost or
damaged later can be recovered: the last acknowledged epoch is the newest one whose COMMITTED
names its manifest and whose files are whole (repair.py). An epoch written but never made
current (a commit killed before its switch) has no COMMITTED and is never made current
unless asked for by number (`state repair --from-epoch N`).
`StateDir` (directory.py) adds what needs Spark: loading an epoch, committing the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from levelflow.engine.arrow_types import arrow_schema
from levelflow.engine.incremental.state.durable import (
    SUM_KEY,
    create_durably,
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
from levelflow.engine.incremental.state.integrity import Stored, verify
from levelflow.engine.incremental.state.locks import DirLocks
from levelflow.engine.incremental.state.segments import OP, segment_path

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
# COMMITTED files came later within format 6: a state without them opens as before; only a
# lost CURRENT cannot be recovered by itself there (`state repair --from-epoch N` can).
FORMAT = "levelflow-state/6"
READABLE = ("levelflow-state/3", "levelflow-state/4", "levelflow-state/5", FORMAT)
KEEP = 2  # epochs garbage collection keeps by default: the current one and the one before
COMMITTED = "COMMITTED"
# The stored columns beside a relation's own (snapshot.COUNT, evaluate.RANK: not imported,
# as they import Spark).
COUNT, RANK = "_cnt", "_it"


def arrow_stored_schema(program: Program, name: str, kind: str, counted: set[str]) -> pa.Schema:
    """Return the Parquet schema of a stored relation (`rel`: + _cnt or _it) or base facts."""
    schema = arrow_schema(program.decls[name])
    if kind == "rel":
        schema = schema.append(pa.field(COUNT if name in counted else RANK, pa.int64()))
    return schema


def arrow_segment_schema(schema: pa.Schema) -> pa.Schema:
    """Return the Parquet schema of a segment: the stored rows' schema plus `_op`."""
    return schema.append(pa.field(OP, pa.int32()))


def names_manifest(named: str | None, data: dict) -> bool:
    """Return whether a manifest checksum as CURRENT or COMMITTED gives it (None: a state
    written before checksums) names the manifest `data` (or the one a compaction replaced
    with it: a compaction killed before its switch)."""
    own = data.get(SUM_KEY)
    if own is None:
        return named is None
    return named is not None and named in (own, data.get("compacted_from"))


class StateFiles(DirLocks):
    """A state directory on disk: its CURRENT, manifests and commit records, read and switched
    without Spark."""

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
        """Return whether the directory holds a state: CURRENT, or an epoch that committed
        (CURRENT lost since). Epochs that never did (a first run killed before its switch)
        are no state: a new one is made beside them (they are set aside)."""
        return (self.path / "CURRENT").is_file() or any(
            (self.epochs / str(e) / COMMITTED).is_file() for e in self.on_disk())

    def refuse_existing(self) -> None:
        """Raise StateError if the directory holds a state already (a bootstrap's check)."""
        if self.exists():
            raise StateError(f"{self.path}: error: already holds a state (epoch "
                             f"{self.current()}); use `levelflow update` or remove it")

    def check_usable(self) -> None:
        """Raise StateError if the path exists but is not a directory (checked before Spark)."""
        if self.path.exists() and not self.path.is_dir():
            raise StateError(f"{self.path}: error: not a directory")

    def on_disk(self) -> list[int]:
        """Return the epochs with a manifest file, newest first."""
        if not self.epochs.is_dir():
            return []
        return sorted((int(d.name) for d in self.epochs.iterdir()
                       if d.name.isdigit() and (d / "manifest.json").is_file()), reverse=True)

    def current(self) -> int:
        """Return the current epoch number; raise StateError if there is none."""
        return self._current()[0]

    def _current(self) -> tuple[int, str | None]:
        """Return (the current epoch, the checksum CURRENT names for its manifest or None)."""
        try:
            return parse_current((self.path / "CURRENT").read_text())
        except (OSError, ValueError):
            if not self.on_disk():
                raise StateError(f"{self.path}: error: not a levelflow state directory (no "
                                 f"valid CURRENT file)") from None
            raise StateError(self.damaged_current(self.current_problem())) from None

    def damaged_current(self, problem: str | None) -> str:
        """Return the line refusing a state whose CURRENT is damaged (`problem`)."""
        return (f"{self.path / 'CURRENT'}: error: {problem or 'CURRENT is damaged'}; "
                f"`levelflow state repair {self.path}` makes the last committed epoch current "
                f"again (`levelflow state check {self.path}` says which)")

    def current_problem(self) -> str | None:
        """Return how CURRENT is damaged (missing, empty or unreadable, naming an epoch without
        a manifest, or another manifest than the one its epoch's COMMITTED names), or None.
        A damaged manifest is not CURRENT's problem: manifest() reports it."""
        try:
            text = (self.path / "CURRENT").read_text()
        except FileNotFoundError:
            return "CURRENT is missing"
        except (OSError, ValueError) as e:
            return f"CURRENT cannot be read ({e})"
        try:
            epoch, named = parse_current(text)
        except ValueError:
            return "CURRENT is " + ("empty" if not text.strip() else
                                    "not an epoch number and a manifest checksum")
        if not (self.epochs / str(epoch) / "manifest.json").is_file():
            return f"CURRENT names epoch {epoch}, which has no manifest"
        try:
            data = self._read_manifest(epoch)
        except StateError:
            return None
        if not names_manifest(named, data) and self.committed(epoch, data):
            return f"CURRENT names another manifest than the one epoch {epoch} committed"
        return None

    def _read_manifest(self, epoch: int) -> dict:
        """Return an epoch's manifest, its format and its own checksum verified."""
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
        return data

    def manifest(self, epoch: int | None = None) -> dict:
        """Return the manifest of an epoch (the current one by default), its checksum verified
        and, for the current epoch, matched against the one CURRENT names (an epoch asked for
        by number is read when CURRENT is what is damaged: its COMMITTED names it)."""
        by_number = epoch is not None
        try:
            current, named = self._current()
        except StateError:
            if not by_number:
                raise
            current, named = None, None
        epoch = current if epoch is None else epoch
        if epoch == current and not (self.epochs / str(epoch) / "manifest.json").is_file():
            raise StateError(self.damaged_current(self.current_problem()))
        data = self._read_manifest(epoch)
        if epoch == current and not names_manifest(named, data):
            if self.committed(epoch, data):
                if by_number:
                    return data
                raise StateError(self.damaged_current(self.current_problem()))
            raise StateError(f"{self.epochs / str(epoch) / 'manifest.json'}: error: manifest "
                             f"is not the one CURRENT names (CURRENT was edited, or the "
                             f"manifest replaced)")
        return data

    def committed(self, epoch: int, data: dict) -> bool:
        """Return whether epoch's commit completed: its COMMITTED names its manifest `data`."""
        try:
            recorded, named = parse_current((self.epochs / str(epoch) / COMMITTED).read_text())
        except (OSError, ValueError):
            return False
        return recorded == epoch and named is not None and names_manifest(named, data)

    def stored(self, program: Program, data: dict) -> list[Stored]:
        """Return every directory an epoch's manifest names (bases, segments), with what it
        recorded."""
        items = []
        for kind, table in (("rel", data["relations"]), ("base", data["base"])):
            for name, info in table.items():
                if info["epoch"] is None or name not in program.decls:
                    continue
                label = f"relation {name}" if kind == "rel" else f"base facts of {name}"
                schema = arrow_stored_schema(program, name, kind, set(data["counted"]))
                items.append(Stored(label, self.epochs / str(info["epoch"]) / kind / name,
                                    schema, int(info.get("base_rows", info["rows"])),
                                    info.get("checksum"), info.get("files")))
                items += [Stored(f"{label} (segment of epoch {seg['epoch']})",
                                 segment_path(self.epochs, kind, name, seg["epoch"]),
                                 arrow_segment_schema(schema), int(seg["rows"]),
                                 seg.get("checksum"), seg.get("files"))
                          for seg in info.get("segments", [])]
        return items

    def verify(self, spark: SparkSession | None, program: Program, data: dict,
               listing: bool = False) -> None:
        """Raise StateError naming the first damaged file of an epoch (with `listing`, the
        listing only: missing, extra or resized part files)."""
        from levelflow.engine.session import on_local_master

        # On a local master Spark's executors share the driver's cores: the driver reads the
        # files faster than a job (10M rows: 1.44 s against 4.01 s, bench_state_check.py).
        on_spark = spark if spark is not None and not on_local_master(spark) else None
        problems = verify(self.stored(program, data), on_spark, listing)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise StateError(f"{problems[0]}{more}; the state is damaged and was not changed "
                             f"(see `levelflow state check {self.path}`)")

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
        atomically and flushed, the last step of a commit; then the epoch's COMMITTED records
        it, flushed too, before the commit returns."""
        if digest is None:
            digest = self.manifest_file_sum(epoch)
        text = current_text(epoch, digest)
        write_durably(self.path / "CURRENT", text)
        record = self.epochs / str(epoch) / COMMITTED
        try:
            if record.read_text() == text:
                return  # recovered: it already says so
        except FileNotFoundError:  # a new epoch's: a cut one reads as not committed
            create_durably(record, text)
            return
        write_durably(record, text)  # a compaction's: replaced whole, never cut

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

    def collect_garbage(self) -> None:
        """Delete epoch directories the current manifest no longer references (and temp dirs).

        Skipped while another session holds the readers lock: its epoch's files may be among
        them. The next commit made with no other reader open deletes them.
        """
        if not (self.path / "CURRENT").is_file():
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
