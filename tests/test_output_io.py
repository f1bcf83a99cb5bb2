"""`.output R(IO=stdout)` prints R as Soufflé does; IO kinds the engine lacks are refused."""

from __future__ import annotations

import pytest

from levelflow.engine.runner import write_outputs
from levelflow.engine.types import rows_frame
from levelflow.tasks import parse_program
from levelflow.tasks.errors import DatalogError

PROGRAM = """
.decl a(x:number, s:symbol)
.decl b(x:number, s:symbol)
.output a
.output b(IO=stdout, delimiter=",")
"""


def test_stdout_output_is_framed_and_formatted_like_a_file(spark, tmp_path, capsys):
    program = parse_program(PROGRAM, "io.dl")
    rows = [(2, "two words"), (-1, "x"), (10, "é")]
    rels = {n: rows_frame(spark, program.decls[n], rows) for n in ("a", "b")}
    counts = write_outputs(program, rels, tmp_path)
    assert counts == {"a": 3, "b": 3}
    as_file = (tmp_path / "a.csv").read_text(encoding="utf-8").replace("\t", ",")
    assert capsys.readouterr().out == (
        "---------------\nb\n===============\n" + as_file + "===============\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]  # no file, no temp left


@pytest.mark.parametrize("directive,message", [
    (".output a(IO=sqlite)", "IO=sqlite is not supported for .output (supported: file, stdout)"),
    (".input a(IO=stdin)", "IO=stdin is not supported for .input (supported: file)"),
])
def test_unsupported_io_is_one_error_at_the_directive(directive, message):
    with pytest.raises(DatalogError) as e:
        parse_program(".decl a(x:number)\n" + directive + "\n", "io.dl")
    col = directive.index(" ") + 2  # the directive's relation name
    assert str(e.value) == f"io.dl:2:{col}: error: {message}"
