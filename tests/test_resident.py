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
    resident._HELD.clear()


def stored(lineage, share, token, value, **change):
    resident.store(lineage, share, token, value, **change)
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


def _grow(base, change):
    return [*base, change]


def _token(k: int) -> str:
    return f"{k:010d}zz"


def test_versions_stored_as_changes_are_rebuilt_from_files_or_from_an_older_copy(root):
    stored("lin", 0, _token(1), ["a"])
    for k, item in ((2, "b"), (3, "c")):  # this process holds the base: a change file only
        stored("lin", 0, _token(k), ["a", "b", "c"][:k], base=_token(k - 1), change=item)
    assert sorted(p.name for p in root.iterdir()) == [
        f"lin-0.{_token(1)}", f"lin-0.{_token(2)}.d", f"lin-0.{_token(3)}.d"]
    resident._MEMORY.clear()  # another process: the full file, then both changes applied
    assert resident.lookup("lin", 0, _token(3), apply=_grow) == ["a", "b", "c"]
    assert resident.lookup("lin", 0, _token(3)) == ["a", "b", "c"]  # now in its memory
    resident._MEMORY.clear()
    resident.remember("lin", 0, _token(2), ["a", "b"])  # an older copy: one change applied
    applied = []
    assert resident.lookup("lin", 0, _token(3),
                           apply=lambda b, c: applied.append(c) or _grow(b, c)) == ["a", "b", "c"]
    assert applied == ["c"]
    resident._MEMORY.clear()
    assert resident.lookup("lin", 0, _token(3)) is None  # without apply: only full files
    assert resident.lookup("lin", 0, _token(4), apply=_grow) is None


def test_every_few_changes_the_whole_version_is_written_and_older_files_go(root, monkeypatch):
    monkeypatch.setattr(resident, "_MAX_DEPTH", 3)
    stored("lin", 0, _token(1), [1])
    for k in range(2, 6):
        stored("lin", 0, _token(k), list(range(1, k + 1)), base=_token(k - 1), change=k)
    # Version 4 was the third change: written whole too, everything older deleted.
    assert sorted(p.name for p in root.iterdir()) == [
        f"lin-0.{_token(4)}", f"lin-0.{_token(4)}.d", f"lin-0.{_token(5)}.d"]
    resident._MEMORY.clear()
    assert resident.lookup("lin", 0, _token(5), apply=_grow) == [1, 2, 3, 4, 5]
    resident._MEMORY.clear()
    stored("lin", 0, _token(6), [0], base=_token(9), change=6)  # a base it does not hold
    assert (root / f"lin-0.{_token(6)}").exists()  # written whole


_CLAIM = """
import sys
from levelflow.engine.plans import resident
print(resident.claim("lin", None, sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
"""


def test_the_tasks_of_a_direct_job_claim_every_share_once_a_held_one_first(root):
    resident.remember("lin", 2, _token(1), "share 2, held")
    resident.remember("lin", 0, _token(0), "share 0, an older version")
    resident.remember("lin", 7, _token(1), "share 7 of a job with more shares")
    job = f"{_token(2)}-j1"
    assert resident.claim("lin", _token(1), job, 3, task=0) == 2  # the one held at the base
    assert resident.claim("lin", _token(1), job, 3, task=1) == 0  # held too old: first free
    assert resident.claim("lin", _token(1), job, 3, task=2) == 1
    with pytest.raises(RuntimeError, match="no share"):  # a fourth task: none left
        resident.claim("lin", _token(1), job, 3, task=3)
    assert resident.claim("lin", _token(1), job, 3, task=1, attempt=1) == 0  # a retry: its own
    resident.claim("lin", _token(2), f"{_token(3)}-j2", 3, task=0)  # the next epoch: none held
    assert sorted(p.name for p in (root / "claims").iterdir()) == [f"lin.{_token(3)}-j2.0"]
    resident.forget(["lin"])
    assert not list((root / "claims").iterdir())
    assert resident.lookup("lin", 2, _token(1)) is None  # nor kept in this process's memory


def test_tasks_claiming_at_once_from_several_processes_get_distinct_shares(root):
    env = {**os.environ, "TMPDIR": str(root)}
    procs = [subprocess.Popen([sys.executable, "-c", _CLAIM, f"{_token(1)}-jx", "6", str(task)],
                              env=env, stdout=subprocess.PIPE, text=True) for task in range(6)]
    shares = sorted(int(p.communicate()[0]) for p in procs)
    assert shares == list(range(6))


# -- the folder is private, and its files cannot run code -----------------------------------------

@pytest.fixture
def private(tmp_path, monkeypatch):
    """Point the folder at tmp_path/r (through the variable the workers inherit)."""
    monkeypatch.setattr(resident, "_checked", None)
    monkeypatch.setenv(resident.ROOT_ENV, str(tmp_path / "r"))
    resident._MEMORY.clear()
    yield tmp_path / "r"
    if resident._WRITER is not None:
        resident._WRITER.join()
    resident._MEMORY.clear()


def test_the_default_folder_is_per_user_and_made_private(tmp_path, monkeypatch):
    import stat
    import tempfile

    monkeypatch.setattr(resident, "_checked", None)
    monkeypatch.delenv(resident.ROOT_ENV, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    root = resident.check_root()
    assert root == tmp_path / f"levelflow-resident-{os.getuid()}"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


@pytest.mark.parametrize("how", ["mode", "owner", "symlink"])
def test_a_folder_not_private_to_the_user_is_refused_in_one_line(private, tmp_path, how):
    if how == "symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        private.symlink_to(tmp_path / "elsewhere")
    else:
        private.mkdir(mode=0o700)
        if how == "mode":
            private.chmod(0o777)
        elif os.getuid() == 0:
            os.chown(private, 4321, -1)
        else:
            pytest.skip("making a folder someone else owns needs root")
    with pytest.raises(resident.ResidentDirError) as e:
        resident.check_root()
    assert "\n" not in str(e.value) and str(e.value).startswith(f"{private}: error: ")
    with pytest.raises(resident.ResidentDirError):  # nothing is read or written there either
        resident.store("lin", 0, "0000000001ab", "x")


class _Planted:
    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_planted_file_that_names_a_function_is_a_miss_and_runs_nothing(private, tmp_path):
    stored("lin", 0, "0000000001ab", ["kept"])  # makes the folder, as a worker would
    planted = _Planted()
    planted.marker = tmp_path / "ran"
    with (private / "lin-0.0000000002ab").open("wb") as f:
        resident._dump({"state": planted}, f)
    resident._MEMORY.clear()
    assert resident.lookup("lin", 0, "0000000002ab") is None
    assert not planted.marker.exists()
    assert resident.lookup("lin", 0, "0000000001ab") == ["kept"]  # its own files still load


def test_states_held_here_stay_in_memory_without_files_until_forgotten(root):
    """The driver's states (resident.held_here): no file written, none dropped for the many
    a worker would keep, gone when their session's lineage is forgotten."""
    with resident.held_here():
        resident.store("drv", 0, _token(1), "the driver's counts")
    for k in range(resident._MEMORY_ENTRIES + 4):  # a worker's memory would drop it now
        resident.store(f"other{k}", 0, _token(1), k)
    resident._WRITER.join()
    assert not list(root.glob("drv-*"))
    assert resident.lookup("drv", 0, _token(1)) == "the driver's counts"
    assert resident.lookup("drv", 0, _token(0)) is None  # another version: a miss
    resident.store("drv", 0, _token(2), "outside the block: a file")
    resident._WRITER.join()
    assert list(root.glob("drv-0.*"))
    assert resident.lookup("drv", 0, _token(1)) is None  # the held one went with it
    resident.forget(["drv"])
    assert resident.lookup("drv", 0, _token(1)) is None
