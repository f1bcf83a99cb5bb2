"""The README's ten-minute guide runs as written in a fresh clone and leaves no untracked file.

Its ```sh blocks run in order as one bash script (its ```python blocks at their places, given to
the same Python), in a copy of the repository made a git repository of its own, with
`levelflow` on PATH running the copy's code. Afterwards `git status` there must be clean: every
file the tour writes is under a path .gitignore names (out/). The serve example is a plain
``` block (a server in the background, on a fixed port): tests/test_serve.py covers serve.

Every `levelflow` command runs as a process of its own, as written, but they share one Spark JVM
started beforehand (PySpark connects to it through PYSPARK_GATEWAY_PORT, as under
spark-submit): ten JVM starts cost minutes, and a command's own JVM start is tested in
tests/test_cli_spark.py, tests/test_run.py and tests/test_serve.py. So do the ```python blocks:
`python` runs a block as written, then stops the SparkContext the block left running (as a
`levelflow` command does at its end), so that the next command can start its own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = "## A ten-minute guide"


def tour_script(readme: str) -> str:
    """Return the guide's ```sh and ```python blocks as one bash script, in README order."""
    guide = readme[readme.index(GUIDE):]
    guide = guide[:guide.index("\n## ", len(GUIDE))]
    parts = ["set -euo pipefail"]
    for lang, body in re.findall(r"^```(sh|python)\n(.*?)^```$", guide, re.S | re.M):
        parts.append(body if lang == "sh" else f"python - <<'PYTHON'\n{body}PYTHON")
    return "\n".join(parts) + "\n"


def test_the_guide_has_the_tour_blocks():
    script = tour_script((ROOT / "README.md").read_text())
    for command in ("levelflow run", "levelflow update", "levelflow shell", "levelflow simulate",
                    "levelflow state check", "levelflow.run(", "IncrementalSession.bootstrap"):
        assert command in script, command
    for path in re.findall(r"examples/\S+?\.(?:dl|diff|py)\b", script):
        assert (ROOT / path).is_file(), path  # tc2.dl, new.dl, change.diff, longest_first.py
    assert (ROOT / "examples" / "tc" / "new-facts" / "start.facts").is_file()


def _fresh_clone(dest: Path) -> Path:
    """Return a git repository at `dest` holding this checkout's files (tracked or new)."""
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "clone"]):
        subprocess.run([*git, *args], cwd=dest, check=True, capture_output=True)
    return dest


# `python - <<'PYTHON'`: the block (stdin) runs as __main__; its SparkContext is then stopped.
BLOCK = """import sys
from pyspark import SparkContext
assert sys.argv[1:] == ["-"], sys.argv
sys.argv, sys.path[0] = ["-"], ""  # as `python -` has them
try:
    exec(compile(sys.stdin.read(), "<stdin>", "exec"), {"__name__": "__main__"})
finally:
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
"""


@contextmanager
def _one_jvm(clone: Path, log: Path):
    """Start the JVM the tour's commands share, in `clone`; yield its PySpark gateway variables."""
    from pyspark.java_gateway import launch_gateway

    from levelflow.cli import defaults
    from levelflow.cli.spark import end_jvm
    from levelflow.engine.session import spark_conf

    conf = spark_conf(defaults.MASTER, driver_memory=defaults.DRIVER_MEMORY)
    with pytest.MonkeyPatch.context() as mp, open(log, "wb") as out:
        mp.setenv("PYTHONPATH", str(clone / "src"))  # its Python workers run the clone's code
        gateway = launch_gateway(conf, popen_kwargs={"cwd": clone, "stdout": out, "stderr": out,
                                                     "start_new_session": True})
    try:
        params = gateway.java_parameters
        yield {"PYSPARK_GATEWAY_PORT": str(params.port),
               "PYSPARK_GATEWAY_SECRET": params.auth_token}
    finally:
        gateway.close()
        end_jvm(gateway.proc)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_tour_runs_as_written_and_leaves_no_untracked_file(tmp_path):
    clone = _fresh_clone(tmp_path / "levelflow")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "block.py").write_text(BLOCK)
    for name, target in (("levelflow", f'"{sys.executable}" -m levelflow'),
                         ("python", f'"{sys.executable}" "{bin_dir / "block.py"}"')):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {target} "$@"\n')
        shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=str(clone / "src"), COLUMNS="120")
    script = tour_script((clone / "README.md").read_text())
    with _one_jvm(clone, tmp_path / "jvm.log") as gateway:
        proc = subprocess.run(["bash", "-c", script], cwd=clone, env={**env, **gateway},
                              capture_output=True, text=True, timeout=1200,
                              stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "ran 3 of 3 tasks in " in out
    assert "nothing to do" in out
    assert re.search(r"^new: .*same_cycle", out, re.M) and re.search(r"^new: .*reached", out,
                                                                      re.M)
    # reached: the nodes a path leads to from start (18), over the edges after change.diff
    edges = {tuple(map(int, ln.split("\t"))) for ln in
             (clone / "examples" / "tc" / "facts" / "edge.facts").read_text().splitlines()}
    edges = (edges | {(21, 22)}) - {(1, 2)}
    reached, frontier = set(), {18}
    while frontier:
        frontier = {y for x, y in edges if x in frontier} - reached
        reached |= frontier
    assert sorted(map(int, (clone / "out" / "tc" / "reached.csv").read_text().split())) == \
        sorted(reached)
    # CURRENT's first line is the epoch (the second names its manifest's checksum).
    assert (clone / "out" / "tc-state" / "CURRENT").read_text().splitlines()[0] == "3"
    assert (clone / "out" / "g.png").read_bytes()[:4] == b"\x89PNG"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone,
                            capture_output=True, text=True, check=True).stdout
    assert status == "", status
