"""`levelflow simulate`: the table, JSON lines, schedule CSV, Gantt PNG and one-line errors."""

from __future__ import annotations

import json

import pytest

from levelflow.cli import main
from levelflow.simulator.gantt import merge_bars, plot_gantt

#      a(1)
#     /    \
#   b(2)   c(3)      everything activated (no "activations" field); recorded with 2 processors
#     \    /
#      d(1)
DIAMOND = {
    "format": "jobtrace/1", "name": "diamond", "processors": 2,
    "nodes": [{"id": "a", "duration": 1.0}, {"id": "b", "duration": 2.0},
              {"id": "c", "duration": 3.0}, {"id": "d", "duration": 1.0}],
    "edges": [["a", "b"], ["a", "c"], ["b", "d"], ["c", "d"]],
    "initial": ["a"],
}


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "diamond.json"
    path.write_text(json.dumps(DIAMOND))
    return path


def run(argv, capsys) -> tuple[int, str, str]:
    """Return (exit code, stdout, stderr) of the CLI on argv."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_json_prints_one_object_per_scheduler(trace_file, capsys):
    code, out, err = run(["simulate", str(trace_file), "-s", "levelbased,signal", "--json"],
                         capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 2
    objs = [json.loads(line) for line in lines]
    assert [o["scheduler"] for o in objs] == ["levelbased", "signal"]
    for o in objs:
        # P comes from the trace; by hand: a, then b and c side by side, then d: 1 + 3 + 1.
        assert o["processors"] == 2 and o["makespan"] == 5.0 and o["tasks"] == 4
        assert o["overhead_s"] >= 0 and o["lower_bound"] == 5.0
        assert o["utilization"] == pytest.approx(0.7)
        assert isinstance(o["counters"], dict)


def test_processors_flag_overrides_the_trace(trace_file, capsys):
    code, out, _ = run(["simulate", str(trace_file), "-P", "1", "--json"], capsys)
    assert code == 0 and json.loads(out)["makespan"] == 7.0


def test_table_names_every_scheduler(trace_file, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run(["simulate", str(trace_file), "--scheduler", "levelbased,logicblox"],
                       capsys)
    assert code == 0
    assert "levelbased" in out and "logicblox" in out and "makespan" in out


def test_quiet_prints_nothing(trace_file, capsys):
    assert run(["simulate", str(trace_file), "--quiet"], capsys) == (0, "", "")


def test_schedule_csv_has_the_spec_header_and_a_valid_schedule(trace_file, tmp_path, capsys):
    from levelflow.traces import load_trace
    from levelflow.traces.schedule import check_schedule, read_schedule

    out_csv = tmp_path / "s.csv"
    code, _, _ = run(["simulate", str(trace_file), "-s", "hybrid", "--schedule", str(out_csv),
                      "--quiet"], capsys)
    assert code == 0
    lines = out_csv.read_text().splitlines()
    assert lines[0] == "task,processor,start,end"
    assert sorted(line.split(",")[0] for line in lines[1:]) == ["a", "b", "c", "d"]
    trace = load_trace(trace_file)
    assert check_schedule(trace, read_schedule(out_csv, trace)) == []


def test_gantt_writes_a_png(trace_file, tmp_path, capsys):
    png = tmp_path / "g.png"
    code, _, _ = run(["simulate", str(trace_file), "--gantt", str(png), "--quiet"], capsys)
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gantt_merges_bars_past_the_cap(tmp_path):
    # 1,000 back-to-back 1 s tasks on each of 2 processors, one 1 s hole on processor 1.
    rows = [(i, 0, float(i), i + 1.0) for i in range(1000)]
    rows += [(1000 + i, 1, float(i), i + 1.0) for i in range(1000) if i != 500]
    merged = merge_bars(rows, 2)
    assert merged[0] == [(0.0, 1000.0)]
    assert merged[1] == [(0.0, 500.0), (501.0, 499.0)]
    assert plot_gantt(rows, 2, tmp_path / "g.png", max_bars=100) == 3
    assert (tmp_path / "g.png").stat().st_size > 0


@pytest.mark.parametrize("argv, code, needle", [
    (["-s", "levelbased,signal", "--schedule", "x.csv"], 2, "--schedule"),
    (["-s", "levelbased,signal", "--gantt", "x.png"], 2, "--gantt"),
    (["-s", "no-such-scheduler"], 2, "no-such-scheduler"),
    (["-P", "0"], 2, "-P"),
    (["-P", "many"], 2, "-P"),
    (["--model", "quantum"], 2, "quantum"),
])
def test_bad_flags_exit_nonzero_with_one_line(trace_file, capsys, argv, code, needle):
    got, out, err = run(["simulate", str(trace_file), *argv], capsys)
    assert got == code
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_missing_trace_is_one_line(tmp_path, capsys):
    code, out, err = run(["simulate", str(tmp_path / "nope.json")], capsys)
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "nope.json" in err


def test_progress_bar_run_gives_the_plain_result(trace_file):
    from levelflow.cli.simulate_cmd import _with_progress
    from levelflow.simulator import simulate
    from levelflow.traces import load_trace

    trace = load_trace(trace_file)
    shown = _with_progress(trace, "levelbased", "levelbased", 2, "serial", False, True)
    plain = simulate(trace, "levelbased", 2, record_schedule=True)
    assert shown.makespan == plain.makespan == 5.0
    assert shown.schedule == plain.schedule


def test_a_stalling_scheduler_is_one_line_naming_it(trace_file, capsys, monkeypatch):
    from test_simulator import Stuck

    from levelflow.scheduler import registry

    monkeypatch.setitem(registry._REGISTRY, "stuck-for-test", Stuck)
    code, out, err = run(["simulate", str(trace_file), "-s", "stuck-for-test"], capsys)
    assert code == 3 and out == ""
    assert len(err.strip().splitlines()) == 1 and "stuck-for-test" in err and "stalled" in err
