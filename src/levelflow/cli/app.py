"""The typer application every command module adds itself to."""

import typer

app = typer.Typer(
    name="levelflow",
    help="Keep Datalog results up to date by scheduling predicate tasks on a DAG.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
trace_app = typer.Typer(help="Read, check, generate and convert job traces (jobtrace/1).",
                        no_args_is_help=True)
app.add_typer(trace_app, name="trace")
