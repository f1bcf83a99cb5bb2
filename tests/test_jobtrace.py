"""The jobtrace/1 reader and writer: exact round trips and a one-line error for each bad input."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from levelflow.cli import main
from levelflow.traces import (
    JobTrace,
    TraceError,
    dump_trace,
    generate_trace,
    load_trace,
    loads_trace,
    trace_to_obj,
)

#   p0 ──► t1 ──► t2
#    │             ▲
#    └──► t3 ──────┘      t4 (isolated)
GOOD = {
    "format": "jobtrace/1",
    "name": "small",
    "processors": 4,
    "nodes": [
        {"id": "p0", "duration": 0.0, "kind": "predicate"},
        {"id": "t1", "duration": 2.5, "kind": "task", "work": 10.0, "span": 2.5},
        {"id": "t2", "duration": 0.75, "owner": {"team": "x"}, "tags": [1, 2]},
        {"id": "t3", "duration": 1e-7},
        {"id": "t4", "duration": 3},
    ],
    "edges": [["p0", "t1"], ["t1", "t2"], ["p0", "t3"], ["t3", "t2"]],
    "initial": ["t4", "p0"],
    "activations": {"p0": ["t3"], "t3": ["t2"], "t1": []},
}


def _write(tmp_path: Path, obj, name: str = "trace.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def _same(a: dict, b: dict) -> None:
    """Assert two jobtrace objects are equal (edge order aside, which the format leaves free)."""
    assert {k: v for k, v in a.items() if k != "edges"} == \
        {k: v for k, v in b.items() if k != "edges"}
    assert sorted(map(tuple, a["edges"])) == sorted(map(tuple, b["edges"]))
    assert len(a["edges"]) == len(b["edges"])


def _expected(obj: dict) -> dict:
    """Return obj as the writer should emit it: durations become floats."""
    out = copy.deepcopy(obj)
    for node in out["nodes"]:
        node["duration"] = float(node["duration"])
    return out


@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz"])
def test_round_trip_is_exact(tmp_path, name):
    trace = loads_trace(json.dumps(GOOD))
    path = tmp_path / name
    dump_trace(trace, path)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == name.endswith(".gz")
    again = load_trace(path)
    _same(trace_to_obj(again), _expected(GOOD))
    assert again.graph.names == ("p0", "t1", "t2", "t3", "t4")
    assert again.initial == (4, 0)  # file order, not sorted
    assert again.activations == {0: (3,), 3: (2,), 1: ()}
    assert again.work == {1: 10.0} and again.span == {1: 2.5}
    assert again.extra[0] == {"kind": "predicate"}
    assert again.extra[2] == {"owner": {"team": "x"}, "tags": [1, 2]}
    assert list(again.durations) == [0.0, 2.5, 0.75, 1e-7, 3.0]
    assert again.name == "small" and again.processors == 4


def test_absent_and_empty_activations_stay_distinct(tmp_path):
    no_acts = {k: v for k, v in GOOD.items() if k != "activations"}
    trace = loads_trace(no_acts)
    assert trace.activations is None
    assert trace.active_set() == [True] * 5
    dump_trace(trace, tmp_path / "a.json")
    assert "activations" not in json.loads((tmp_path / "a.json").read_text())

    empty = dict(GOOD, activations={})
    trace = loads_trace(empty)
    assert trace.activations == {}
    assert trace.active_set() == [True, False, False, False, True]  # only the initial tasks
    dump_trace(trace, tmp_path / "b.json")
    assert json.loads((tmp_path / "b.json").read_text())["activations"] == {}


def test_optional_fields_absent_round_trip(tmp_path):
    minimal = {"format": "jobtrace/1", "nodes": [{"id": "a", "duration": 1.5}], "edges": [],
               "initial": []}
    dump_trace(loads_trace(minimal), tmp_path / "m.json")
    assert json.loads((tmp_path / "m.json").read_text()) == minimal


def test_generated_trace_round_trips_through_gzip(tmp_path):
    trace = generate_trace(400, 900, 7, 30, 0.4, seed=5)
    dump_trace(trace, tmp_path / "g.json.gz")
    again = load_trace(tmp_path / "g.json.gz")
    _same(trace_to_obj(again), trace_to_obj(trace))
    assert again.graph.level == trace.graph.level
    assert again.active_set() == trace.active_set()


def test_gzip_is_found_by_magic_bytes_not_suffix(tmp_path):
    raw = gzip.compress(json.dumps(GOOD).encode())
    (tmp_path / "zipped.json").write_bytes(raw)
    assert len(load_trace(tmp_path / "zipped.json").graph) == 5
    # A plain file named .gz still reads: the bytes decide.
    (tmp_path / "plain.json.gz").write_text(json.dumps(GOOD))
    assert len(load_trace(tmp_path / "plain.json.gz").graph) == 5
    assert len(loads_trace(raw).graph) == 5


def test_loads_trace_names_its_source():
    with pytest.raises(TraceError, match=r"^runs/42: format"):
        loads_trace({"format": "jobtrace/2"}, source="runs/42")
    with pytest.raises(TraceError, match=r"^<string>: line 1: not JSON"):
        loads_trace("{")


def _mutate(**changes):
    obj = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if value is KeyError:
            del obj[key]
        else:
            obj[key] = value
    return obj


def _nodes_with(i: int, **fields):
    nodes = copy.deepcopy(GOOD["nodes"])
    for k, v in fields.items():
        if v is KeyError:
            del nodes[i][k]
        else:
            nodes[i][k] = v
    return nodes


BAD = [
    # (case id, object, substrings that must all appear in the one line)
    ("unknown edge end", _mutate(edges=GOOD["edges"] + [["t1", "t9"]]),
     ['edges: unknown node "t9" in edge ["t1", "t9"]']),
    ("duplicate id", _mutate(nodes=GOOD["nodes"] + [{"id": "t2", "duration": 1.0}]),
     ['nodes: duplicate id "t2"', "nodes[2]", "nodes[5]"]),
    ("negative duration", _mutate(nodes=_nodes_with(3, duration=-1.0)),
     ['nodes[3] ("t3"): negative duration -1.0']),
    ("cycle", _mutate(edges=GOOD["edges"] + [["t2", "p0"]]), ["edges: cycle through "]),
    ("self loop", _mutate(edges=GOOD["edges"] + [["t4", "t4"]]), ['edges: cycle through "t4"']),
    ("activation to non-child", _mutate(activations={"t1": ["t3"]}),
     ['activations: "t1" activates "t3", which is not its child']),
    ("activation to unknown", _mutate(activations={"t1": ["zz"]}),
     ['activations: "t1" activates unknown node "zz"']),
    ("activation from unknown", _mutate(activations={"zz": []}),
     ['activations: unknown node "zz"']),
    ("activation listed twice", _mutate(activations={"p0": ["t1", "t1"]}),
     ['activations: "p0" lists "t1" twice']),
    ("activations not an object", _mutate(activations=["p0"]), ["activations: expected an object"]),
    ("activation list not a list", _mutate(activations={"p0": "t1"}),
     ['activations: "p0": expected an array']),
    ("duplicate edge", _mutate(edges=GOOD["edges"] + [["t1", "t2"]]),
     ['edges: duplicate edge ["t1", "t2"]']),
    ("missing format", _mutate(format=KeyError), ["format: missing", "jobtrace/1"]),
    ("wrong format", _mutate(format="jobtrace/2"), ['format: expected "jobtrace/1"',
                                                    '"jobtrace/2"']),
    ("unknown initial", _mutate(initial=["p0", "nope"]), ['initial: unknown node "nope"']),
    ("duplicate initial", _mutate(initial=["p0", "p0"]), ['initial: duplicate id "p0"']),
    ("initial not a list", _mutate(initial="p0"), ["initial: expected an array"]),
    ("initial id not a string", _mutate(initial=[0]), ["initial: node ids must be strings"]),
    ("missing nodes", _mutate(nodes=KeyError), ["nodes: missing"]),
    ("missing edges", _mutate(edges=KeyError), ["edges: missing"]),
    ("missing initial", _mutate(initial=KeyError), ["initial: missing"]),
    ("nodes not a list", _mutate(nodes={"id": "a"}), ["nodes: expected an array"]),
    ("node not an object", _mutate(nodes=GOOD["nodes"] + ["t9"]), ["nodes[5]: expected an object"]),
    ("node without id", _mutate(nodes=_nodes_with(1, id=KeyError)), ['nodes[1]: missing "id"']),
    ("empty id", _mutate(nodes=_nodes_with(1, id="")), ["nodes[1]: id must be a non-empty"]),
    ("numeric id", _mutate(nodes=_nodes_with(1, id=7)), ["nodes[1]: id must be a non-empty", "7"]),
    ("missing duration", _mutate(nodes=_nodes_with(2, duration=KeyError)),
     ['nodes[2] ("t2"): missing duration']),
    ("string duration", _mutate(nodes=_nodes_with(2, duration="1s")),
     ['nodes[2] ("t2"): duration must be a number', '"1s"']),
    ("boolean duration", _mutate(nodes=_nodes_with(2, duration=True)),
     ['nodes[2] ("t2"): duration must be a number', "boolean"]),
    ("infinite duration", _mutate(nodes=_nodes_with(2, duration=float("inf"))),
     ['nodes[2] ("t2"): duration', "not finite"]),
    ("nan duration", _mutate(nodes=_nodes_with(2, duration=float("nan"))),
     ['nodes[2] ("t2"): duration is not a number']),
    ("negative work", _mutate(nodes=_nodes_with(1, work=-2)), ['nodes[1] ("t1"): negative work']),
    ("bad span", _mutate(nodes=_nodes_with(1, span="x")), ['nodes[1] ("t1"): span must be']),
    ("bad kind", _mutate(nodes=_nodes_with(1, kind="job")), ['nodes[1] ("t1"): kind', '"job"']),
    ("edges not a list", _mutate(edges={"p0": "t1"}), ["edges: expected an array"]),
    ("edge not a pair", _mutate(edges=GOOD["edges"] + [["p0", "t1", "t2"]]),
     ["edges[4]: expected a pair"]),
    ("edge as a string", _mutate(edges=GOOD["edges"] + ["p0"]), ["edges[4]: expected a pair"]),
    ("edge end not a string", _mutate(edges=[["p0", 1]]), ["edges[0]: node ids must be strings"]),
    ("name not a string", _mutate(name=3), ["name: expected a string"]),
    ("processors zero", _mutate(processors=0), ["processors: expected a positive integer", "0"]),
    ("processors float", _mutate(processors=2.5), ["processors: expected a positive integer"]),
    ("top level not an object", [GOOD], ["expected a JSON object at the top level"]),
    ("integer duration beyond a double", _mutate(nodes=_nodes_with(2, duration=10**400)),
     ['nodes[2] ("t2"): duration is not finite (an integer of 401 digits)']),
    ("integer work beyond a double", _mutate(nodes=_nodes_with(1, work=10**400)),
     ['nodes[1] ("t1"): work is not finite']),
    ("lone surrogate id", _mutate(nodes=_nodes_with(1, id="\ud800")),
     ["nodes[1]: id '\\ud800' is not Unicode text"]),
]


@pytest.mark.parametrize("obj,parts", [(o, p) for _, o, p in BAD], ids=[c for c, _, _ in BAD])
def test_each_malformed_trace_is_one_line_naming_field_and_id(tmp_path, capsys, obj, parts):
    # NaN and Infinity are not JSON, but Python's reader accepts them; the checks must too.
    path = _write(tmp_path, obj)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"{path}: ")
    for part in parts:
        assert part in line, line

    with pytest.raises(SystemExit) as ex:
        main(["trace", "validate", str(path)])
    assert ex.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == line + "\n"


def test_cycle_error_names_a_node_on_the_cycle(tmp_path):
    obj = _mutate(edges=GOOD["edges"] + [["t2", "p0"]])  # p0 -> t1 -> t2 -> p0 and via t3
    with pytest.raises(TraceError) as info:
        loads_trace(obj)
    named = str(info.value).rsplit("cycle through ", 1)[1].strip('"')
    assert named in {"p0", "t1", "t2", "t3"}


@pytest.mark.parametrize("content,parts", [
    (b"not json at all", ["line 1: not JSON"]),
    (b'{"format": "jobtrace/1",\n "nodes": [}', ["line 2: not JSON"]),
    (b"\x1f\x8b\x08\x00garbage", ["not a valid gzip file"]),
    (gzip.compress(b"[1, 2", mtime=0), ["not JSON"]),  # mtime=0: the same bytes in every process
    (b"{\"a\": \"\xff\"}", ["not UTF-8"]),
    (b"", ["not JSON"]),
    (b'{"format": ' + b"9" * 5000 + b"}", ["not JSON this reader accepts"]),
])
def test_unreadable_files_are_one_line(tmp_path, capsys, content, parts):
    path = tmp_path / "broken.json.gz"
    path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    line = str(info.value)
    assert "\n" not in line and line.startswith(str(path))
    for part in parts:
        assert part in line
    with pytest.raises(SystemExit) as ex:
        main(["trace", "validate", str(path)])
    assert ex.value.code == 1
    assert "Traceback" not in capsys.readouterr().err


def test_missing_file_and_directory(tmp_path, capsys):
    with pytest.raises(TraceError, match="nothere.json: no such file"):
        load_trace(tmp_path / "nothere.json")
    with pytest.raises(TraceError, match="is a directory"):
        load_trace(tmp_path)
    with pytest.raises(SystemExit) as ex:
        main(["trace", "stats", str(tmp_path / "nothere.json")])
    assert ex.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err


def test_validate_prints_the_summary(tmp_path, capsys):
    path = _write(tmp_path, GOOD)
    with pytest.raises(SystemExit) as ex:
        main(["trace", "validate", str(path)])
    assert ex.value.code == 0
    # W = {t4, p0} + p0->t3 + t3->t2 = 4 tasks; levels: p0 0, t1/t3 1, t2 2.
    assert capsys.readouterr().out == f"{path}: ok (5 nodes, 4 edges, 3 levels, 4 active)\n"


def test_loaded_trace_matches_the_file(tmp_path):
    trace = load_trace(_write(tmp_path, GOOD))
    assert isinstance(trace, JobTrace)
    names = trace.graph.names
    edges = {(names[u], names[v]) for u, kids in enumerate(trace.graph.children) for v in kids}
    assert edges == {tuple(e) for e in GOOD["edges"]}
    assert [names[v] for v in trace.initial] == GOOD["initial"]
    assert trace.graph.level == [0, 1, 2, 1, 0]


def test_dump_failure_is_one_line_and_leaves_no_file(tmp_path):
    trace = loads_trace(GOOD)
    with pytest.raises(TraceError, match="cannot write"):
        dump_trace(trace, tmp_path / "no" / "such" / "dir.json")
    assert not list(tmp_path.iterdir())


def test_dump_through_a_symlink_writes_the_target(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    dump_trace(loads_trace(GOOD), link)
    assert link.is_symlink()
    assert len(load_trace(target).graph) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]
