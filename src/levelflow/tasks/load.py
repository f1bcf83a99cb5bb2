"""The front end's entry points: text or file -> checked Program."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from levelflow.tasks.ast import Program
from levelflow.tasks.check import check
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.lexer import Source
from levelflow.tasks.parser import parse


def parse_program(text: str, filename: str = "<input>") -> Program:
    """Return the parsed and checked Program; raise DatalogError at the first problem."""
    return check(parse(text, filename), filename)


def load_program(path: str | os.PathLike[str]) -> Program:
    """Return the checked Program read from `path` (UTF-8); raise DatalogError on any problem."""
    name = os.fspath(path)
    try:
        data = Path(name).read_bytes()
    except OSError as e:
        raise DatalogError(f"cannot read program: {e.strerror or e}", file=name) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        prefix = data[:e.start].decode("utf-8")
        raise Source(prefix, name).error(len(prefix), "the file is not valid UTF-8") from None
    program = parse_program(text, name)
    for note in program.notes:  # once per program read from a file, not per stored reload
        print(note, file=sys.stderr)
    return program
