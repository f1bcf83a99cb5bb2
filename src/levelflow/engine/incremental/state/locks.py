"""The state directory's locks: LOCK, held by the one writer, and READERS, held shared by
every open session so that no commit deletes the files of an epoch it still reads.

A first epoch that fails removes the lock files it made (`first_epoch`), so a lock taken is
checked to still be the file its name holds: one removed meanwhile is opened again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import weakref

from levelflow.engine.incremental.state.errors import StateError


class DirLocks:
    """The locks of a state directory at `self.path` (a base of `directory.StateDir`, whose
    `__init__` sets `path` and `_reader_fd`)."""

    def hold_readers_lock(self) -> None:
        """Hold a shared lock on READERS until this object goes: no commit deletes what we read.

        Sessions read their epoch's Parquet lazily, so a commit by another process must not
        delete the previous epoch's files while a session (a shell, an API user) still reads
        them; it leaves them for a later commit instead.
        """
        if self._reader_fd is not None:
            return
        fd = self._flocked("READERS", fcntl.LOCK_SH)
        self._reader_fd = fd
        self._reader_closer = weakref.finalize(self, os.close, fd)

    def release_readers_lock(self) -> None:
        """Drop the shared READERS lock (the session will read nothing more)."""
        if self._reader_fd is not None:
            self._reader_closer()
            self._reader_fd = None

    @contextlib.contextmanager
    def reading(self):
        """Hold READERS shared for the block (one more reader): no commit deletes the files of
        an epoch that was current when the block began until it ends."""
        fd = self._flocked("READERS", fcntl.LOCK_SH)  # waits for a garbage collection under way
        try:
            yield
        finally:
            os.close(fd)

    def _lock_file(self, name: str) -> int:
        """Return an open descriptor of the lock file `name`, creating the directory."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            return os.open(self.path / name, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StateError(f"{self.path}: error: cannot use as a state directory "
                             f"({e.strerror})") from None

    def _flocked(self, name: str, mode: int) -> int:
        """Return an open descriptor of the lock file `name` locked with `mode` (flock's): a
        file removed before the lock was had (a failed first epoch's) is opened again."""
        while True:
            fd = self._lock_file(name)
            try:
                fcntl.flock(fd, mode)
                if os.path.samestat(os.fstat(fd), os.stat(self.path / name)):
                    return fd
            except FileNotFoundError:
                pass
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    @contextlib.contextmanager
    def lock(self):
        """Hold the writer lock for the block; raise StateError if another writer has it."""
        try:
            fd = self._flocked("LOCK", fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateError(f"{self.path}: error: the state is locked by another "
                             f"writer") from None
        try:
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def first_epoch(self):
        """Hold READERS shared (kept after the block, as a session holds it) and the writer
        lock for a new state's first epoch. If the block fails before the state exists, both
        are let go and what it made here is removed (the lock files, the epochs folder, the
        directory and its parents): a refused first epoch leaves no half-made state."""
        made = [d for d in (self.path, *self.path.parents) if not d.exists()]
        before = set(os.listdir(self.path)) if self.path.is_dir() else set()
        try:
            self.hold_readers_lock()
            with self.lock():
                try:
                    self.refuse_existing()  # made meanwhile by another first epoch
                    yield
                except BaseException:
                    if not self.exists():
                        self._remove_made(before)
                    raise
        except BaseException:
            self.release_readers_lock()
            for d in made:  # deepest first; one something else wrote into stays
                with contextlib.suppress(OSError):
                    d.rmdir()
            raise

    def _remove_made(self, before: set[str]) -> None:
        """Remove what a failed first epoch made in the directory (under the writer lock, so
        no writer is using it): READERS only if no other session holds it, LOCK last."""
        for name in set(os.listdir(self.path)) - before - {"LOCK", "READERS"}:
            path = self.path / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        if "READERS" not in before:
            try:
                fcntl.flock(self._reader_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another session reads: it keeps the file
                pass
            else:
                (self.path / "READERS").unlink(missing_ok=True)
        if "LOCK" not in before:
            (self.path / "LOCK").unlink(missing_ok=True)
