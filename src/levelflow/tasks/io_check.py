"""The checks of `.input`, `.output` and `.printsize` directives: relations declared, options
known and well formed, one input per relation, no two outputs writing the same place."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePath

from levelflow.tasks.ast import IO, Decl

IO_OPTIONS = ("IO", "filename", "delimiter", "headers", "compress", "table", "dbname")


def _io_option_problem(io: IO) -> str | None:
    """Return what is wrong with an .input or .output directive's options, or None."""
    allowed = ("file", "parquet", "spark", "sqlite") + (("stdout",) if io.kind == "output"
                                                         else ())
    if io.option("IO", "file") not in allowed:
        return (f"IO={io.option('IO')} is not supported for .{io.kind} "
                f"(supported: {', '.join(allowed)})")
    unknown = [key for key, _ in io.options if key not in IO_OPTIONS]
    if unknown:  # refused, not ignored: `rfc4180=true` ignored would read quotes as data
        return (f"option '{unknown[0]}' is not supported for .{io.kind} "
                f"(supported: {', '.join(IO_OPTIONS)})")
    for key in ("headers", "compress"):
        if io.option(key, "false") not in ("true", "false"):
            return f"{key}={io.option(key)} must be true or false"
    if (io.option("IO") == "spark") != (io.option("table") is not None):
        return "IO=spark takes table=\"db.name\" (and table= needs IO=spark)"
    if io.option("dbname") is not None and io.option("IO") != "sqlite":
        return "dbname= needs IO=sqlite"
    return None


def check_ios(ios: list[IO], decls: dict[str, Decl], report: Callable[..., None]
              ) -> tuple[dict[str, IO], dict[str, IO], tuple[IO, ...], tuple[str, ...]]:
    """Return the inputs, the first output of each relation, the further outputs and the
    .printsize relations, each problem told to `report` (check.Problems)."""
    inputs: dict[str, IO] = {}
    outputs: dict[str, IO] = {}
    more_outputs: list[IO] = []
    targets: dict[tuple, IO] = {}  # where an output goes -> its first directive
    printsize: dict[str, None] = {}
    for io in ios:
        if io.relation not in decls:
            report(io.loc, f"relation '{io.relation}' is not declared", needs_rest=True)
            continue
        if io.kind == "printsize":
            printsize[io.relation] = None
            continue
        problem = _io_option_problem(io)
        if problem is None and io.option("IO") == "sqlite" and not decls[io.relation].attrs:
            problem = "IO=sqlite needs a relation with attributes (Soufflé's tables have none)"
        if problem is not None:
            report(io.loc, problem)
            continue
        if io.kind == "input":
            if io.relation in inputs:
                first = inputs[io.relation].loc
                report(io.loc, f"relation '{io.relation}' already has an .input directive at "
                               f"{first.line}:{first.col}")
                continue
            inputs[io.relation] = io
            continue
        # Several .output directives may write one relation to different places, as in
        # Soufflé; two writing the same place are a mistake.
        if io.option("IO") == "stdout":
            target = ("stdout", io.relation)
        elif io.option("IO") == "spark":
            target = ("table", io.option("table"))
        elif io.option("IO") == "sqlite":  # one database holds several relations
            target = ("sqlite", str(PurePath(io.file_name)), io.relation)
        else:  # `x.csv` and `./x.csv` are one file (`..` is left to engine.paths, -D known)
            target = ("file", str(PurePath(io.file_name)))
        if target in targets:
            first = targets[target].loc
            where = "standard output" if target[0] == "stdout" else target[1]
            report(io.loc, f"the .output directive at {first.line}:{first.col} already writes "
                           f"'{targets[target].relation}' to {where}")
            continue
        targets[target] = io
        if io.relation in outputs:
            more_outputs.append(io)
        else:
            outputs[io.relation] = io
    return inputs, outputs, tuple(more_outputs), tuple(printsize)
