"""A fresh clone carries everything its tests read: no test reaches outside the repository.

Running the whole suite again inside the suite would cost minutes; instead the git-tracked files
are copied into an empty folder, every test module is scanned for paths that leave the
repository, and the tests that read data files run there (they need no Spark).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A path that climbs above the repository root, or an absolute path into a machine's folders.
_OUTSIDE = [
    re.compile(r"\.parents\[(?:[2-9]|\d\d)\]"),      # tests/x.py -> parents[1] is the root
    re.compile(r"\.parent\.parent\.parent"),
    # a string starting "../" climbs out; a Soufflé `filename="../x"`, `dbname="../x"` or
    # `#include "../x"` in a program under test is the program's own (the confinement tests
    # show such a path refused)
    re.compile(r"""(?<!filename=)(?<!dbname=)(?<!include )(?<!include \\)["'](?:\.\./)+"""),
    re.compile(r"""["']/(?:work|home|Users|mnt|data|srv)/"""),
    re.compile(r"""["']~/"""),
]


def _tracked() -> list[str]:
    """Return the repository's git-tracked paths (what a clone holds)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p and (ROOT / p).is_file()]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """Return a copy of the tracked files in an empty folder: nothing beside it."""
    dest = tmp_path_factory.mktemp("alone") / "levelflow"
    for rel in _tracked():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def test_no_test_names_a_path_outside_the_repository(clone):
    offenders = []
    for path in sorted((clone / "tests").rglob("*.py")):
        if path.name == Path(__file__).name:
            continue  # this file spells the patterns out
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if any(p.search(line) for p in _OUTSIDE):
                offenders.append(f"{path.relative_to(clone)}:{n}: {line.strip()}")
    assert offenders == []


def test_the_test_data_is_tracked(clone):
    wf = sorted(p.name for p in (clone / "tests" / "data" / "wfcommons").glob("*.json"))
    assert len(wf) == 4
    assert (clone / "tests" / "data" / "wfcommons" / "README.md").is_file()  # their source
    assert (clone / "examples" / "tc" / "program.dl").is_file()


def test_the_data_reading_tests_pass_in_the_copy(clone):
    # --rootdir and -p no:cacheprovider keep pytest from writing beside or into the repository.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(clone),
         "tests/test_wfcommons.py", "tests/test_readme.py"],
        cwd=clone, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(clone / "src"), "HOME": str(clone)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, summary
