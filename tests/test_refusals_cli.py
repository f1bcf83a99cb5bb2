"""Every refusal the front end has left, through the CLI (`levelflow graph`, which loads the
program as `run`, `update` and `serve` do): one line `file:line:col: error: <feature> ...`,
naming the feature, and exit 1. (Records, ADTs, aggregates, choice and subsumption are being
built elsewhere; their refusals are tested in tests/test_program_errors.py.)"""

from __future__ import annotations

import pytest

from levelflow.cli import main as cli_main

HEAD = ".decl a(x:number)\n.decl b(x:number, y:symbol)\n"

REFUSALS = [
    # (program after HEAD, line, col, the feature as the message names it)
    (".lattice L<number> { }", 3, 1, "'.lattice' (lattices) is not supported"),
    ("a(x) :- a(y), x = y ** 2.", 3, 21, "the operator '**' is not supported"),
    ("a(x) :- a(y), x = y & 2.", 3, 21, "the operator '&' is not supported"),
    ("a(x) :- a(y), x = y | 2.", 3, 21, "the operator '|' is not supported"),
    (".input a(IO=stdin)", 3, 8, "IO=stdin is not supported for .input"),
    (".output a(IO=json)", 3, 9, "IO=json is not supported for .output"),
    (".input a(rfc4180=true)", 3, 8, "option 'rfc4180' is not supported for .input"),
    (".decl c(x:number)\n.limitsize a(n=1)\na(x) :- c(x).\nc(x) :- a(x).", 4, 12,
     "'.limitsize' of 'a', which is in a recursive cycle with other relations, is not "
     "supported"),
    ("#define F(x) #x\n", 3, 1, "#define F: '#' and '##' in a macro body are not supported"),
    ("#if 1 ? 2 : 3\n#endif\n", 3, 1, "#if: the conditional operator '?:' is not supported"),
]


@pytest.mark.parametrize(("text", "line", "col", "feature"), REFUSALS)
def test_each_refusal_is_one_line_naming_feature_file_line_and_column(tmp_path, capsys, text,
                                                                     line, col, feature):
    program = tmp_path / "p.dl"
    program.write_text(HEAD + text + "\n")
    with pytest.raises(SystemExit) as e:
        cli_main(["graph", str(program)])
    err = capsys.readouterr().err
    assert e.value.code == 1
    assert err.endswith("\n") and "\n" not in err[:-1], err
    assert err.startswith(f"{program}:{line}:{col}: error: {feature}"), err
