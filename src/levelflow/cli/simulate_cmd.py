"""`levelflow simulate`: replay a job trace under one or more schedulers and compare them."""

from __future__ import annotations

import json
import math
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from levelflow.cli import defaults
from levelflow.cli.app import app
from levelflow.errors import LevelflowError

LONG_RUN_NODES = 20_000  # below this a run takes well under a second: no progress bar


class SimulateUsageError(LevelflowError):
    """A flag combination `levelflow simulate` cannot honour; str() is one line."""

    exit_code = 2


def json_line(obj: dict, where: str) -> str:
    """Return `obj` as one line of strict JSON; a non-finite number is one error, not NaN."""
    try:
        return json.dumps(obj, allow_nan=False)
    except ValueError:
        bad = sorted(k for k, v in obj.items() if isinstance(v, float) and not math.isfinite(v))
        raise LevelflowError(f"{where}: error: a result is not a finite number "
                             f"({', '.join(bad) or 'a nested value'}); not printed") from None


def _split_specs(text: str) -> list[str]:
    """Return the scheduler specs of a comma-separated list, blanks dropped."""
    specs = [s.strip() for s in text.split(",") if s.strip()]
    if not specs:
        raise SimulateUsageError("--scheduler: give at least one scheduler name")
    return specs


def _ops(counters: dict) -> str:
    """Return the scheduler's operation counts as one cell, a counter per line."""
    return "\n".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}"
                    for k, v in counters.items()) or "-"


def _size(n: int) -> str:
    """Return a byte count in human units."""
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# Columns in the order they are dropped when the table would be wider than the terminal.
DROP_ORDER = ("ops", "memory", "tasks", "overhead (s)", "makespan / LB")


def _table(results, trace, P: int, model: str, width: int | None = None):
    """Return the rich comparison table, dropping columns by DROP_ORDER to fit `width`."""
    from levelflow.text import for_rich

    title = (f"{for_rich(trace.name or 'trace')}: {len(trace.graph):,} nodes, {P} processors, "
             f"{model} model, lower bound {results[0].lower_bound:.6g} s")
    cells = {"scheduler": [for_rich(r.scheduler) for r in results],
             "makespan (s)": [f"{r.makespan:.6g}" for r in results],
             "overhead (s)": [f"{r.overhead_s:.4f}" for r in results],
             "utilization": [f"{r.utilization:.1%}" for r in results],
             "tasks": [f"{r.tasks:,}" for r in results],
             "ops": [_ops(r.counters) for r in results],
             "memory": [_size(r.memory) for r in results],
             "makespan / LB": [f"{r.makespan_over_lower_bound:.3f}" for r in results]}
    dropped: list[str] = []
    while True:
        table = _build(title, {k: v for k, v in cells.items() if k not in dropped}, len(results))
        if width is None or len(dropped) == len(DROP_ORDER) or _fits(table, width):
            return table
        dropped.append(DROP_ORDER[len(dropped)])


def _fits(table, width: int) -> bool:
    """Return whether rich draws `table` in `width` columns without cutting a cell."""
    import io

    from rich.console import Console

    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(table)
    return "…" not in console.file.getvalue()


def _build(title: str, cells: dict[str, list[str]], n: int):
    """Return a rich Table of the given columns (cells already escaped)."""
    from rich.table import Table

    table = Table(title=title)
    for col in cells:
        # Only the ops cell may wrap: names and figures must stay whole on narrow screens.
        table.add_column(col, justify="left" if col in ("scheduler", "ops") else "right",
                         no_wrap=col != "ops")
    for i in range(n):
        table.add_row(*(cells[col][i] for col in cells))
    return table


def _check_flags(specs: list[str], model: str, schedule, gantt) -> None:
    """Return None if the flags go together; else raise a one-line usage error."""
    from levelflow.simulator.bounds import MODELS

    if model not in MODELS:
        raise SimulateUsageError(f"--model: unknown model {model!r} "
                                 f"(choose from {', '.join(MODELS)})")
    for flag, value in (("--schedule", schedule), ("--gantt", gantt)):
        if value is not None and len(specs) != 1:
            raise SimulateUsageError(f"{flag} needs exactly one scheduler, got {len(specs)}: "
                                     f"{','.join(specs)}")


@contextmanager
def _status(shown: bool):
    """Yield say(text): a transient status line on stderr while it is shown, else nothing."""
    if not shown:
        yield lambda text: None
        return
    from rich.console import Console

    with Console(stderr=True).status("") as status:
        yield lambda text: status.update(text)


def _load(trace_path: Path, specs: list[str], say):
    """Return (trace, built schedulers), saying what is being done (the slow start of a run)."""
    from levelflow.simulator.replay import build_scheduler
    from levelflow.traces import load_trace

    say(f"reading {trace_path}")
    trace = load_trace(trace_path)
    built = []  # every scheduler before running any: a bad name fails before output starts
    for i, spec in enumerate(specs, 1):
        say(f"preparing scheduler {spec} ({i} of {len(specs)}) for {len(trace.graph):,} tasks")
        built.append(build_scheduler(spec, trace))
    return trace, built


def _simulate_all(trace, specs, built, P: int, model: str, charge: bool, record: bool,
                  show_progress: bool, as_json: bool, where: str) -> list:
    """Return one SimResult per spec (a stalling scheduler raises SchedulerStall: one line and
    exit 3, from cli.main)."""
    from levelflow.simulator import simulate

    results = []
    for spec, (sched, _, setup_s) in zip(specs, built, strict=True):
        if show_progress:
            result = _with_progress(trace, sched, spec, P, model, charge, record)
        else:
            result = simulate(trace, sched, P, model=model, charge_overhead=charge,
                              record_schedule=record, label=spec)
        result.setup_s = setup_s  # built above, before the run
        results.append(result)
        if as_json:
            print(json_line(result.to_dict(), f"{where}: {spec}"), flush=True)
    return results


def _print_table(results, trace, P: int, model: str) -> None:
    """Print the comparison table, fitted to the terminal (a pipe gets every column)."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a pipe or file has no width: do not cut the table
        console.print(_table(results, trace, P, model))
    else:
        console.print(_table(results, trace, P, model, console.width))


@app.command("simulate")
def simulate_cmd(
    trace_path: Annotated[Path, typer.Argument(metavar="TRACE", help="A jobtrace/1 file "
                                               "(.json or .json.gz).")],
    scheduler: Annotated[str, typer.Option(
        "--scheduler", "-s", help="Comma-separated scheduler specs, e.g. levelbased,lookahead:15,"
        "logicblox,hybrid, or path/to/file.py:Class (default: levelbased, the baseline the "
        "others are compared with).")] = defaults.SIMULATE_SCHEDULER,
    processors: Annotated[int | None, typer.Option(
        "--processors", "-P", min=1, help="Simulated processors (default: the trace's, else 8).")
    ] = None,
    model: Annotated[str, typer.Option(
        "--model", help="serial: a task holds one processor; parallel: a task's work spreads "
        "over the idle processors.")] = "serial",
    charge_overhead: Annotated[bool, typer.Option(
        "--charge-overhead", help="Add the real time of each scheduler call to the clock.")
    ] = False,
    schedule: Annotated[Path | None, typer.Option(
        "--schedule", help="Write the schedule/1 CSV here (one scheduler only).")] = None,
    gantt: Annotated[Path | None, typer.Option(
        "--gantt", help="Write a Gantt chart PNG here (one scheduler only).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print one JSON object per scheduler, one per line.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No table, no progress bar.")
                     ] = False,
) -> None:
    """Replay a job trace under schedulers on P simulated processors and compare them."""
    from levelflow.simulator import default_processors

    specs = _split_specs(scheduler)
    _check_flags(specs, model, schedule, gantt)
    shown = not (as_json or quiet) and sys.stderr.isatty()
    with _status(shown) as say:
        trace, built = _load(trace_path, specs, say)
    P = default_processors(trace, processors)
    show_progress = shown and len(trace.graph) >= LONG_RUN_NODES
    record = schedule is not None or gantt is not None
    results = _simulate_all(trace, specs, built, P, model, charge_overhead, record,
                            show_progress, as_json, str(trace_path))
    notes = []
    if schedule is not None:
        from levelflow.traces import write_schedule

        write_schedule(results[0].schedule, trace, schedule)
        notes.append(f"schedule written to {schedule} ({len(results[0].schedule):,} rows, "
                     f"{specs[0]})")
    if gantt is not None:
        from levelflow.simulator.gantt import plot_gantt

        with _status(shown) as say:
            say(f"drawing the Gantt chart of {len(results[0].schedule):,} task runs")
            plot_gantt(results[0].schedule, P, gantt, names=trace.graph.names,
                       title=f"{trace.name or trace_path.name}: {specs[0]}, P={P}")
        notes.append(f"Gantt chart written to {gantt} ({specs[0]}, {P} processors)")
    if not (as_json or quiet):
        _print_table(results, trace, P, model)
    if not quiet:
        for note in notes:  # beside --json, on stderr: stdout holds only the JSON lines
            print(note, file=sys.stderr if as_json else sys.stdout)


def _with_progress(trace, sched, spec: str, P: int, model: str, charge: bool, record: bool):
    """Return simulate(...) run under a transient rich progress bar on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from levelflow.simulator import simulate

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        job = bar.add_task(spec, total=None)

        def tick(done: int, total: int) -> None:
            bar.update(job, completed=done, total=total)

        return simulate(trace, sched, P, model=model, charge_overhead=charge,
                        record_schedule=record, progress=tick, label=spec)
