"""convert_wfcommons on small instances of each schema and on the real files in tests/data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from levelflow.cli import main
from levelflow.traces import TraceError, convert_wfcommons, dump_trace, load_trace, trace_to_obj

# The repository carries its sample instances (tests/data/wfcommons/README.md says where from).
DATA = Path(__file__).resolve().parent / "data" / "wfcommons"
REAL = sorted(DATA.glob("*.json"))

#  split ──► a ──► merge
#    └────► b ─────┘        lone (no edges)


def _v0() -> dict:
    """Return a schema 0.x instance: workflow.jobs, runtime, parents by name."""
    return {"name": "v0-demo", "schemaVersion": "0.2", "workflow": {"jobs": [
        {"name": "split", "type": "compute", "runtime": 1.5, "parents": []},
        {"name": "a", "runtime": 2, "parents": ["split"]},
        {"name": "b", "runtime": 3.25, "parents": ["split", "split"]},  # redundant
        {"name": "merge", "parents": ["a", "b"]},                         # no runtime -> 0
        {"name": "lone", "runtime": 0.5},
    ]}}


def _v14() -> dict:
    """Return a schema 1.4 instance: workflow.tasks, runtimeInSeconds, name references."""
    return {"name": "v14-demo", "schemaVersion": "1.4", "workflow": {"tasks": [
        {"name": "split", "id": "ID01", "runtimeInSeconds": 1.5, "parents": [],
         "children": ["a"]},                       # b only says split is its parent
        {"name": "a", "id": "ID02", "runtimeInSeconds": 2.0, "parents": ["split"],
         "children": ["merge"]},
        {"name": "b", "id": "ID03", "runtimeInSeconds": 3.25, "parents": ["split"]},
        {"name": "merge", "id": "ID04", "runtimeInSeconds": 0.0, "parents": ["a", "ID03"]},
        {"name": "lone", "id": "ID05", "runtime": 0.5, "parents": []},  # 1.0-style key
    ]}}


def _v15() -> dict:
    """Return a schema 1.5 instance: specification by id + execution runtimes."""
    spec = [
        {"name": "split", "id": "split_1", "parents": [], "children": ["a_1", "b_1"]},
        {"name": "work", "id": "a_1", "parents": ["split_1"], "children": []},
        {"name": "work", "id": "b_1", "parents": [], "children": ["merge_1"]},  # inconsistent
        {"name": "merge", "id": "merge_1", "parents": ["a_1"], "children": []},
        {"name": "lone", "id": "lone_1", "parents": [], "children": []},
    ]
    execution = [{"id": "split_1", "runtimeInSeconds": 1.5}, {"id": "a_1", "runtimeInSeconds": 2},
                 {"id": "b_1", "runtimeInSeconds": 3.25}, {"id": "lone_1", "runtimeInSeconds": 0.5}]
    return {"name": "v15-demo", "schemaVersion": "1.5",
            "workflow": {"specification": {"tasks": spec, "files": []},
                         "execution": {"makespanInSeconds": 7, "tasks": execution}}}


def _edges(trace) -> set[tuple[str, str]]:
    names = trace.graph.names
    return {(names[u], names[v]) for u, kids in enumerate(trace.graph.children) for v in kids}


@pytest.mark.parametrize("make,ids", [
    (_v0, ["split", "a", "b", "merge", "lone"]),
    (_v14, ["split", "a", "b", "merge", "lone"]),
    (_v15, ["split_1", "a_1", "b_1", "merge_1", "lone_1"]),
])
def test_each_schema_converts_to_the_same_dag(make, ids):
    trace = convert_wfcommons(make())
    s, a, b, m, lone = ids
    assert trace.graph.names == tuple(ids)
    assert _edges(trace) == {(s, a), (s, b), (a, m), (b, m)}
    assert list(trace.durations) == [1.5, 2.0, 3.25, 0.0, 0.5]
    assert trace.initial == (0, 4)  # every source
    assert trace.activations is None
    assert all(trace.active_set())
    assert trace.name == make()["name"]


def test_v15_keeps_names_and_v14_keeps_ids(tmp_path):
    t15 = convert_wfcommons(_v15())
    assert t15.extra[1] == {"kind": "task", "name": "work"}
    t14 = convert_wfcommons(_v14())
    assert t14.extra[0] == {"kind": "task", "wf_id": "ID01"}
    # The converted trace is a valid jobtrace/1 file.
    dump_trace(t15, tmp_path / "t.json")
    assert trace_to_obj(load_trace(tmp_path / "t.json")) == trace_to_obj(t15)


def test_initial_and_activation_options():
    wf = _v0()
    t = convert_wfcommons(wf, initial=["b"], activate_all=False)
    assert t.initial == (2,) and t.activations == {}
    assert t.active_set() == [False, False, True, False, False]

    t = convert_wfcommons(wf, initial=["a", "b"])
    assert t.active_set() == [False, True, True, True, False]

    t = convert_wfcommons(wf, initial_fraction=0.5, seed=1)
    assert len(t.initial) == 1 and t.initial[0] in (0, 4)

    draws = [convert_wfcommons(wf, activation_p=0.5, seed=s).activations for s in range(30)]
    assert draws[3] == convert_wfcommons(wf, activation_p=0.5, seed=3).activations
    children = convert_wfcommons(wf).graph.children
    for acts in draws:
        assert all(set(kids) <= set(children[u]) for u, kids in acts.items())
    assert len({json.dumps(sorted(d.items())) for d in draws}) > 1
    assert convert_wfcommons(wf, activation_p=1.0).activations == {0: (1, 2), 1: (3,), 2: (3,)}

    with pytest.raises(TraceError, match='initial: unknown task "nope"'):
        convert_wfcommons(wf, initial=["nope"])
    with pytest.raises(TraceError, match="no initial tasks"):
        convert_wfcommons(wf, all_sources_initial=False)


def _broken(mutate) -> dict:
    wf = _v14()
    mutate(wf["workflow"]["tasks"])
    return wf


@pytest.mark.parametrize("obj,parts", [
    (_broken(lambda ts: ts[3]["parents"].append("ghost")),
     ['workflow.tasks[3] ("merge"): parent "ghost" is not a task']),
    (_broken(lambda ts: ts[0].update(children=["a", "ghost"])),
     ['workflow.tasks[0] ("split"): child "ghost"']),
    (_broken(lambda ts: ts[0]["parents"].append("merge")), ["edges: cycle through"]),
    (_broken(lambda ts: ts.append({"name": "a", "runtimeInSeconds": 1})),
     ['workflow.tasks: duplicate task "a"']),
    (_broken(lambda ts: ts[1].update(runtimeInSeconds=-4.0)),
     ['workflow.tasks[1] ("a"): negative runtimeInSeconds']),
    (_broken(lambda ts: ts[1].update(runtimeInSeconds="fast")),
     ['workflow.tasks[1] ("a"): runtimeInSeconds must be a finite number']),
    (_broken(lambda ts: ts[2].pop("name") and ts[2].pop("id")), ['workflow.tasks[2]: missing']),
    (_broken(lambda ts: ts[2].update(parents="split")), ['workflow.tasks[2] ("b"): parents']),
    (_broken(lambda ts: ts.append(7)), ["workflow.tasks[5]: expected a task object"]),
    ({"workflow": {"specification": {"tasks": {}}}},
     ["workflow.specification.tasks: expected an array"]),
    ({"workflow": {}}, ["workflow: no tasks found"]),
    ({"name": "x"}, ["workflow: missing"]),
    ([1, 2], ["not a WfCommons instance"]),
])
def test_bad_instances_are_one_line(tmp_path, capsys, obj, parts):
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(obj))
    with pytest.raises(TraceError) as info:
        convert_wfcommons(path)
    line = str(info.value)
    assert "\n" not in line and line.startswith(str(path))
    for part in parts:
        assert part in line, line
    with pytest.raises(SystemExit) as ex:
        main(["trace", "convert", "--from", "wfcommons", str(path), str(tmp_path / "out.json")])
    assert ex.value.code == 1
    assert capsys.readouterr().err == line + "\n"
    assert not (tmp_path / "out.json").exists()


def _file_tasks(obj: dict) -> tuple[list[str], set[tuple[str, str]], dict[str, float]]:
    """Return task keys, edges (from parents AND children) and runtimes read plainly."""
    wf = obj["workflow"]
    if "specification" in wf:
        tasks = wf["specification"]["tasks"]
        keys = [t["id"] for t in tasks]
        runtime = {t["id"]: t["runtimeInSeconds"] for t in wf["execution"]["tasks"]}
    else:
        tasks = wf["tasks"]
        keys = [t["name"] for t in tasks]
        runtime = {t["name"]: t["runtimeInSeconds"] for t in tasks}
    edges = set()
    for t, k in zip(tasks, keys, strict=True):
        edges |= {(p, k) for p in t.get("parents", [])}
        edges |= {(k, c) for c in t.get("children", [])}
    return keys, edges, runtime


def test_the_real_files_are_all_here():
    assert len(REAL) == 4


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_files_convert(tmp_path, capsys, path):
    obj = json.loads(path.read_text())
    keys, edges, runtime = _file_tasks(obj)
    trace = convert_wfcommons(path)
    assert len(trace.graph) == len(keys) and list(trace.graph.names) == keys
    assert _edges(trace) == edges and trace.graph.num_edges == len(edges)
    assert list(trace.durations) == [float(runtime.get(k, 0.0)) for k in keys]
    sources = [i for i, ps in enumerate(trace.graph.parents) if not ps]
    assert list(trace.initial) == sources and all(trace.active_set())

    out = tmp_path / "out.json.gz"
    with pytest.raises(SystemExit) as ex:
        main(["trace", "convert", "--from", "wfcommons", str(path), str(out),
              "--activation-p", "0.5", "--seed", "4", "--initial-fraction", "0.5"])
    assert ex.value.code == 0
    assert capsys.readouterr().out.startswith(f"{out}: wrote {len(keys)} nodes, {len(edges)}")
    converted = load_trace(out)
    assert len(converted.initial) == math.ceil(0.5 * len(sources))
    assert _edges(converted) == edges


def test_cli_convert_rejects_other_formats_and_takes_initial_ids(tmp_path, capsys):
    src = tmp_path / "wf.json"
    src.write_text(json.dumps(_v0()))
    with pytest.raises(SystemExit) as ex:
        main(["trace", "convert", "--from", "pegasus-dax", str(src), str(tmp_path / "o.json")])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'pegasus-dax' is not a supported input format" in err
    assert "wfcommons" in err and not (tmp_path / "o.json").exists()

    with pytest.raises(SystemExit) as ex:
        main(["trace", "convert", "--from", "wfcommons", str(src), str(tmp_path / "o.json"),
              "--initial", "a", "--initial", "lone"])
    assert ex.value.code == 0
    trace = load_trace(tmp_path / "o.json")
    assert [trace.graph.names[v] for v in trace.initial] == ["a", "lone"]
