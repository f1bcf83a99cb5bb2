"""A program as the incremental engine takes it: a path, a `ProgramText` (e.g. posted over
HTTP) or `ProgramTasks` already built, loaded with the text the state stores."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from levelflow.tasks.preprocess import Confined
from levelflow.tasks.tasks import ProgramTasks


class ProgramText(NamedTuple):
    """A program given as text (e.g. over HTTP), with the name its errors and state cite."""

    text: str
    name: str
    include_dirs: tuple = ()  # where #include looks after the name's directory
    preprocessor: bool = True
    confined: Confined | None = None  # the only folders its #include may read (None: any)


def load_tasks(program) -> tuple[ProgramTasks, str]:
    """Return (ProgramTasks, program text) for a path, ProgramText or ProgramTasks."""
    from levelflow.tasks import build_tasks, load_program, parse_program

    if isinstance(program, ProgramText):
        pt = build_tasks(parse_program(program.text, program.name, program.include_dirs,
                                       preprocessor=program.preprocessor,
                                       confined=program.confined))
        return pt, pt.program.source
    if isinstance(program, ProgramTasks):
        if program.program.source:  # preprocessed: includes and macros resolved
            return program, program.program.source
        path = Path(program.program.file)
        return program, path.read_text() if path.is_file() else ""
    pt = build_tasks(load_program(program))
    return pt, pt.program.source
