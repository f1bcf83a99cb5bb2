"""The `levelflow` command line: one module per command, errors as one line."""

from __future__ import annotations

import sys

import typer

from levelflow.cli import (  # noqa: F401 (registers)
    graph_cmd,
    run_cmd,
    shell_cmd,
    simulate_cmd,
    state_cmd,
    trace_cmd,
    update_cmd,
)
from levelflow.cli.app import app
from levelflow.errors import LevelflowError


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors print one line on stderr and exit non-zero."""
    try:
        rv = app(args=argv, standalone_mode=False)
    except typer.Abort:
        print("levelflow: aborted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as e:
        message = e.format_message()
        if message:  # empty for a bare command group, whose help was already shown
            print(f"levelflow: error: {message}", file=sys.stderr)
        sys.exit(e.exit_code)
    except LevelflowError as e:
        print(str(e), file=sys.stderr)
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as e:  # a file we could not read or write that no check foresaw: its name
        print(f"levelflow: error: {e}", file=sys.stderr)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)
