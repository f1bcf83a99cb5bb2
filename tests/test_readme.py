"""The README's first screen holds the two commands, and CI runs the test command verbatim."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    """Return the fenced one-line commands of the README's first screen (first 40 lines)."""
    lines = (ROOT / "README.md").read_text().splitlines()[:40]
    return [lines[i + 1] for i, line in enumerate(lines) if line.strip() == "```"
            and i + 2 < len(lines) and lines[i + 2].strip() == "```"]


def test_first_screen_has_exactly_two_commands():
    commands = _commands()
    assert len(commands) == 2
    assert "levelflow run" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _commands()[1] in ci


def test_main_command_names_files_that_exist():
    words = _commands()[0].split()
    program = words[words.index("run") + 1]
    facts = words[words.index("-F") + 1]
    assert (ROOT / program).is_file()
    assert (ROOT / facts).is_dir()


def test_trace_convert_example_names_a_file_in_the_repository():
    lines = [ln for ln in (ROOT / "README.md").read_text().splitlines()
             if ln.startswith("levelflow trace convert")]
    assert lines
    for line in lines:
        words = line.split("#")[0].split()
        source = words[-2]  # ... SOURCE OUT
        assert (ROOT / source).is_file(), line
