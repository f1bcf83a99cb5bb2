"""plans/resident.py: executor-side state by lineage, share and token; files swept when stale."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from levelflow.engine.plans import resident


@pytest.fixture
def root(tmp_path, monkeypatch):
    """Keep the files in tmp_path, the memory empty, and the sweep due."""
    monkeypatch.setattr(resident, "_root", lambda: tmp_path)
    monkeypatch.setattr(resident, "_last_sweep", 0.0)
    resident._MEMORY.clear()
    yield tmp_path
    if resident._WRITER is not None:
        resident._WRITER.join()
    resident._MEMORY.clear()


def stored(lineage, share, token, value):
    resident.store(lineage, share, token, value)
    resident._WRITER.join()


def test_a_state_is_found_in_memory_then_in_its_file(root):
    stored("lin", 0, "0000000001ab", {"rows": [1, 2]})
    assert resident.lookup("lin", 0, "0000000001ab") == {"rows": [1, 2]}
    resident._MEMORY.clear()  # another worker process of the executor: only the file
    assert resident.lookup("lin", 0, "0000000001ab") == {"rows": [1, 2]}
    assert resident.lookup("lin", 0, "0000000002ab") is None  # another version: a miss
    assert resident.lookup("lin", 1, "0000000001ab") is None


def test_frames_series_and_arrays_come_back_from_the_file_mapped_not_copied(root):
    import numpy as np
    import polars as pl

    frame = pl.DataFrame({"c0": [3, 1, 2], "c1": ["x", "y", None], "_it": [1, 2, 3]})
    value = {"state": (frame, np.array([5, 7, 9]), np.array([True, False])),
             "symbols": pl.Series("s", ["a", "b"]), "empty": frame.clear(), "n": 4}
    stored("lin", 0, "0000000001ab", value)
    resident._MEMORY.clear()
    back = resident.lookup("lin", 0, "0000000001ab")
    (f, keys, mask), symbols = back["state"], back["symbols"]
    assert f.equals(frame) and back["empty"].equals(frame.clear()) and back["n"] == 4
    assert keys.tolist() == [5, 7, 9] and mask.tolist() == [True, False]
    assert symbols.name == "s" and symbols.to_list() == ["a", "b"]
    assert not keys.flags.owndata  # a view of the mapped file


def test_a_damaged_file_is_a_miss(root):
    stored("lin", 0, "0000000001ab", {"rows": [1, 2]})
    resident._MEMORY.clear()
    path = root / "lin-0.0000000001ab"
    path.write_bytes(path.read_bytes()[:-3])
    assert resident.lookup("lin", 0, "0000000001ab") is None


def test_a_newer_version_deletes_the_older_file_only(root):
    stored("lin", 0, "0000000001ab", "one")
    stored("lin", 0, "0000000002cd", "two")
    assert sorted(p.name for p in root.iterdir()) == ["lin-0.0000000002cd"]
    stored("lin", 0, "0000000001ef", "late older write")  # must not delete the newer one
    assert (root / "lin-0.0000000002cd").exists()


def test_files_untouched_for_long_are_swept_and_used_ones_kept(root):
    stale, used = root / "gone-0.0000000001aa", root / "kept-0.0000000001aa"
    for path in (stale, used):
        path.write_bytes(b"not even a pickle")
        old = time.time() - resident.MAX_AGE_SECONDS - 60
        os.utime(path, (old, old))
    stored("kept", 0, "0000000001aa", "read again")
    os.utime(used, (time.time() - resident.MAX_AGE_SECONDS - 60,) * 2)
    resident._MEMORY.clear()
    assert resident.lookup("kept", 0, "0000000001aa") == "read again"  # touched by the read
    resident._last_sweep = 0.0
    stored("other", 0, "0000000001bb", "x")
    assert not stale.exists() and used.exists()


def test_a_lookup_waits_for_a_write_in_progress_not_for_a_dead_writer(root):
    path = root / "lin-0.0000000003aa"
    resident._tmp(path).touch()  # this process is writing it
    later = threading.Timer(0.3, resident._write, args=(path, "written late"))
    later.start()
    t = time.monotonic()
    assert resident.lookup("lin", 0, "0000000003aa") == "written late"
    assert time.monotonic() - t >= 0.25 and not resident._tmp(path).exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (root / f"lin-1.0000000003aa.tmp{dead}").touch()  # its writer was killed
    t = time.monotonic()
    assert resident.lookup("lin", 1, "0000000003aa") is None
    assert time.monotonic() - t < 1
