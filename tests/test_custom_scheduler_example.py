"""The README's custom heuristic (examples/schedulers/longest_first.py) runs from the CLI."""

import subprocess
import sys
from pathlib import Path

from levelflow.traces import dump_trace, generate_trace, read_schedule
from levelflow.traces.schedule import check_schedule

ROOT = Path(__file__).resolve().parents[1]
SPEC = "examples.schedulers.longest_first:LongestFirst"


def test_longest_first_runs_longest_task_of_each_level_first(tmp_path):
    trace = generate_trace(nodes=300, edges=600, levels=6, initial=20, p=0.6, seed=3)
    dump_trace(trace, tmp_path / "t.json")
    out = tmp_path / "s.csv"
    # Run from the repository root, as the README does: the spec is a module path from there.
    subprocess.run([sys.executable, "-m", "levelflow", "simulate", str(tmp_path / "t.json"),
                    "-s", SPEC, "-P", "1", "--schedule", str(out), "--quiet"],
                   cwd=ROOT, check=True, capture_output=True)
    rows = read_schedule(out, trace)
    assert check_schedule(trace, rows) == []
    by_level: dict[int, list[tuple[float, float]]] = {}
    for task, _, start, _ in rows:
        by_level.setdefault(trace.graph.level[task], []).append((start, trace.durations[task]))
    for runs in by_level.values():
        durations = [d for _, d in sorted(runs)]
        assert durations == sorted(durations, reverse=True)


def test_the_file_path_form_runs_from_any_folder(tmp_path):
    trace = generate_trace(nodes=60, edges=120, levels=4, initial=5, p=0.6, seed=1)
    dump_trace(trace, tmp_path / "t.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path_spec = f"{ROOT / 'examples' / 'schedulers' / 'longest_first.py'}:LongestFirst"
    run = subprocess.run([sys.executable, "-m", "levelflow", "simulate", str(tmp_path / "t.json"),
                          "-s", f"levelbased,{path_spec}", "-P", "2", "--json", "--quiet"],
                         cwd=elsewhere, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.splitlines()) == 2
    # the module form from another folder fails in one line that names the path form
    bad = subprocess.run([sys.executable, "-m", "levelflow", "simulate", str(tmp_path / "t.json"),
                          "-s", "nosuchpkg.longest_first:LongestFirst"],
                         cwd=elsewhere, capture_output=True, text=True)
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1
    assert "path/to/file.py:Class" in bad.stderr
