"""CLI commands: trace validate | stats | gen | convert."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from levelflow.cli.app import trace_app
from levelflow.traces import (
    convert_wfcommons,
    dump_trace,
    generate_trace,
    load_trace,
    trace_stats,
)

CONVERTERS = ("wfcommons",)


def _summary(trace) -> str:
    """Return 'N nodes, E edges, L levels, W active' for a trace."""
    g = trace.graph
    active = sum(trace.active_set())
    return f"{len(g)} nodes, {g.num_edges} edges, {g.num_levels} levels, {active} active"


@trace_app.command("validate")
def validate(file: Annotated[Path, typer.Argument(help="A jobtrace/1 file (.json or .json.gz).")]
             ) -> None:
    """Check a trace against the jobtrace/1 contract; print a one-line summary."""
    trace = load_trace(file)
    typer.echo(f"{file}: ok ({_summary(trace)})")


@trace_app.command("stats")
def stats(file: Annotated[Path, typer.Argument(help="A jobtrace/1 file (.json or .json.gz).")],
          as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
          processors: Annotated[int | None, typer.Option(
              "-P", "--processors", min=1,
              help="Processors for the lower bound (default: the trace's, else 8).")] = None,
          ) -> None:
    """Print a trace's size, activated set, work, span and makespan lower bound."""
    figures = trace_stats(load_trace(file), processors)
    if as_json:
        typer.echo(json.dumps(figures))
        return
    from levelflow.text import for_rich

    table = Table(title=for_rich(file) + (f" ({for_rich(figures['name'])})"
                                          if figures["name"] else ""))
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in figures.items():
        if key == "name":
            continue
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        table.add_row(key.replace("_", " "), shown)
    Console().print(table)


@trace_app.command("gen")
def gen(out: Annotated[Path, typer.Argument(help="Where to write the trace (.json or .json.gz).")],
        nodes: Annotated[int, typer.Option("--nodes", help="Number of nodes.")],
        edges: Annotated[int, typer.Option("--edges", help="Number of edges.")],
        levels: Annotated[int, typer.Option("--levels", help="Number of levels.")],
        initial: Annotated[int, typer.Option("--initial",
                                             help="Initial tasks, from the lowest levels.")],
        p: Annotated[float, typer.Option("--p", help="Chance a task activates each child.")],
        seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
        tiny: Annotated[bool, typer.Option("--tiny",
                                           help="Microsecond durations (median 5 us).")] = False,
        name: Annotated[str | None, typer.Option("--name", help="Trace name.")] = None,
        ) -> None:
    """Generate a random layered trace with exact node, edge, level and initial counts."""
    trace = generate_trace(nodes, edges, levels, initial, p, seed, tiny=tiny, name=name)
    dump_trace(trace, out)
    typer.echo(f"{out}: wrote {_summary(trace)}, {len(trace.initial)} initial")


@trace_app.command("convert")
def convert(src: Annotated[Path, typer.Argument(help="The file to convert.")],
            out: Annotated[Path, typer.Argument(help="Where to write the trace.")],
            source_format: Annotated[str, typer.Option(
                "--from", help="Input format (supported: wfcommons).")] = "wfcommons",
            initial: Annotated[list[str] | None, typer.Option(
                "--initial", help="An initial task id (repeat it); default: every source.")
            ] = None,
            initial_fraction: Annotated[float | None, typer.Option(
                "--initial-fraction", help="Make a random share of the sources initial.")
            ] = None,
            activation_p: Annotated[float | None, typer.Option(
                "--activation-p", help="Chance a task activates each child (default: all).")
            ] = None,
            seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
            name: Annotated[str | None, typer.Option("--name", help="Trace name.")] = None,
            ) -> None:
    """Convert a workflow record from another format into a jobtrace/1 file."""
    if source_format not in CONVERTERS:
        raise typer.BadParameter(f"{source_format!r} is not a supported input format "
                                 f"(supported: {', '.join(CONVERTERS)})", param_hint="'--from'")
    trace = convert_wfcommons(src, initial=initial or None, initial_fraction=initial_fraction,
                              activation_p=activation_p, seed=seed, name=name)
    dump_trace(trace, out)
    typer.echo(f"{out}: wrote {_summary(trace)}, {len(trace.initial)} initial")
