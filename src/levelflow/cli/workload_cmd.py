"""`levelflow workload gmark SCHEMA.xml OUT/`: a gMark-shaped graph and UC2RPQ views."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli.app import app
from levelflow.errors import LevelflowError
from levelflow.workloads.gmark_schema import LINEAR_TUPLES_PER_NODE, MAX_NODES


class Selectivity(str, Enum):
    """Which views `workload gmark` keeps (gMark's selectivity classes)."""

    linear = "linear"
    any = "any"

workload_app = typer.Typer(help="Generate workloads: programs with their fact files.",
                           no_args_is_help=True)
app.add_typer(workload_app, name="workload")


@workload_app.command("gmark")
def gmark(
    schema: Annotated[Path, typer.Argument(help="A gMark schema (XML).")],
    out: Annotated[Path, typer.Argument(help="Directory for program.dl and facts/.")],
    nodes: Annotated[int, typer.Option("--nodes", min=1, max=MAX_NODES, help="Nodes N "
                                       "(proportions of N; fixed counts are kept).")] = 1000,
    queries: Annotated[int, typer.Option("--queries", min=0, help="Random views.")] = 10,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the graph and views.")] = 0,
    selectivity: Annotated[Selectivity, typer.Option(
        "--selectivity", help="linear: every view costs at most "
        f"{LINEAR_TUPLES_PER_NODE} tuples per node on the graph (drawn again otherwise); "
        "any: views as drawn, however large.")] = Selectivity.linear,
) -> None:
    """Generate a graph shaped by a gMark schema and random UC2RPQ views over its labels."""
    from levelflow.workloads.gmark import write_workload
    from levelflow.workloads.gmark_schema import read_schema

    parsed = read_schema(schema)
    per_node = LINEAR_TUPLES_PER_NODE if selectivity is Selectivity.linear else None
    try:
        figures = write_workload(parsed, nodes, queries, seed, out, per_node)
    except LevelflowError as e:
        raise LevelflowError(f"{schema}: {e}") from None
    except OSError as e:
        raise LevelflowError(f"{out}: error: cannot write the workload: {e.strerror or e}"
                             ) from None
    typer.echo(f"{out}: {figures['nodes']:,} nodes, {figures['edges']:,} edges over "
               f"{figures['labels']} labels, {len(figures['views'])} views")
