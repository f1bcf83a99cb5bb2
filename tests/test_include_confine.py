"""Issue 42: `#include` / `.include` under confinement (tasks/preprocess.Confined, engine/paths).

A confined program (`run --confine`, `update --confine --program`, and every program `serve`
takes: tests/test_serve_confine.py) reads an included file only inside the fact folder (-F)
or an -I folder, `..` resolved and symbolic links followed; any other include is refused in
one line naming the include, and the file is never read, so none of its text can show. A
state's stored program is reloaded without reading any file. Without confinement, `run`
includes relative to the program, as Soufflé does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from levelflow.tasks import DatalogError, parse_program, parse_stored
from levelflow.tasks.preprocess import Confined

SECRET = "hunter2"
HEAD = ".decl edge(x:number, y:number)\n.input edge\n.decl path(x:number, y:number)\n" \
       ".output path\n"
RULES = "path(x, y) :- edge(x, y).\npath(x, z) :- path(x, y), edge(y, z).\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def everything_under(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


@pytest.fixture
def tree(tmp_path):
    """tmp/facts (-F) with edge.facts and link.dl -> tmp/pw.txt; tmp/inc (-I) with rules.dl;
    tmp/pw.txt and tmp/src/rules.dl (beside the program, in no allowed folder)."""
    write(tmp_path / "facts" / "edge.facts", "1\t2\n2\t3\n")
    write(tmp_path / "pw.txt", SECRET + "\n")
    (tmp_path / "facts" / "link.dl").symlink_to(tmp_path / "pw.txt")
    write(tmp_path / "inc" / "rules.dl", RULES)
    write(tmp_path / "src" / "rules.dl", RULES)
    return tmp_path


def refusal(name: str, tree: Path) -> str:
    return (f'error: #include "{name}": no such file inside the folders a program may include '
            f"from ({tree}/facts, {tree}/inc) (--confine)")


@pytest.mark.parametrize("line", [
    '#include "{tmp}/pw.txt"',  # absolute
    '#include "../pw.txt"',  # .. out of the program's folder, of -F and of -I
    '#include "link.dl"',  # a symbolic link in the fact folder to a file outside it
    '.include "{tmp}/facts/../pw.txt"',  # .. inside the name, Soufflé's spelling
])
def test_a_confined_run_refuses_an_include_outside_without_reading_it(tree, cli, line):
    line = line.format(tmp=tree)
    name = line.split('"')[1]
    prog = write(tree / "src" / "p.dl", HEAD + line + "\n")
    code, out, err = cli(["run", prog, "-F", tree / "facts", "-D", tree / "out", "-I",
                          tree / "inc", "--confine", "-q"])
    assert (code, out) == (1, "")
    assert err == f"{prog}:5:1: {refusal(name, tree)}\n"
    assert SECRET not in err and not (tree / "out").exists()


def test_the_file_beside_the_program_is_passed_over_for_the_allowed_one(tree, cli, cli_spark):
    (tree / "src" / "rules.dl").write_text(f"{SECRET}(\n")  # would not parse if it were read
    prog = write(tree / "src" / "p.dl", HEAD + '#include "rules.dl"\n')
    code, _, err = cli(["run", prog, "-F", tree / "facts", "-D", tree / "out", "-I",
                        tree / "inc", "--confine", "-q"])
    assert code == 0, err
    # the transitive closure of 1->2->3, computed by hand
    assert (tree / "out" / "path.csv").read_text() == "1\t2\n1\t3\n2\t3\n"


def test_an_include_that_includes_outside_is_refused_at_its_own_line(tree, cli):
    include = '#include "../pw.txt"'
    name = include.split('"')[1]
    write(tree / "inc" / "lib.dl", f"// lib\n{include}\n")
    prog = write(tree / "src" / "p.dl", HEAD + '#include "lib.dl"\n')
    code, out, err = cli(["run", prog, "-F", tree / "facts", "-I", tree / "inc", "--confine"])
    assert (code, out) == (1, "")
    assert err == f"{tree}/inc/lib.dl:2:1: {refusal(name, tree)}\n"


def test_a_line_directive_does_not_move_a_confined_include_outside():
    # `#line` renames the file the next lines come from; the include beside "it" is outside.
    with pytest.raises(DatalogError) as e:
        parse_program('#line 1 "/etc/x.dl"\n#include "passwd"\n', "request",
                      confined=Confined(("/nonexistent",), "why"))
    assert str(e.value) == ('/etc/x.dl:1:1: error: #include "passwd": no such file inside the '
                            'folders a program may include from (/nonexistent) (why)')


def test_a_confined_run_includes_from_the_fact_folder_and_include_dirs(tree, cli, cli_spark):
    write(tree / "facts" / "decls.dl", HEAD)
    prog = write(tree / "src" / "p.dl", '#include "decls.dl"\n#include "rules.dl"\n')
    code, _, err = cli(["run", prog, "-F", tree / "facts", "-D", tree / "out", "-I",
                        tree / "inc", "--confine", "-q"])
    assert code == 0, err
    assert (tree / "out" / "path.csv").read_text() == "1\t2\n1\t3\n2\t3\n"


def test_an_unconfined_run_includes_beside_the_program_as_soufflé(tree, cli, cli_spark):
    prog = write(tree / "src" / "p.dl", HEAD + '#include "rules.dl"\n')
    code, _, err = cli(["run", prog, "-F", tree / "facts", "-D", tree / "out", "-q"])
    assert code == 0, err
    assert (tree / "out" / "path.csv").read_text() == "1\t2\n1\t3\n2\t3\n"


def test_a_stored_program_reads_no_file(tree):
    program = parse_program(HEAD + '#include "rules.dl"\n', "p.dl", (str(tree / "inc"),))
    assert "#include" not in program.source and "path(x, z)" in program.source
    (tree / "inc" / "rules.dl").unlink()  # the stored text needs it no more
    assert len(parse_stored(program.source, "p.dl").rules) == 2
    with pytest.raises(DatalogError) as e:  # an include in a stored text is never looked up
        parse_stored(f'#include "{tree}/pw.txt"\n', "p.dl")
    assert str(e.value) == (f'p.dl:1:1: error: #include "{tree}/pw.txt": no such file inside '
                            f"the folders a program may include from (none) (a stored program "
                            f"includes no file)")


@pytest.fixture
def state(spark, tree):
    """A state of HEAD + RULES bootstrapped from tree/facts."""
    from levelflow.engine.incremental import IncrementalSession

    prog = write(tree / "src" / "p.dl", HEAD + RULES)
    IncrementalSession.bootstrap(spark, prog, tree / "facts", tree / "state").close()
    return tree / "state"


def test_update_confine_refuses_a_new_programs_include_outside(tree, state, cli):
    from levelflow.engine.incremental import StateDir

    before = everything_under(state)
    include = '#include "../pw.txt"'
    name = include.split('"')[1]
    new = write(tree / "src" / "new.dl", HEAD + RULES + include + "\n")
    code, out, err = cli(["update", state, "--program", new, "--facts", tree / "facts",
                          "-I", tree / "inc", "--confine"])
    assert (code, out) == (1, "")
    assert err == f"{new}:7:1: {refusal(name, tree)}\n"
    assert everything_under(state) == before and StateDir(state).current() == 0
    assert SECRET.encode() not in before
