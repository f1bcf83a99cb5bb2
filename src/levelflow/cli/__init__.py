"""The `levelflow` command line: one module per command, errors as one line."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def _aborted_while_importing(signum, frame) -> None:
    """Ctrl-C during the half second of imports before main(): say `aborted`, no traceback."""
    print("levelflow: aborted", file=sys.stderr)
    os._exit(130)


# Only when this process is the command (console script or `python -m levelflow`): a program
# that imports the CLI keeps its own Ctrl-C.
_as_command = (Path(sys.argv[0]).name in ("levelflow", "__main__.py")
               and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
if _as_command:
    signal.signal(signal.SIGINT, _aborted_while_importing)

import typer  # noqa: E402 - after the handler above, as is everything below

from levelflow.cli import (  # noqa: E402, F401 (registers)
    graph_cmd,
    run_cmd,
    serve_cmd,
    shell_cmd,
    simulate_cmd,
    state_cmd,
    trace_cmd,
    update_cmd,
    workload_cmd,
)
from levelflow.cli.app import app, humanize  # noqa: E402
from levelflow.errors import LevelflowError  # noqa: E402

if _as_command:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # main() installs its own


def _aborted() -> None:
    """Say `levelflow: aborted` and exit 130 at once (threads still waiting on a JVM that is
    gone would only delay the exit)."""
    print("levelflow: aborted", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors print one line on stderr and exit non-zero."""
    from levelflow.cli.signals import signals_reach_main
    from levelflow.cli.spark import Interrupted, on_sigint

    Interrupted.seen = False
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.default_int_handler:  # typer turns Ctrl-C into a silent exit 130
        signal.signal(signal.SIGINT, on_sigint)
    try:
        with signals_reach_main():  # a Ctrl-C another thread got still ends this one's wait
            rv = humanize(typer.main.get_command(app)).main(args=argv, prog_name="levelflow",
                                                            standalone_mode=False)
    except typer.Abort:
        _aborted()
    except KeyboardInterrupt:
        _aborted()
    except typer.TyperException as e:
        message = e.format_message()
        if message:  # empty for a bare command group, whose help was already shown
            print(f"levelflow: error: {message}", file=sys.stderr)
        sys.exit(e.exit_code)
    except LevelflowError as e:
        if Interrupted.seen:  # e.g. a check whose reads failed as the JVM was ended
            _aborted()
        print(str(e), file=sys.stderr)
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as e:  # a file we could not read or write that no check foresaw: its name
        if Interrupted.seen:  # e.g. a call to the JVM that Ctrl-C was ending (refused)
            _aborted()
        print(f"levelflow: error: {e}", file=sys.stderr)
        sys.exit(1)
    except Exception:
        # After Ctrl-C any failure is the JVM being ended under a call: py4j may even fail
        # while converting the JVM's error (Py4JError 'py4j.reflection does not exist').
        if Interrupted.seen:
            _aborted()
        raise
    finally:
        if previous is signal.default_int_handler:
            signal.signal(signal.SIGINT, previous)
    if Interrupted.seen:
        _aborted()
    sys.exit(rv if isinstance(rv, int) else 0)
