"""User text reaches rich and matplotlib as text; the Gantt draws busy processors; tables fit."""

from __future__ import annotations

import json
import os
import time

import pytest
from rich.console import Console

from levelflow.cli import main
from levelflow.cli.simulate_cmd import _table
from levelflow.simulator import simulate
from levelflow.simulator.gantt import plot_gantt, utilization
from levelflow.text import for_matplotlib, for_rich, printable
from levelflow.traces import load_trace

WEIRD = ["[/]", r"$\frac$", "[bold]x", "a$b$c"]


def _trace(tmp_path, file_name: str = "t.json", name: str = "[/] $\\frac{1}{2}$"):
    """Write a diamond trace whose name and task ids are markup and mathtext."""
    a, b, c, d = WEIRD
    obj = {"format": "jobtrace/1", "name": name, "processors": 2,
           "nodes": [{"id": a, "duration": 1.0}, {"id": b, "duration": 2.0},
                     {"id": c, "duration": 3.0}, {"id": d, "duration": 1.0}],
           "edges": [[a, b], [a, c], [b, d], [c, d]], "initial": [a]}
    path = tmp_path / file_name
    path.write_text(json.dumps(obj))
    return path


def _run(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_helpers_keep_text_as_it_is():
    assert Console().render_str(for_rich("[/] [bold]x")).plain == "[/] [bold]x"
    assert printable("a\udcffb") == "a\\udcffb"
    assert for_matplotlib(r"$\frac$") == r"\$\frac\$"


def test_trace_stats_and_simulate_show_markup_names_as_text(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = _trace(tmp_path, "we[bold]ird.json")  # markup that rich would swallow
    code, out, err = _run(["trace", "stats", str(path)], capsys)
    assert code == 0, err
    flat = "".join(out.split())  # the title may wrap
    assert "we[bold]ird.json" in flat and "[/]$\\frac{1}{2}$" in flat
    code, out, err = _run(["simulate", str(path), "-s", "levelbased"], capsys)
    assert code == 0, err
    assert "[/] $\\frac{1}{2}$" in out


def test_gantt_with_mathtext_names_and_labels(tmp_path, capsys):
    png = tmp_path / "g.png"
    code, _, err = _run(["simulate", str(_trace(tmp_path)), "--gantt", str(png), "--quiet"],
                        capsys)
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_undecodable_file_names_do_not_crash_graph_or_stats(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    weird = os.fsdecode(b"bad\xff")  # a lone surrogate, as Python decodes such a name
    prog = tmp_path / f"{weird}$\\frac$[bold].dl"
    prog.write_text(".decl a(x:number)\n.decl b(x:number)\nb(x) :- a(x).\n")
    code, out, err = _run(["graph", str(prog)], capsys)
    assert code == 0, err
    unwrapped = "".join(out.split())  # the title may wrap anywhere at the table's width
    assert "\\udcff" in unwrapped and "[bold].dl" in unwrapped
    trace = _trace(tmp_path, f"{weird}.json")
    code, out, err = _run(["trace", "stats", str(trace)], capsys)
    assert code == 0, err


def test_gantt_draws_only_busy_processors_fast(tmp_path):
    t0 = time.perf_counter()
    assert plot_gantt([(0, 77_777, 0.0, 2.0)], 100_000, tmp_path / "g.png", names=["t"]) == 1
    assert time.perf_counter() - t0 < 10


def test_utilization_strip_is_the_busy_fraction():
    rows = [(0, 0, 0.0, 2.0), (1, 1, 1.0, 3.0), (2, 0, 2.0, 4.0)]
    times, busy = utilization(rows, 2)
    assert times == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert busy == [0.5, 1.0, 1.0, 0.5, 0.0]


@pytest.mark.parametrize("width", [80, 60])
def test_table_fits_narrow_terminals_by_dropping_columns(tmp_path, width):
    trace = load_trace(_trace(tmp_path))
    specs = ["levelbased", "lookahead:15", "logicblox", "hybrid:logicblox", "signal"]
    results = [simulate(trace, s, 2, label=s) for s in specs]
    table = _table(results, trace, 2, "serial", width)
    console = Console(width=width, record=True, file=open(os.devnull, "w"))
    console.print(table)
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= width
    assert "…" not in text  # nothing cut
    names = [c.header for c in table.columns]
    assert {"scheduler", "makespan (s)", "utilization"} <= set(names)
    if width == 60:
        assert "ops" not in names  # the first to go
    assert len(_table(results, trace, 2, "serial", 300).columns) == 8
