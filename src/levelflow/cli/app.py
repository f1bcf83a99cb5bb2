"""The typer application every command module adds itself to, and how its help reads."""

from typing import Annotated

import typer

EXIT_STATUS = ("Exit status: 0 done; 1 an error in what a command reads or does (a program, "
               "fact file or state, Spark); 2 a wrong command line (an unknown flag, a "
               "malformed or out-of-range value, flags that do not combine); 3 a scheduler "
               "stalled; 130 interrupted (Ctrl-C).")

app = typer.Typer(
    name="levelflow",
    help="Keep Datalog results up to date by scheduling predicate tasks on a DAG.",
    epilog=EXIT_STATUS,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
trace_app = typer.Typer(help="Read, check, generate and convert job traces (jobtrace/1).",
                        no_args_is_help=True)
app.add_typer(trace_app, name="trace")


def _print_version(value: bool) -> None:
    """Print `levelflow VERSION` and stop, when --version is given."""
    if value:
        from levelflow import __version__

        print(f"levelflow {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print levelflow's version and exit.")] = False) -> None:
    """Keep Datalog results up to date by scheduling predicate tasks on a DAG."""


@app.command("version")
def version_command() -> None:
    """Print levelflow's version."""
    _print_version(True)


def _label(param) -> str:
    """Return the word an option's value reads as in help: PATH, N, X, a|b, or TEXT."""
    desc = getattr(param, "type_descriptor", None)
    if desc is None:
        return "TEXT"
    if desc.is_choice and desc.choices:
        return "|".join(str(getattr(c, "value", c)) for c in desc.choices)
    if desc.is_path:
        return "PATH"
    bare = param.bare_type() if hasattr(param, "bare_type") else ""
    return {"int": "N", "float": "X"}.get(bare.split("[")[-1].rstrip("]"), "TEXT")


def humanize(command):
    """Return `command` with help labels as a person writes them (PROGRAM, PATH, N; no <bool>)."""
    for param in command.params:
        if param.param_type_name == "option":
            if param.is_flag:
                param.metavar = ""  # a flag takes no value: no type to show
            elif param.metavar is None:
                param.metavar = _label(param)
        elif param.param_type_name == "argument":
            word = (param.metavar or param.name).upper()
            param.metavar = word
            shown = (word if param.required else f"[{word}]") + ("..." if param.nargs != 1 else "")
            param._usage_display_name = lambda shown=shown: shown  # not typer's {program}
            param.display_type_rich = lambda ctx: ""  # the name says it: no <path> beside it
    make_help = command.get_help_option

    def help_option(ctx, make_help=make_help):
        option = make_help(ctx)
        if option is not None:
            option.metavar = ""  # --help is a flag, not a <bool>
        return option

    command.get_help_option = help_option
    for sub in getattr(command, "commands", {}).values():
        humanize(sub)
    return command
