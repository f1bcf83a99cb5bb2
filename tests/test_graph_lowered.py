"""`levelflow graph` names the relations Soufflé's surface is lowered to, as a user finds them:
component instances `inst.rel`, an eqrel relation (its own recursive task), a disjunction (no
helper relation: its alternatives are rules of the head), a path expression's closure `@plus1`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from levelflow.cli import main as cli_main

PROGRAM = Path(__file__).parent / "data" / "lowered" / "graph_names.dl"


def _graph(capsys, *flags: str) -> str:
    with pytest.raises(SystemExit) as e:
        cli_main(["graph", str(PROGRAM), *flags])
    out = capsys.readouterr()
    assert e.value.code == 0, out.err
    return out.out


def test_json_names_every_lowered_relation(capsys):
    graph = json.loads(_graph(capsys, "--json"))
    tasks = {t["name"]: t for t in graph["tasks"]}
    # exactly the relations the program names (instances qualified) and the closure
    assert sorted(r for t in graph["tasks"] for r in t["relations"]) == [
        "@plus1", "e", "either", "far", "g.edge", "g.reach", "same"]
    assert tasks["g.reach"]["recursive"] and tasks["same"]["recursive"]  # eqrel: a closure
    assert not tasks["either"]["recursive"]
    assert tasks["@plus1"]["closure"]
    assert graph["paths"] == [{"relation": "@plus1", "expression": "e+"}]
    ids = {t["id"]: t["name"] for t in graph["tasks"]}
    edges = {(ids[u], ids[v]) for u, v in graph["edges"]}
    assert {("e", "g.edge"), ("g.edge", "g.reach"), ("g.reach", "same"), ("@plus1", "far"),
            ("e", "either")} <= edges


def test_table_and_dot_show_the_qualified_names(capsys, tmp_path):
    table = _graph(capsys, "--dot", str(tmp_path / "g.dot"))
    for name in ("g.edge", "g.reach", "same", "either", "@plus1"):
        assert f" {name} " in table, table
    dot = (tmp_path / "g.dot").read_text()
    assert 'label="g.reach\\nlevel 2"' in dot and 'label="same\\nlevel 3"' in dot, dot
