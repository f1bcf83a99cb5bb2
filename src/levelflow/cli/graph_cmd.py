"""`levelflow graph PROGRAM.dl`: the program's task DAG as a table, JSON or Graphviz DOT."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from levelflow.cli import options
from levelflow.cli.app import app
from levelflow.errors import LevelflowError
from levelflow.tasks import ProgramTasks, build_tasks, load_program
from levelflow.text import for_rich


def _plans(pt: ProgramTasks) -> list:
    """Return the plan `auto` gives each task on Spark, past the driver plan (engine/plans)."""
    from levelflow.engine.plans.planner import static_plan

    return [static_plan(t, pt.program.decls) for t in pt.tasks]


def _driver_rows(pt: ProgramTasks) -> list:
    """Return per task the input rows up to which `auto` runs it in the driver on the embedded
    local master (whatever reads its inputs: Spark reads a DataFrame or Parquet, the driver
    takes its rows)."""
    from levelflow.engine.memory import memory_rows

    return [memory_rows()] * len(pt.tasks)


def graph_json(pt: ProgramTasks) -> dict:
    """Return the task DAG as `{"tasks": [...], "edges": [[u, v]], "levels": n}`."""
    g = pt.graph
    plans, small = _plans(pt), _driver_rows(pt)
    out = {
        "tasks": [{"id": t.id, "name": t.name, "relations": list(t.relations),
                   "level": g.level[t.id], "recursive": t.recursive, "input": t.input,
                   "plan": plans[t.id].kind, "plan_reason": plans[t.id].reason,
                   "driver_rows": small[t.id]}
                  for t in pt.tasks],
        "edges": [[u, v] for u in range(len(g)) for v in g.children[u]],
        "levels": g.num_levels,
    }
    if pt.program.paths:  # only then: a program without path atoms keeps the schema it had
        for task in out["tasks"]:
            task["closure"] = pt.tasks[task["id"]].closure
        out["paths"] = [{"relation": name, "expression": text} for name, text in pt.program.paths]
    return out


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_dot(pt: ProgramTasks) -> str:
    """Return the task DAG in Graphviz DOT (recursive tasks doubly outlined, inputs shaded)."""
    g = pt.graph
    lines = ["digraph levelflow {", "  rankdir=TB;", "  node [shape=box];"]
    for t in pt.tasks:
        # DOT reads \\n inside a quoted label as a line break.
        label = _dot_quote(t.name)[:-1] + f'\\nlevel {g.level[t.id]}"'
        attrs = [f"label={label}"]
        if t.recursive:
            attrs.append("peripheries=2")
        if t.input:
            attrs.append("style=filled, fillcolor=lightgrey")
        lines.append(f"  t{t.id} [{', '.join(attrs)}];")
    for level in g.by_level:
        lines.append("  { rank=same; " + " ".join(f"t{v};" for v in level) + " }")
    for u in range(len(g)):
        for v in g.children[u]:
            lines.append(f"  t{u} -> t{v};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _table(pt: ProgramTasks) -> Table:
    g = pt.graph
    table = Table(title=f"{for_rich(pt.program.file)}: task DAG")
    for column in ("id", "level", "name", "relations", "flags", "parents", "plan"):
        table.add_column(column, justify="right" if column in ("id", "level") else "left")
    plans, small = _plans(pt), _driver_rows(pt)
    for t in pt.tasks:
        flags = " ".join(f for f, on in (("recursive", t.recursive), ("input", t.input),
                                         ("closure", t.closure)) if on)
        parents = ", ".join(str(p) for p in sorted(g.parents[t.id]))
        plan = plans[t.id]
        table.add_row(str(t.id), str(g.level[t.id]), for_rich(t.name),
                      for_rich(", ".join(t.relations)), flags, parents,
                      for_rich((f"driver up to {small[t.id]:,} input rows, then "
                                if small[t.id] is not None else "")
                               + f"{plan.kind} ({plan.reason})"))
    return table


@app.command("graph")
@options.binds_functors
def graph(
    program: Annotated[Path, typer.Argument(help="The Datalog program (.dl).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the DAG as JSON.")] = False,
    dot: Annotated[Path | None, typer.Option("--dot", help="Write Graphviz DOT to FILE.",
                                              metavar="FILE")] = None,
    include: options.IncludeDirs = None,
    no_preprocessor: options.NoPreprocessor = False,
    functors: options.Functors = None,
) -> None:
    """Show the task DAG of a Datalog program: one task per strongly connected component."""
    pt = build_tasks(load_program(program, include or (), preprocessor=not no_preprocessor))
    if dot is not None:
        try:
            dot.write_text(graph_dot(pt))
        except OSError as e:
            raise LevelflowError(f"{dot}: error: cannot write DOT file: {e.strerror or e}"
                                 ) from None
    if as_json:
        typer.echo(json.dumps(graph_json(pt)))
        if dot is not None:  # stdout holds only the JSON
            typer.echo(_dot_note(dot, pt), err=True)
        return
    console = Console()
    console.print(_table(pt))
    tasks = pt.tasks
    console.print(f"{_count(len(tasks), 'task')} ({sum(t.recursive for t in tasks)} recursive, "
                  f"{sum(t.input for t in tasks)} input), {_count(pt.graph.num_edges, 'edge')}, "
                  f"{_count(pt.graph.num_levels, 'level')}, "
                  f"{_count(len(pt.program.rules), 'rule')}", highlight=False)
    if pt.program.paths:  # what each path expression became
        console.print("path expressions (closures run a native operator):", highlight=False)
        for name, text in pt.program.paths:
            console.print(f"  {for_rich(name)} = {for_rich(text)}", highlight=False)
    if dot is not None:
        typer.echo(_dot_note(dot, pt))


def _dot_note(dot: Path, pt: ProgramTasks) -> str:
    """Return the line saying where the DOT file went and how to draw it."""
    return (f"DOT written to {dot} ({_count(len(pt.tasks), 'task')}, "
            f"{_count(pt.graph.num_edges, 'edge')}; draw it with `dot -Tsvg {dot} -o graph.svg`)")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
