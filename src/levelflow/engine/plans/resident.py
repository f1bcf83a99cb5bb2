"""State kept on an executor between Spark jobs, keyed by lineage, share and version token.

Spark hands a partition to any idle Python worker of an executor, so a share's state is kept
twice: in this worker process's memory (found again when the same process gets the share) and
in a file in the executor's temporary directory, written after the task in the background (any
process of the executor reads it). A token is a 10-digit sequence number and some noise: a
lookup wants one exact token, and a late write of an older version never deletes a newer one.
What is kept is any picklable object; missing or unreadable is a miss, never an error.
Files no session has read or written for MAX_AGE_SECONDS are swept (sessions that were never
closed leave theirs behind); a swept state is a miss, which the caller recovers from.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path

_MEMORY_ENTRIES = 16  # states one worker process keeps in memory (oldest dropped first)
_MEMORY: dict[tuple[str, int], tuple[str, object]] = {}
_WRITER: threading.Thread | None = None  # the file write of the last stored state
MAX_AGE_SECONDS = 6 * 3600
_SWEEP_EVERY = 600  # seconds between one process's sweeps
_WRITE_DELAY_SECONDS = 0.02
_AWAIT_WRITE_SECONDS = 60.0
_last_sweep = 0.0


def _root() -> Path:
    return Path(tempfile.gettempdir()) / "levelflow-resident"


def _file(lineage: str, share: int, token: str) -> Path:
    return _root() / f"{lineage}-{share}.{token}"


def remember(lineage: str, share: int, token: str, value: object) -> None:
    """Keep a share's state in this process's memory."""
    _MEMORY.pop((lineage, share), None)
    _MEMORY[(lineage, share)] = (token, value)
    while len(_MEMORY) > _MEMORY_ENTRIES:
        del _MEMORY[next(iter(_MEMORY))]


def lookup(lineage: str, share: int, token: str):
    """Return the share's state stored under exactly `token`, or None."""
    hit = _MEMORY.get((lineage, share))
    if hit is not None and hit[0] == token:
        return hit[1]
    path = _file(lineage, share, token)
    _await_writer(path)
    try:
        with path.open("rb") as f:
            value = pickle.load(f)
        os.utime(path)  # in use: not swept
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    remember(lineage, share, token, value)
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


def store(lineage: str, share: int, token: str, value: object) -> None:
    """Keep a share's new state in memory now, and in the executor's file after the task."""
    global _WRITER
    remember(lineage, share, token, value)
    if _WRITER is not None:
        _WRITER.join()  # one write at a time: a late older write must not follow a newer one
    path = _file(lineage, share, token)
    with contextlib.suppress(OSError):  # the writer's mark, before the task ends: see lookup
        path.parent.mkdir(parents=True, exist_ok=True)
        _tmp(path).touch()
    _WRITER = threading.Thread(target=_write, args=(path, value), daemon=True)
    _WRITER.start()


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
                pickle.dump(value, f, protocol=5)
            os.replace(tmp, path)
        finally:  # a failed write leaves no mark for readers to wait on
            tmp.unlink(missing_ok=True)
        lineage_share, token = path.name.split(".", 1)
        for old in path.parent.glob(f"{lineage_share}.*"):
            version = old.name.split(".")[1]
            # Another process may have written a newer version meanwhile: keep newer ones,
            # and other processes' files being written.
            if old != path and "tmp" not in old.name and version[:10] < token[:10]:
                old.unlink(missing_ok=True)
        _sweep(path.parent)


def _sweep(root: Path) -> None:
    """Delete this executor's state files untouched for MAX_AGE_SECONDS (at most every
    _SWEEP_EVERY seconds per process)."""
    global _last_sweep
    now = time.time()
    if now - _last_sweep < _SWEEP_EVERY:
        return
    _last_sweep = now
    for path in root.iterdir():
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > MAX_AGE_SECONDS:
                path.unlink()


def forget(lineages: Iterable[str]) -> None:
    """Delete the files of the given lineages (this machine's; a session closing)."""
    for lineage in lineages:
        for path in _root().glob(f"{lineage}-*"):
            with contextlib.suppress(OSError):
                path.unlink()
