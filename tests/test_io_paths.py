"""Issue 17 item 10: where `.input` / `.output` files are (engine.paths, `--confine`).

Always refused: two outputs to one file however spelled, an output onto an input fact file.
With --confine: an input outside -F, an output outside -D. Each is one line naming the
directive's place, exit 1, before Spark starts, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.cli import main as cli_main
from levelflow.engine.incremental import IncrementalSession, StateDir
from levelflow.engine.paths import CONFINE_DEFAULT, CONFINE_SERVE, check_io_paths
from levelflow.tasks import parse_program
from levelflow.tasks.errors import DatalogError

HEAD = """.decl edge(x:number, y:number)
.decl path(x:number, y:number)
path(x, y) :- edge(x, y).
path(x, z) :- path(x, y), edge(y, z).
"""  # the directives start at line 5


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture
def tree(tmp_path):
    """tmp/facts/edge.facts, tmp/secret.facts (outside -F); -D is tmp/out (not made yet)."""
    write(tmp_path / "facts" / "edge.facts", "1\t2\n2\t3\n")
    write(tmp_path / "secret.facts", "7\t8\n")
    return tmp_path


def run_cli(tree: Path, directives: str, capsys, *flags: str) -> tuple[int, str]:
    """Run `levelflow run` on HEAD + directives; return (exit code, stderr)."""
    prog = write(tree / "p.dl", HEAD + directives)
    before = files_under(tree)
    with pytest.raises(SystemExit) as e:
        cli_main(["run", str(prog), "-F", str(tree / "facts"), "-D", str(tree / "out"), "-q",
                  *flags])
    err = capsys.readouterr().err
    assert files_under(tree) == before  # refused: nothing written, nothing overwritten
    assert not (tree / "out").exists()  # not even the output directory
    return e.value.code, err


def test_defaults_are_soufflé_compatible_and_serve_confines():
    assert CONFINE_DEFAULT is False and CONFINE_SERVE is True


@pytest.mark.parametrize("directives,flags,message", [
    # --confine: inputs outside -F (absolute, ../)
    ('.input edge(filename="{tmp}/secret.facts")\n.output path\n', ["--confine"],
     "p.dl:5:8: error: .input edge reads {tmp}/secret.facts, outside the fact directory "
     "-F {tmp}/facts (--confine)"),
    ('.input edge(filename="../secret.facts")\n.output path\n', ["--confine"],
     "p.dl:5:8: error: .input edge reads {tmp}/secret.facts, outside the fact directory "
     "-F {tmp}/facts (--confine)"),
    # --confine: outputs outside -D (absolute, ../)
    ('.input edge\n.output path(filename="{tmp}/x.csv")\n', ["--confine"],
     "p.dl:6:9: error: .output path writes {tmp}/x.csv, outside the output directory "
     "-D {tmp}/out (--confine)"),
    ('.input edge\n.output path(filename="sub/../../x.csv")\n', ["--confine"],
     "p.dl:6:9: error: .output path writes {tmp}/x.csv, outside the output directory "
     "-D {tmp}/out (--confine)"),
    # always: an output onto an input fact file
    ('.input edge\n.output path(filename="../facts/edge.facts")\n', [],
     "p.dl:6:9: error: .output path would overwrite {tmp}/facts/edge.facts, the fact file "
     "the .input directive at 5:8 reads"),
    # always: one file spelled two ways (the second spelling absolute)
    ('.input edge\n.output path(filename="x.csv")\n.output edge(filename="{tmp}/out/x.csv")\n',
     [], "p.dl:7:9: error: the .output directive at 6:9 already writes 'path' to "
         "{tmp}/out/x.csv"),
])
def test_run_refuses_in_one_line_before_anything_is_written(tree, capsys, directives, flags,
                                                             message):
    code, err = run_cli(tree, directives.format(tmp=tree), capsys, *flags)
    assert code == 1
    assert err == message.format(tmp=tree).replace("p.dl", str(tree / "p.dl")) + "\n"


def test_run_without_confine_reads_outside_fact_dir_as_soufflé(tree):
    prog = parse_program(HEAD + '.input edge(filename="../secret.facts")\n'
                                '.output path(filename="/abs/else.csv")\n', "p.dl")
    check_io_paths(prog, tree / "facts", tree / "out")  # no error: off by default
    with pytest.raises(DatalogError, match="outside the fact directory"):
        check_io_paths(prog, tree / "facts", tree / "out", confine=True)


def test_x_csv_and_dot_x_csv_are_one_file_at_parse_time():
    with pytest.raises(DatalogError) as e:
        parse_program(HEAD + '.output path(filename="x.csv")\n'
                             '.output edge(filename="./x.csv")\n', "p.dl")
    assert str(e.value) == "p.dl:6:9: error: the .output directive at 5:9 already writes " \
                           "'path' to x.csv"


def test_x_csv_and_dot_x_csv_refused_by_run(tree, capsys):
    code, err = run_cli(tree, '.input edge\n.output path(filename="x.csv")\n'
                              '.output path(filename=".//x.csv")\n', capsys)
    assert code == 1 and err.count("\n") == 1
    assert err.endswith("p.dl:7:9: error: the .output directive at 6:9 already writes 'path' "
                        "to x.csv\n")


def test_a_hard_link_to_an_input_is_the_input(tree):
    (tree / "out").mkdir()
    (tree / "out" / "link.csv").hardlink_to(tree / "facts" / "edge.facts")
    prog = parse_program(HEAD + '.input edge\n.output path(filename="link.csv")\n', "p.dl")
    with pytest.raises(DatalogError, match="would overwrite .*the .input directive at 5:8"):
        check_io_paths(prog, tree / "facts", tree / "out")


def test_a_symlink_out_of_the_fact_dir_is_outside_under_confine(tree):
    (tree / "facts" / "edge.facts").unlink()
    (tree / "facts" / "edge.facts").symlink_to(tree / "secret.facts")
    prog = parse_program(HEAD + ".input edge\n", "p.dl")
    check_io_paths(prog, tree / "facts", None)
    with pytest.raises(DatalogError, match=f"reads {tree}/secret.facts, outside"):
        check_io_paths(prog, tree / "facts", None, confine=True)


def test_shell_confine_refuses_an_input_outside_before_spark(tree, capsys):
    prog = write(tree / "p.dl", HEAD + '.input edge(filename="/etc/passwd")\n')
    with pytest.raises(SystemExit) as e:
        cli_main(["shell", str(prog), "-F", str(tree / "facts"), "--confine"])
    assert e.value.code == 1
    assert capsys.readouterr().err == (f"{prog}:5:8: error: .input edge reads /etc/passwd, "
                                       f"outside the fact directory -F {tree}/facts "
                                       f"(--confine)\n")


# --- accepted under --confine, with Spark (the CLI runs in-process on the tests' session) ---

def test_run_confine_accepts_paths_inside(tree, capsys, cli_spark):
    prog = write(tree / "p.dl", HEAD + '.input edge(filename="./edge.facts")\n'
                                       '.output path(filename="sub/p.csv")\n')
    with pytest.raises(SystemExit) as e:
        cli_main(["run", str(prog), "-F", str(tree / "facts"), "-D", str(tree / "out"), "-q",
                  "--confine"])
    assert e.value.code == 0, capsys.readouterr().err
    assert (tree / "out" / "sub" / "p.csv").read_text() == "1\t2\n1\t3\n2\t3\n"


@pytest.fixture(scope="module")
def state(spark, tmp_path_factory):
    """A state whose outputs are `../upd/named.csv` and the absolute `TMP/upd/path.csv`."""
    tmp = tmp_path_factory.mktemp("confine")
    prog = write(tmp / "p.dl", HEAD + f'.input edge\n.output edge(filename="../upd/e.csv")\n'
                                      f'.output path(filename="{tmp}/upd/path.csv")\n')
    write(tmp / "facts" / "edge.facts", "1\t2\n")
    IncrementalSession.bootstrap(spark, prog, tmp / "facts", tmp / "state")
    write(tmp / "d.diff", "+edge(2,3)\n")
    return tmp


@pytest.mark.parametrize("outdir,line,written", [
    ("other", "6:9: error: .output edge writes {tmp}/upd/e.csv", "{tmp}/upd/e.csv"),  # ../
    ("x/upd", "7:9: error: .output path writes {tmp}/upd/path.csv", "{tmp}/upd/path.csv"),
])
def test_update_confine_refuses_an_output_outside(state, capsys, outdir, line, written):
    before = files_under(state)
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(state / "state"), "--insert", str(state / "d.diff"),
                  "-D", str(state / outdir), "--confine"])
    assert e.value.code == 1
    err = capsys.readouterr().err
    assert err == (f"{state / 'p.dl'}:{line.format(tmp=state)}, outside the output directory "
                   f"-D {state / outdir} (--confine)\n")
    assert files_under(state) == before and not (state / outdir).exists()
    assert StateDir(state / "state").current() == 0
    assert not Path(written.format(tmp=state)).exists()


def test_update_confine_accepts_outputs_inside(state, capsys, cli_spark):
    with pytest.raises(SystemExit) as e:
        cli_main(["update", str(state / "state"), "--insert", str(state / "d.diff"),
                  "-D", str(state / "upd"), "--confine"])
    assert e.value.code == 0, capsys.readouterr().err
    assert (state / "upd" / "path.csv").read_text() == "1\t2\n1\t3\n2\t3\n"
    assert (state / "upd" / "e.csv").read_text() == "1\t2\n2\t3\n"
