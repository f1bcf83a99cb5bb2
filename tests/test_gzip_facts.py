"""Gzipped fact files as Soufflé reads and writes them: any gzip input, `compress=true` out."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import levelflow
from levelflow.engine.facts import FactError, validate_facts
from levelflow.tasks.ast import Decl

TC = Path(__file__).parent.parent / "examples" / "tc"


def test_gzip_inputs_by_name_or_content_and_compressed_outputs(spark, tmp_path):
    plain = levelflow.run(TC / "program.dl", TC / "facts", tmp_path / "plain", spark=spark)
    text = (TC / "facts" / "edge.facts").read_bytes()
    (tmp_path / "edge.facts.gz").write_bytes(gzip.compress(text))
    program = (TC / "program.dl").read_text()
    gz_named = tmp_path / "gz.dl"
    gz_named.write_text(program.replace(".input edge", '.input edge(filename="edge.facts.gz")')
                        .replace(".output path", ".output path(compress=true)"))
    got = levelflow.run(gz_named, tmp_path, tmp_path / "gz", spark=spark)
    assert got.output_counts == plain.output_counts
    written = (tmp_path / "gz" / "path.csv").read_bytes()
    assert written[:2] == b"\x1f\x8b"  # gzipped under its usual name, as Soufflé writes it
    assert gzip.decompress(written) == (tmp_path / "plain" / "path.csv").read_bytes()
    assert (tmp_path / "gz" / "cyclic.csv").read_bytes() == \
        (tmp_path / "plain" / "cyclic.csv").read_bytes()
    # A gzip file named edge.facts (no .gz) is read as Soufflé reads it: by its content.
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "edge.facts").write_bytes(gzip.compress(text))
    got = levelflow.run(TC / "program.dl", inner, spark=spark)
    assert {tuple(r) for r in got.relation("path").collect()} == \
        {tuple(r) for r in plain.relation("path").collect()}


def test_a_bad_gzip_file_is_one_line_naming_it(tmp_path):
    decl = Decl("edge", ("x", "y"), ("number", "number"))
    path = tmp_path / "edge.facts"
    path.write_bytes(gzip.compress(b"1\t2\n3\tx\n"))
    with pytest.raises(FactError, match=r"edge.facts:2:3: error: field 2 'x' is not a number"):
        validate_facts(path, decl, "\t")
    path.write_bytes(gzip.compress(b"1\t2\n" * 100)[:-6])  # its trailer cut
    with pytest.raises(FactError, match=r"edge.facts:1:1: error: cannot read fact file"):
        validate_facts(path, decl, "\t")
