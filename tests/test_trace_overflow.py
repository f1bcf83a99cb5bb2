"""Issue 17 item 6: `simulate --json` never prints Infinity / NaN.

A trace whose finite durations sum beyond the largest float (two chained 1e308) is refused at
validation in one line; the JSON printer is strict (allow_nan=False) whatever it is given.
"""

from __future__ import annotations

import json

import pytest

from levelflow.cli import main
from levelflow.cli.simulate_cmd import json_line
from levelflow.errors import LevelflowError
from levelflow.traces import load_trace
from levelflow.traces.jobtrace import TraceError

CHAIN = {
    "format": "jobtrace/1", "name": "overflow",
    "nodes": [{"id": "a", "duration": 1e308}, {"id": "b", "duration": 1e308}],
    "edges": [["a", "b"]],
    "initial": ["a"],
}


def run(argv, capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def dump(tmp_path, obj, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def message(path) -> str:
    return (f"{path}: durations overflow: the nodes' durations, work and span sum beyond the "
            f"largest float (1.8e+308), so no makespan could be computed")


@pytest.mark.parametrize("argv", [["trace", "validate"], ["simulate"],
                                  ["simulate", "--json"], ["trace", "stats"]])
def test_chained_1e308_durations_are_refused_in_one_line(tmp_path, capsys, argv):
    path = dump(tmp_path, CHAIN)
    code, out, err = run([*argv[:2], str(path), *argv[2:]], capsys)
    assert code != 0 and out == ""
    assert err == message(path) + "\n"


@pytest.mark.parametrize("node", [
    {"id": "b", "duration": 1.0, "work": 1.7e308},  # work overrides the duration in bounds
    {"id": "b", "duration": 1.0, "span": 1.7e308},
])
def test_work_and_span_count_towards_the_sum(tmp_path, node):
    trace = {**CHAIN, "nodes": [{"id": "a", "duration": 1.7e308}, node]}
    path = dump(tmp_path, trace)
    with pytest.raises(TraceError) as e:
        load_trace(path)
    assert str(e.value) == message(path)


def test_one_huge_finite_duration_is_still_a_trace(tmp_path, capsys):
    path = dump(tmp_path, {**CHAIN, "nodes": [{"id": "a", "duration": 1e308},
                                              {"id": "b", "duration": 1.0}]})
    code, out, _ = run(["simulate", str(path), "--json", "-s", "levelbased,hybrid"], capsys)
    assert code == 0
    for line in out.splitlines():
        assert json.loads(line)["makespan"] == pytest.approx(1e308)


def test_simulate_json_output_always_parses(tmp_path, capsys):
    diamond = {"format": "jobtrace/1", "name": "d", "processors": 2,
               "nodes": [{"id": i, "duration": d}
                         for i, d in zip("abcd", (1.0, 2.0, 3.0, 0.0), strict=True)],
               "edges": [["a", "b"], ["a", "c"], ["b", "d"], ["c", "d"]], "initial": ["a"]}
    code, out, err = run(["simulate", str(dump(tmp_path, diamond)), "--json",
                          "-s", "levelbased,signal,hybrid"], capsys)
    assert code == 0 and err == ""
    objs = [json.loads(line, parse_constant=pytest.fail) for line in out.splitlines()]
    assert [o["makespan"] for o in objs] == [4.0, 4.0, 4.0]  # a, then c (3), then d (0)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -float("inf")])
def test_the_json_printer_refuses_non_finite_numbers_in_one_line(value):
    with pytest.raises(LevelflowError) as e:
        json_line({"makespan": value, "tasks": 2}, "t.json: hybrid")
    assert str(e.value) == ("t.json: hybrid: error: a result is not a finite number "
                            "(makespan); not printed")
