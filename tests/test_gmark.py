"""gMark workloads: the schema reader, the seeded graph generator's shape, the views, the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from levelflow.cli import main
from levelflow.tasks import build_tasks, load_program
from levelflow.workloads.gmark import generate_graph, type_ranges, write_workload
from levelflow.workloads.gmark_schema import SchemaError, read_schema

DATA = Path(__file__).parent / "data" / "gmark"


def test_reads_both_schemas():
    shop = read_schema(DATA / "shop.xml")
    assert len(shop.labels) == 82 and len(shop.types) == 24
    assert shop.types[0] == ("Genre", 21, None) and shop.types[9][2] == 0.01
    kinds = {d.kind for e in shop.edges for d in (e.in_dist, e.out_dist) if d is not None}
    assert kinds == {"uniform", "gaussian", "zipfian"}
    social = read_schema(DATA / "social-network.xml")
    assert social.labels[0] == "knows" and len(social.types) == 15
    knows = next(e for e in social.edges if e.label == "knows")
    assert (knows.source, knows.target, knows.multiplicity) == (0, 0, "*")
    assert knows.out_dist.kind == "zipfian" and knows.out_dist.params == {"alpha": 2.5}


def test_graph_is_deterministic_by_seed_and_follows_the_schema():
    schema = read_schema(DATA / "social-network.xml")
    one, two = generate_graph(schema, 2000, 7), generate_graph(schema, 2000, 7)
    other = generate_graph(schema, 2000, 8)
    assert all(np.array_equal(one[k], two[k]) for k in one)
    assert any(not np.array_equal(one[k], other[k]) for k in one)
    ranges = type_ranges(schema, 2000)
    # every edge of a label lies within the type ranges of one of the label's specs
    for label, pairs in one.items():
        specs = [e for e in schema.edges if e.label == label]
        ok = np.zeros(len(pairs), bool)
        for e in specs:
            (s0, ns), (t0, nt) = ranges[e.source], ranges[e.target]
            ok |= ((pairs[:, 0] >= s0) & (pairs[:, 0] < s0 + ns)
                   & (pairs[:, 1] >= t0) & (pairs[:, 1] < t0 + nt))
        assert ok.all(), label
    # multiplicity 1 with a 1..1 out-distribution: every City is part of exactly one Country
    (c0, nc), _ = ranges[3], ranges[4]
    city_part = one["isPartOf"][(one["isPartOf"][:, 0] >= c0) & (one["isPartOf"][:, 0] < c0 + nc)]
    assert len(city_part) == nc and len(np.unique(city_part[:, 0])) == nc
    # zipfian out-degrees of knows: skewed, most persons know few
    deg = np.bincount(one["knows"][:, 0] - ranges[0][0], minlength=ranges[0][1])
    assert np.median(deg) <= 2 < deg.max()


def test_fixed_counts_and_proportions():
    schema = read_schema(DATA / "shop.xml")
    ranges = type_ranges(schema, 10_000)
    assert ranges[0][1] == 21 and ranges[16][1] == 1700  # fixed Genre, 0.17 of N Offers
    starts = [s for s, _ in ranges]
    assert starts == sorted(starts)


def test_workload_program_parses_with_views_over_labels(tmp_path):
    schema = read_schema(DATA / "social-network.xml")
    figures = write_workload(schema, 500, 10, 3, tmp_path)
    assert len(figures["views"]) == 10 and all("[" in v for v in figures["views"])
    pt = build_tasks(load_program(tmp_path / "program.dl"))
    assert set(pt.program.outputs) == {f"q{k}" for k in range(10)}
    assert set(pt.program.inputs) == set(schema.labels)
    assert sorted(p.name for p in (tmp_path / "facts").iterdir()) == sorted(
        f"{label}.facts" for label in schema.labels)
    again = tmp_path / "again"
    assert write_workload(schema, 500, 10, 3, again)["views"] == figures["views"]


def test_cli_writes_workload(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["workload", "gmark", str(DATA / "shop.xml"), "--nodes", "300", "--queries", "4",
              "--seed", "1", str(tmp_path / "w")])
    out, err = capsys.readouterr()
    assert e.value.code == 0 and "4 views" in out and err == ""
    assert (tmp_path / "w" / "program.dl").is_file()


@pytest.mark.parametrize("text,where,what", [
    ("<generator><types>\n<alias type='0'>A</alias>\n</types", ":3:", "not well-formed XML"),
    ("<graph/>", ":1: error: <graph>", "root element must be <generator>"),
    ("<generator>\n<predicates><alias symbol='0'>a</alias></predicates>\n<types>\n"
     "<alias type='x'>A</alias></types></generator>", ":4: error: <alias>",
     "attribute type='x' is not an integer"),
    ("<generator><predicates><alias symbol='0'>a</alias></predicates><types>"
     "<alias type='0'>A</alias></types><schema>\n<source type='0'>\n"
     "<target type='0' symbol='3'/></source></schema></generator>", ":3: error: <target>",
     "symbol 3 is not declared"),
    ("<generator><predicates><alias symbol='0'>a</alias></predicates><types>"
     "<alias type='0'>A</alias></types><schema><source type='0'>\n<target type='0' "
     "symbol='0'>\n<outdistribution type='poisson'/></target></source></schema></generator>",
     ":3: error: <outdistribution>", "type='poisson'"),
])
def test_bad_schema_is_one_line_with_file_and_line(tmp_path, capsys, text, where, what):
    path = tmp_path / "bad.xml"
    path.write_text(text)
    with pytest.raises(SchemaError) as e:
        read_schema(path)
    assert f"{path}{where}" in str(e.value) and what in str(e.value)
    with pytest.raises(SystemExit) as ex:
        main(["workload", "gmark", str(path), str(tmp_path / "o")])
    _, err = capsys.readouterr()
    assert ex.value.code == 1 and err.count("\n") == 1 and what in err


# -- malformed schemas: one line naming the file and the element, fast --------------------------

SCHEMA = """<generator>
<graph><nodes>1000</nodes></graph>
<predicates><alias symbol="0">knows</alias><alias symbol="1">likes</alias></predicates>
<types>
<alias type="0">Person</alias>
<alias type="1">Post</alias>
{types}
</types>
<schema><source type="0">
<target type="0" symbol="0" multiplicity="*">
{dist}
</target>
<target type="1" symbol="1" multiplicity="*"/>
</source></schema>
</generator>
"""
SHARES = '<proportion type="0">0.5</proportion><proportion type="1">0.5</proportion>'
UNIFORM = '<outdistribution type="uniform"><min>0</min><max>3</max></outdistribution>'
# Eleven levels of entities, each ten of the one before: 10^11 characters from 1.3 KB.
BOMB = ('<?xml version="1.0"?>\n<!DOCTYPE generator [\n<!ENTITY a0 "' + "x" * 50 + '">\n'
        + "".join(f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">\n' for i in range(1, 12))
        + "]>\n<generator><graph><nodes>&a11;</nodes></graph></generator>\n")


def _bad(types: str = SHARES, dist: str = UNIFORM) -> str:
    return SCHEMA.format(types=types, dist=dist)


@pytest.mark.parametrize("text,where,what", [
    (_bad('<proportion type="0">nan</proportion>'), ":7: error: <proportion>", "out of range"),
    (_bad('<proportion type="0">inf</proportion>'), ":7: error: <proportion>", "out of range"),
    (_bad('<proportion type="0">-0.5</proportion>'), ":7: error: <proportion>",
     "'-0.5' is out of range (expected 0 to 1)"),
    (_bad('<proportion type="0">0.7</proportion><proportion type="1">0.7</proportion>'),
     ":4: error: <types>", "the <proportion>s add up to 1.4"),
    (_bad(dist='<outdistribution type="uniform"><min>5</min><max>3</max></outdistribution>'),
     ":11: error: <outdistribution>", "<min> 5 is above <max> 3"),
    (_bad(dist='<indistribution type="gaussian"><mu>3</mu><sigma>-1</sigma></indistribution>'),
     ":11: error: <sigma>", "'-1' is out of range"),
    (_bad(dist='<indistribution type="zipfian"><alpha>nan</alpha></indistribution>'),
     ":11: error: <alpha>", "'nan' is out of range"),
    (_bad(dist='<indistribution type="gaussian"><mu>1e300</mu><sigma>1</sigma></indistribution>'),
     ":11: error: <mu>", "'1e300' is out of range (expected 0 to 100,000,000)"),
    (_bad('<fixed type="0">1e12</fixed>'), ":7: error: <fixed>", "'1e12' is not an integer"),
    (_bad('<fixed type="0">1000000000000</fixed>'), ":7: error: <fixed>", "out of range"),
    (_bad('<fixed type="0">60000000</fixed><fixed type="1">60000000</fixed>'),
     ":4: error: <types>", "the <fixed> counts add up to 120,000,000 nodes"),
    (_bad('<alias type="1000000000">Huge</alias>'), ":7: error: <alias>",
     "attribute type='1000000000' is out of range (expected 0 to 99,999)"),
    (_bad('<alias type="-3">Negative</alias>'), ":7: error: <alias>", "out of range"),
    (BOMB, ":3: error: <!ENTITY a0>", "entity declarations are not allowed"),
])
def test_malformed_schema_values_are_one_line_at_once(tmp_path, text, where, what):
    path = tmp_path / "bad.xml"
    path.write_text(text)
    with pytest.raises(SchemaError) as e:
        read_schema(path)
    assert f"{path}{where}" in str(e.value) and what in str(e.value)
    # the CLI in a subprocess, under a timeout: before, these were tracebacks, a MemoryError
    # or minutes of entity expansion
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    proc = subprocess.run([sys.executable, "-m", "levelflow", "workload", "gmark", str(path),
                           str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"{path}{where}")
    assert what in proc.stderr and not (tmp_path / "out").exists()


def test_long_text_in_an_element_is_read_in_linear_time(tmp_path):
    # 300,000 character references are as many pieces of text: joined once, not one by one
    path = tmp_path / "long.xml"
    path.write_text(_bad().replace("<nodes>1000<", "<nodes>" + "&#32;" * 300_000 + "1000<"))
    assert read_schema(path).nodes == 1000
