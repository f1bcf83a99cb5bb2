"""State kept on an executor between Spark jobs, keyed by lineage, share and version token.

Spark hands a partition to any idle Python worker of an executor, so a share's state is kept
twice: in this worker process's memory (found again when the same process gets the share) and
in a file of a folder private to the user (`_root`), written after the task in the background
(any process of the executor reads it). A token is a 10-digit sequence number and some noise: a
lookup wants one exact token, and a late write of an older version never deletes a newer one.
What is kept is any picklable object built of levelflow's classes, containers and arrays;
missing or unreadable is a miss, never an error. Its Polars frames and series and its numpy
arrays are written as Arrow IPC segments beside the pickled skeleton, and a reader maps them in
place (the skeleton's unpickler names classes only, never a function, so a file cannot run
code): another process's first read of a share costs about a millisecond whatever its size
(a pickle's copy cost 0.13 s per 5M tuples).
A version may be stored as its change to the version before (`store(..., base, change)`):
that small file is written first, the whole state only every _MAX_DEPTH changes, and a
process holding an older version catches up by applying the changes (`lookup(..., apply)`).
Writing 5M tuples whole after every epoch kept both cores busy; a reader waited for it.
The driver keeps the states of the shares it runs itself (`held_here`) in memory only.
Files no session has read or written for MAX_AGE_SECONDS are swept (sessions that were never
closed leave theirs behind); a swept state is a miss, which the caller recovers from.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import stat
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from levelflow.errors import LevelflowError

_MEMORY_ENTRIES = 16  # states one worker process keeps in memory (oldest dropped first)
_MEMORY: dict[tuple[str, int], tuple[str, object, int]] = {}
# States the driver keeps (`held_here`): in memory only, never dropped until forgotten.
_HELD: dict[tuple[str, int], tuple[str, object]] = {}
_here = threading.local()
_MAX_DEPTH = 32  # changes stored after a full file before the next full one
_WRITER: threading.Thread | None = None  # the file write of the last stored state
MAX_AGE_SECONDS = 6 * 3600
_SWEEP_EVERY = 600  # seconds between one process's sweeps
_WRITE_DELAY_SECONDS = 0.02
_AWAIT_WRITE_SECONDS = 60.0
_last_sweep = 0.0


ROOT_ENV = "LEVELFLOW_RESIDENT_DIR"  # where the files go, if set (Spark's workers inherit it)
_checked: Path | None = None  # the folder as checked by this process


class ResidentDirError(LevelflowError):
    """The folder for executor state is not private to this user."""


def _root() -> Path:
    """Return this user's private folder for executor state (`LEVELFLOW_RESIDENT_DIR`, else
    `<tmp>/levelflow-resident-<uid>`), made mode 0700 if missing; raise ResidentDirError
    unless it is a directory of this uid with mode 0700.

    Its files are loaded, so a folder someone else made or can write to is refused: in a
    shared temporary folder another user could create it first and plant files.
    """
    global _checked
    path = Path(os.environ.get(ROOT_ENV) or
                Path(tempfile.gettempdir()) / f"levelflow-resident-{os.getuid()}")
    if _checked == path:
        return path
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700, parents=True)
    st = path.lstat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() \
            or stat.S_IMODE(st.st_mode) != 0o700:
        what = "not a directory" if not stat.S_ISDIR(st.st_mode) else \
            f"owned by uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):04o}"
        raise ResidentDirError(f"{path}: error: folder for executor state is {what}; it must "
                               f"be a directory of uid {os.getuid()} with mode 0700 (remove "
                               f"it, or set {ROOT_ENV} to a private folder)")
    _checked = path
    return path


def check_root() -> Path:
    """Return the private folder for executor state after checking it (the driver calls it
    before any job, so a refused folder is one line, not a failed job)."""
    return _root()


def _file(lineage: str, share: int, token: str) -> Path:
    return _root() / f"{lineage}-{share}.{token}"


def remember(lineage: str, share: int, token: str, value: object, depth: int = 0) -> None:
    """Keep a share's state in this process's memory (`depth`: changes since a full file)."""
    _MEMORY.pop((lineage, share), None)
    _MEMORY[(lineage, share)] = (token, value, depth)
    while len(_MEMORY) > _MEMORY_ENTRIES:
        del _MEMORY[next(iter(_MEMORY))]


@contextlib.contextmanager
def held_here():
    """Keep the states stored in this block (by this thread) in this process's memory only:
    the driver outlives every job, so no file need back them, none is dropped for another,
    and no background write competes with the epoch."""
    _here.on = True
    try:
        yield
    finally:
        _here.on = False


def lookup(lineage: str, share: int, token: str, apply=None):
    """Return the share's state stored under exactly `token`, or None. `apply(state, change)`
    rebuilds a version stored as a change to an earlier one."""
    return _version(lineage, share, token, apply, _MAX_DEPTH)


def _version(lineage: str, share: int, token: str, apply, hops: int):
    """Return the version `token` from memory, its full file, or its change file applied to
    the version before it (found the same way, at most `hops` changes back), or None."""
    held = _HELD.get((lineage, share))
    if held is not None and held[0] == token:
        return held[1]
    hit = _MEMORY.get((lineage, share))
    if hit is not None and hit[0] == token:
        return hit[1]
    path = _file(lineage, share, token)
    change_path = _change_file(path)
    _await_writer(change_path if apply is not None else path)
    found = _whole(lineage, share, token, path)
    if found is not None or apply is None or hops <= 0:
        return found
    change = _read(change_path)
    if not isinstance(change, _Change):
        _await_writer(path)  # no change file: this version is being written whole
        return _whole(lineage, share, token, path)
    base = _version(lineage, share, change.base, apply, hops - 1)
    if base is None:
        return None
    value = apply(base, change.change)
    remember(lineage, share, token, value, change.depth)
    return value


def _whole(lineage: str, share: int, token: str, path: Path):
    """Return the version in its full file (and remember it), or None."""
    found = _read(path)
    if found is not None:
        remember(lineage, share, token, found)
    return found


def _read(path: Path):
    """Return what a file holds, or None if it is missing or unreadable."""
    try:
        value = _load(path)
        os.utime(path)  # in use: not swept
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
            ValueError, pa.ArrowException):
        return None
    return value


def _await_writer(path: Path) -> None:
    """Wait while another live process of this executor is still writing `path`: reading it
    then costs the rest of that write, a miss costs shipping the whole state (10x more)."""
    deadline = time.monotonic() + _AWAIT_WRITE_SECONDS
    while not path.exists() and time.monotonic() < deadline:
        writers = [w for w in path.parent.glob(path.name + ".tmp*") if _alive(w)]
        if not writers:
            return
        time.sleep(0.01)


def _alive(tmp: Path) -> bool:
    """Return whether the process writing `tmp` (its name ends with the pid) still runs."""
    try:
        os.kill(int(tmp.name.rsplit(".tmp", 1)[1]), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        pass  # another user's process, alive
    return True


def store(lineage: str, share: int, token: str, value: object, base: str | None = None,
          change: object = None) -> None:
    """Keep a share's new state in memory now, and in the executor's files after the task:
    as `change` to version `base` (small, written first) when given, whole every
    _MAX_DEPTH changes or when not."""
    global _WRITER
    if getattr(_here, "on", False):
        _MEMORY.pop((lineage, share), None)
        _HELD[(lineage, share)] = (token, value)
        return
    _HELD.pop((lineage, share), None)
    hit = _MEMORY.get((lineage, share))
    depth = hit[2] + 1 if change is not None and hit is not None and hit[0] == base else None
    whole = depth is None or depth >= _MAX_DEPTH
    remember(lineage, share, token, value, 0 if whole else depth)
    if _WRITER is not None:
        _WRITER.join()  # one write at a time: a late older write must not follow a newer one
    path = _file(lineage, share, token)
    writes = [] if depth is None else [(_change_file(path), _Change(base, depth, change))]
    if whole:
        writes.append((path, value))
    with contextlib.suppress(OSError):  # the writer's mark, before the task ends: see lookup
        path.parent.mkdir(parents=True, exist_ok=True)
        _tmp(writes[0][0]).touch()
    _WRITER = threading.Thread(target=_write_all, args=(writes,), daemon=True)
    _WRITER.start()


@dataclass(frozen=True, slots=True)
class _Change:
    """A version stored as a change to version `base`, `depth` changes after a full file."""

    base: str
    depth: int
    change: object


def _change_file(path: Path) -> Path:
    return path.with_name(path.name + ".d")


def _write_all(writes: list[tuple[Path, object]]) -> None:
    """Write the files in order (the change first: readers wait for it, not the whole)."""
    for path, value in writes:
        _write(path, value)


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + f".tmp{os.getpid()}")


def _write(path: Path, value: object) -> None:
    """Write a state (to a temporary name, then renamed) and delete older versions' files."""
    # Pickling holds the GIL for long stretches: let the task that stored the state finish
    # first (its thread is then blocked in a read, which releases the GIL).
    time.sleep(_WRITE_DELAY_SECONDS)
    tmp = _tmp(path)
    with contextlib.suppress(OSError):
        try:  # store made the directory
            with tmp.open("wb") as f:
                _dump(value, f)
            os.replace(tmp, path)
        finally:  # a failed write leaves no mark for readers to wait on
            tmp.unlink(missing_ok=True)
        lineage_share, token = path.name.split(".")[:2]
        if path.name.endswith(".d"):  # the versions it builds on stay
            return
        for old in path.parent.glob(f"{lineage_share}.*"):
            version = old.name.split(".")[1]
            # Another process may have written a newer version meanwhile: keep newer ones,
            # and other processes' files being written.
            if old != path and "tmp" not in old.name and version[:10] < token[:10]:
                old.unlink(missing_ok=True)
        _sweep(path.parent)


class _Pickler(pickle.Pickler):
    """Pickles the object's skeleton; its frames, series and arrays go before it as aligned
    Arrow IPC segments, which a reader maps instead of copying."""

    def __init__(self, skeleton, out) -> None:
        super().__init__(skeleton, protocol=5)
        self.out = out

    def persistent_id(self, obj):
        if isinstance(obj, pl.DataFrame):
            kind, table = "frame", obj.to_arrow()
        elif isinstance(obj, pl.Series):
            kind, table = "series", pl.DataFrame([obj]).to_arrow()
        elif isinstance(obj, np.ndarray) and obj.ndim == 1 and obj.dtype.kind in "iub":
            kind, table = "array", pa.table({"a": obj})
        else:
            return None
        self.out.write(b"\0" * (-self.out.tell() % _ALIGN))
        start = self.out.tell()
        with pa.ipc.new_file(self.out, table.schema) as writer:
            writer.write_table(table)
        return kind, start, self.out.tell() - start


class _Unpickler(pickle.Unpickler):
    """Reads a skeleton that can name classes only (levelflow's, numpy's and polars' data
    types, a few builtins), never a function: a planted file cannot run code through it."""

    def __init__(self, f, mapped: pa.Buffer) -> None:
        super().__init__(f)
        self.mapped = mapped

    def find_class(self, module: str, name: str):
        if (module, name) in _ALLOWED or module.split(".")[0] in ("levelflow", "polars"):
            found = super().find_class(module, name)
            if (module, name) in _ALLOWED or isinstance(found, type) and not issubclass(
                    found, BaseException):
                return found
        raise pickle.UnpicklingError(f"resident state names {module}.{name}: refused")

    def persistent_load(self, pid):
        kind, start, size = pid
        table = pa.ipc.open_file(pa.BufferReader(self.mapped.slice(start, size))).read_all()
        if kind == "array":
            return table.column(0).to_numpy()
        frame = pl.from_arrow(table, rechunk=False)
        return frame.to_series() if kind == "series" else frame


# What a skeleton may name besides classes of levelflow and polars (their data types).
_ALLOWED = {("builtins", n) for n in ("set", "frozenset", "slice", "range", "complex",
                                      "bytearray")} | {
    (m, n) for m in ("numpy", "numpy.core.multiarray", "numpy._core.multiarray")
    for n in ("dtype", "ndarray", "scalar", "_reconstruct")} | {("collections", "OrderedDict")}


_ALIGN = 64  # Arrow reads buffers in place when they are aligned
_MAGIC = b"LFR1"


def _dump(value: object, f) -> None:
    """Write `value`: its Arrow segments, then the pickled skeleton, then where that starts."""
    f.write(_MAGIC)
    skeleton = io.BytesIO()
    _Pickler(skeleton, f).dump(value)
    at = f.tell()
    f.write(skeleton.getbuffer())
    f.write(at.to_bytes(8, "little"))


def _load(path: Path) -> object:
    """Return what _dump wrote, its frames and arrays mapped from the file, not copied."""
    mapped = pa.memory_map(str(path)).read_buffer()
    if mapped.size < 12 or mapped.slice(0, 4).to_pybytes() != _MAGIC:
        raise ValueError(f"{path}: not a resident state")
    at = int.from_bytes(mapped.slice(mapped.size - 8).to_pybytes(), "little")
    skeleton = io.BytesIO(mapped.slice(at, mapped.size - 8 - at).to_pybytes())
    return _Unpickler(skeleton, mapped).load()


def claim(lineage: str, base: str | None, job: str, shares: int, task: int, attempt: int = 0
          ) -> int:
    """Return the share task `task` of a direct job works on (one task per share, every one on
    this machine): a share whose version `base` this process holds in memory if one is still
    unclaimed, else the first unclaimed one. A claim is a file only one task can create.

    Spark hands a task to whichever Python worker is idle; by share index, about every other
    epoch a share landed on the worker that last held it an epoch or two before, which then
    caught up on the changes first (20-90 ms of a 100 ms epoch)."""
    claims = _root() / "claims"
    claims.mkdir(parents=True, exist_ok=True)
    if attempt:  # a retried task takes the share its first attempt claimed
        for path in claims.glob(f"{lineage}.{job}.*"):
            with contextlib.suppress(OSError, ValueError):
                if int(path.read_text()) == task:
                    return int(path.name.rsplit(".", 1)[1])
    _drop_claims(claims, lineage, job)
    mine = [s for (held, s), (token, _, _) in _MEMORY.items()
            if held == lineage and token == base and s < shares]
    mark = claims / f"{lineage}.{job}.tmp{os.getpid()}"
    mark.write_text(str(task))
    try:
        for share in [*mine, *range(shares)]:
            with contextlib.suppress(FileExistsError):
                os.link(mark, claims / f"{lineage}.{job}.{share}")  # atomic, with its content
                return share
    finally:
        mark.unlink(missing_ok=True)
    raise RuntimeError(f"no share of {lineage} left for task {task} of job {job}")


def _drop_claims(claims: Path, lineage: str, job: str) -> None:
    """Delete the lineage's claims of jobs before `job` (a job names its epoch's sequence
    number first)."""
    for path in claims.glob(f"{lineage}.*"):
        if path.name.split(".")[1][:10] < job[:10]:
            path.unlink(missing_ok=True)


def _sweep(root: Path) -> None:
    """Delete this executor's state files untouched for MAX_AGE_SECONDS (at most every
    _SWEEP_EVERY seconds per process)."""
    global _last_sweep
    now = time.time()
    if now - _last_sweep < _SWEEP_EVERY:
        return
    _last_sweep = now
    for path in [*root.iterdir(), *(root / "claims").glob("*")]:
        with contextlib.suppress(OSError):
            if path.is_file() and now - path.stat().st_mtime > MAX_AGE_SECONDS:
                path.unlink()


def forget(lineages: Iterable[str]) -> None:
    """Delete the files of the given lineages (this machine's; a session closing), and what
    this process keeps of them in memory (the driver keeps counted tasks' states)."""
    lineages = set(lineages)
    for kept in (_MEMORY, _HELD):
        for key in [k for k in kept if k[0] in lineages]:
            del kept[key]
    for lineage in lineages:
        for path in [*_root().glob(f"{lineage}-*"), *_root().glob(f"claims/{lineage}.*")]:
            with contextlib.suppress(OSError):
                path.unlink()
