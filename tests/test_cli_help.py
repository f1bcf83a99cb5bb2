"""Help reads as a person would write it, defaults agree across commands, --version works."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

import levelflow
from levelflow.cli import defaults, main
from levelflow.cli.app import app, humanize

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = [["run"], ["update"], ["shell"], ["graph"], ["simulate"], ["trace", "gen"],
            ["trace", "convert"], ["trace", "stats"], ["trace", "validate"], []]


def _help(capsys, argv) -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a) or "levelflow")
def test_help_has_no_type_labels_of_the_code(capsys, monkeypatch, argv):
    monkeypatch.setenv("COLUMNS", "200")
    text = _help(capsys, argv)
    assert not re.search(r"<(bool|path|int|float|str|list\[\w+\])>|\{\w+\}", text), text
    assert "Usage: levelflow" in text


def _commands(command, prefix=()):
    for name, sub in getattr(command, "commands", {}).items():
        yield (*prefix, name), sub
        yield from _commands(sub, (*prefix, name))


def test_every_option_and_argument_has_help():
    root = humanize(typer.main.get_command(app))
    missing = [f"{' '.join(path)} {p.name}" for path, cmd in _commands(root)
               for p in cmd.params if not getattr(p, "help", None)]
    assert missing == []


def _defaults(command: str) -> dict:
    root = typer.main.get_command(app)
    return {p.name: p.default for p in root.commands[command].params}


def test_run_update_and_shell_share_their_defaults():
    run, update, shell = _defaults("run"), _defaults("update"), _defaults("shell")
    for name in ("scheduler", "jobs", "master", "driver_memory"):
        assert run[name] == update[name], name
    for name in ("master", "driver_memory", "switch"):
        assert shell[name] == update[name], name
    assert (run["jobs"], run["scheduler"]) == (defaults.JOBS, defaults.SCHEDULER)


def test_cli_defaults_are_the_engines():
    from levelflow.engine.guard import MAX_TUPLES
    from levelflow.engine.incremental.elastic import (
        LARGE_CHANGE,
        MODES,
        SWITCH,
        SWITCH_FLOOR_SECONDS,
    )
    from levelflow.engine.memory import BY_MASTER
    from levelflow.engine.plans import LOCAL_ROWS, PLANS

    assert defaults.BY_MASTER == BY_MASTER
    assert (defaults.SWITCH, defaults.LARGE_CHANGE) == (SWITCH, LARGE_CHANGE)
    assert defaults.SWITCH_FLOOR == SWITCH_FLOOR_SECONDS  # quoted in --switch's help
    assert defaults.LOCAL_ROWS == LOCAL_ROWS and defaults.PLAN in PLANS
    assert defaults.STRATEGY in MODES
    assert defaults.MAX_TUPLES == MAX_TUPLES


@pytest.mark.parametrize("argv", [["--version"], ["version"]])
def test_version(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out == f"levelflow {levelflow.__version__}\n"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{levelflow.__version__}"' in pyproject


def test_help_does_not_start_or_import_spark():
    code = ("import sys\nfrom levelflow.cli import main\n"
            "try:\n    main(['run', '--help'])\nexcept SystemExit:\n    pass\n"
            "print('pyspark' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), timeout=60)
    assert proc.stdout.strip().endswith("False"), proc.stdout + proc.stderr
