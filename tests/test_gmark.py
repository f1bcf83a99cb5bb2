"""gMark workloads: the schema reader, the seeded graph generator's shape, the views, the CLI."""

from __future__ import annotations

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
