"""The state directory's locks: LOCK, held by the one writer, and READERS, held shared by
every open session so that no commit deletes the files of an epoch it still reads."""

from __future__ import annotations

import contextlib
import fcntl
import os
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
        fd = self._lock_file("READERS")
        fcntl.flock(fd, fcntl.LOCK_SH)
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
        fd = self._lock_file("READERS")
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits for a garbage collection under way
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
