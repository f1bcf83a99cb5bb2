"""`levelflow shell`: insert / remove / commit / print / size / help / quit, also with piped input.

Inserting a fact that is already there, or removing one that is not, is a no-op with a note.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from levelflow.cli.shell_cmd import Shell
from levelflow.engine.incremental import IncrementalSession, StateDir

PROGRAM = """
.decl person(n:symbol, age:number)
.input person
.decl adult(n:symbol)
adult(n) :- person(n, a), a >= 18.
.decl minor(n:symbol)
minor(n) :- person(n, _), !adult(n).
.output adult
.output minor
"""


def make(tmp: Path) -> tuple[Path, Path]:
    prog = tmp / "people.dl"
    prog.write_text(PROGRAM)
    facts = tmp / "facts"
    facts.mkdir()
    (facts / "person.facts").write_text("ann\t30\nbob\t12\n")
    return prog, facts


def run_shell(session, script: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    Shell(session, out, err).loop(io.StringIO(script))
    return out.getvalue(), err.getvalue()


def test_shell_commands_and_notes(spark, tmp_path):
    prog, facts = make(tmp_path)
    session = IncrementalSession.bootstrap(spark, prog, facts, mode="incremental")
    out, err = run_shell(session, "\n".join([
        'insert person("ann", 30)',     # already there: a note
        'remove person("zed", 1)',      # not there: a note
        'insert person("cy", 40)',
        'remove person("ann", 30)',
        "commit",
        "print adult",
        "size minor",
        "print nope",
        'insert adult("x")',            # not an input relation: an error line, shell goes on
        "frobnicate",
        "help",
        'insert person("dee", 5)',
        "quit",
        "size adult",                   # never reached
    ]) + "\n")
    lines = out.splitlines()
    assert 'note: person("ann", 30) is already there; nothing to insert' in lines
    assert 'note: person("zed", 1) is not there; nothing to remove' in lines
    assert "adult\t+1\t-1" in lines and "minor\t+0\t-0" in lines
    assert "ran 3 of 3 tasks" in out
    i = lines.index("cy")  # print adult: exactly cy, then size minor: 1 (bob)
    assert lines[i + 1] == "1" and "ann" not in lines
    assert "commands:" in out
    assert "note: 1 uncommitted change(s) discarded" in lines
    assert lines[-1].startswith("note: 1 uncommitted")  # `size adult` after quit did not run
    assert "unknown relation 'nope'" in err
    assert "adult is not an .input relation" in err
    assert "unknown command 'frobnicate'" in err
    assert {tuple(r) for r in session.relation("adult").collect()} == {("cy",)}


@pytest.fixture
def shell_cli(cli, cli_spark, monkeypatch):
    """Return a function running `levelflow shell` on make()'s program with a script piped in:
    (exit code, out, err)."""
    def run(tmp_path, script: str) -> tuple[int, str, str]:
        prog, facts = make(tmp_path)
        monkeypatch.setattr("sys.stdin", io.StringIO(script))  # piped: not a terminal
        return cli(["shell", prog, "-F", facts, "--state", tmp_path / "st"])

    return run


def test_shell_cli_with_piped_input(tmp_path, shell_cli):
    code, out, err = shell_cli(tmp_path, 'insert person("eve", 20)\ncommit\nprint adult\n'
                                         'size person\n')
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("epoch 0: ran 3 of 3 tasks")
    assert "adult\t+1\t-0" in lines
    i = lines.index("ann")
    assert lines[i:i + 3] == ["ann", "eve", "3"]
    assert StateDir(tmp_path / "st").current() == 1


def test_shell_of_a_state_directory_resumes_it_with_its_own_program(tmp_path, shell_cli, cli,
                                                                     monkeypatch):
    code, _, err = shell_cli(tmp_path, 'insert person("eve", 20)\ncommit\n')
    assert code == 0, err
    monkeypatch.setattr("sys.stdin", io.StringIO('remove person("ann", 30)\ncommit\n'
                                                 "print adult\nprint minor\n"))
    code, out, err = cli(["shell", tmp_path / "st"])  # as `update` and `serve` take a state
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "epoch 1: resumed; type help for commands"
    assert "adult\t+0\t-1" in lines
    assert lines[-2:] == ["eve", "bob"]  # adult, then minor: ann removed, eve kept
    assert StateDir(tmp_path / "st").current() == 2


def test_piped_errors_name_their_line_and_queued_facts_say_so(spark, tmp_path):
    prog, facts = make(tmp_path)
    session = IncrementalSession.bootstrap(spark, prog, facts, mode="incremental")
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(session, out, err, source="<stdin>")
    shell.loop(io.StringIO("\n".join([
        'insert person("cy", 40)',
        'insert person("cy", 40)',      # queued already
        "// a comment line",
        'remove person("bob", 12)',
        'remove person("bob", 12)',     # queued already
        "frobnicate",                   # line 6
        'insert person("cy")',          # line 7
    ]) + "\n"))
    lines = out.getvalue().splitlines()
    assert 'note: person("cy", 40) is already queued for insertion; nothing to insert' in lines
    assert 'note: person("bob", 12) is already queued for removal; nothing to remove' in lines
    assert err.getvalue().splitlines() == [
        "<stdin>:6: error: unknown command 'frobnicate' (try help)",
        "<stdin>:7: error: person has arity 2, got 1 arguments"]
    assert shell.errors == 2


def test_shell_cli_exits_1_after_a_failed_piped_line(tmp_path, shell_cli):
    code, out, err = shell_cli(tmp_path, 'insert person("eve", 20)\ninsert nope(1)\ncommit\n')
    assert code == 1
    assert err.strip() == "<stdin>:2: error: unknown relation nope"
    assert "adult\t+1\t-0" in out.splitlines()  # the other lines still ran
    assert StateDir(tmp_path / "st").current() == 1


def test_a_spark_failure_is_one_line_and_the_shell_goes_on(spark, tmp_path, monkeypatch):
    from pyspark.errors import AnalysisException

    prog, facts = make(tmp_path)
    session = IncrementalSession.bootstrap(spark, prog, facts, mode="incremental")
    size = session.size("person")

    def lost(name):
        return spark.range(1).select("gone")  # raises as a lost Parquet file would

    monkeypatch.setattr(session, "relation", lost)
    # as a relation Spark holds, not the driver (a tiny one's rows are printed from the driver)
    monkeypatch.setattr("levelflow.engine.incremental.backends.driver_rows.rows_of",
                        lambda df: None)
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(session, out, err, source="<stdin>")
    shell.loop(io.StringIO("print person\nsize person\n"))
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("<stdin>:1: error: Spark failed: ")
    assert out.getvalue().splitlines() == [str(size)]  # the next line still ran
    assert shell.errors == 1
    with pytest.raises(AnalysisException):
        lost("person")


def test_a_tiny_shell_prints_without_spark(cli, tmp_path, no_spark, monkeypatch):
    """The shell over make()'s tiny program with a Spark that cannot start: the epochs run in
    the driver, and `print` writes the rows the driver holds, sorted, as an output file is."""
    prog, facts = make(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO(
        'insert person("eve", 20)\ninsert person("al", 7)\ncommit\nprint adult\nprint minor\n'
        "size person\n"))
    code, out, err = cli(["shell", prog, "-F", facts])
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "adult\t+1\t-0" in lines and "minor\t+1\t-0" in lines
    i = lines.index("ann")  # adult: ann (30), eve (20); minor: al (7), bob (12); 4 people
    assert lines[i:] == ["ann", "eve", "al", "bob", "4"]
