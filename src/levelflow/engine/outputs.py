"""The all-or-nothing output writer: every output relation is in place, or none is."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from levelflow.tasks.ast import Program


def write_outputs(program: Program, relations: Mapping, outdir, *, jobs: int = 1) -> dict:
    """Return tuple counts per output relation after writing them all, or raise leaving none.

    `IO=stdout` outputs are printed as Soufflé prints them, framed by their name, once every
    file is in place. `IO=parquet`, `IO=spark` and `IO=sqlite` outputs are staged first and
    swapped in with the files (engine/frame_outputs.py, engine/sqlite_output.py).
    """
    from levelflow.engine.facts import (
        io_compress,
        io_delimiter,
        io_headers,
        output_path,
        write_relation,
    )
    from levelflow.engine.frame_outputs import stage_output
    from levelflow.engine.spark_io import frame_kind
    from levelflow.engine.sqlite_output import stage_sqlite

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    # Each file goes to a hidden temp file beside its final path (same filesystem), and is
    # renamed into place only once every output has been written.
    staged = []
    frames = [io for io in program.output_directives if frame_kind(io) in ("parquet", "spark")]
    databases = [io for io in program.output_directives if frame_kind(io) == "sqlite"]
    plan = _file_plan([io for io in program.output_directives if frame_kind(io) is None],
                      outdir, output_path)

    def write(item):
        name, io, final, tmp = item
        tmp.parent.mkdir(parents=True, exist_ok=True)
        return write_relation(relations[name], program.decls[name], tmp, io_delimiter(io),
                              headers=io_headers(io), shown=final or f"{name} (stdout)",
                              compress=io_compress(io))

    try:
        for io in frames:  # Parquet folders and tables: staged first, swapped in with the rest
            staged.append(stage_output(relations[io.relation], program.decls[io.relation], io,
                                       outdir))
        in_databases = stage_sqlite(databases, program.decls, relations, outdir)
        staged += in_databases
        if jobs > 1 and len(plan) > 1:
            with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="levelflow-out") as ex:
                counts = list(ex.map(write, plan))
        else:
            counts = [write(item) for item in plan]
        _publish(plan)
        for stage, _ in staged:
            stage.commit()
    except BaseException:
        for _, _, _, tmp in plan:
            tmp.unlink(missing_ok=True)
        for stage, _ in staged:
            stage.abort()
        raise
    done = {io.relation: count
            for io, (_, count) in zip(frames, staged[:len(frames)], strict=True)}
    for _, counts_of in in_databases:
        done.update(counts_of)
    return {**done, **{name: count for (name, *_), count in zip(plan, counts, strict=True)}}


def _file_plan(ios, outdir: Path, output_path) -> list[tuple]:
    """Return (relation, directive, final path or None for stdout, temp path) per file output:
    each temp file beside its final path (same filesystem), hidden."""
    plan = []
    for io in ios:
        name = io.relation
        stdout = io.option("IO") == "stdout"
        final = None if stdout else output_path(io, outdir)
        where = outdir if stdout else final.parent
        tmp = where / f".{name}.levelflow-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        plan.append((name, io, final, tmp))
    return plan


def _publish(plan: list[tuple]) -> None:
    """Rename every written temp file into place; print (and drop) the stdout ones."""
    for name, _, final, tmp in plan:
        if final is None:
            sys.stdout.write(f"---------------\n{name}\n===============\n"
                             f"{tmp.read_text(encoding='utf-8')}===============\n")
            tmp.unlink()
        else:
            os.replace(tmp, final)
