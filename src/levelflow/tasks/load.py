"""The front end's entry points: text or file -> preprocessed, parsed and checked Program."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from levelflow.gcpause import paused_gc
from levelflow.tasks.ast import Program
from levelflow.tasks.check import check
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.lexer import Source
from levelflow.tasks.parser import parse
from levelflow.tasks.preprocess import Confined, needs_preprocessing, preprocess

# A stored program (a state's manifest) is preprocessed text: it includes nothing any more, so
# reloading it reads no file (an `#include` in it is refused, not looked up).
STORED = Confined((), "a stored program includes no file")


def parse_program(text: str, filename: str = "<input>", include_dirs: Sequence[str] = (), *,
                  preprocessor: bool = True, confined: Confined | None = None) -> Program:
    """Return the preprocessed, parsed and checked Program; raise DatalogError at the first
    problem (in the file and line it came from, an included file's too). `confined`: the
    folders its includes may read (None: any file)."""
    line_map, source = None, text
    with paused_gc():
        if preprocessor and needs_preprocessing(text):
            done = preprocess(text, filename, tuple(os.fspath(d) for d in include_dirs),
                              confined)
            text, line_map, source = done.text, done.map, done.stored_text()
        program = check(parse(text, filename, line_map), filename)
    return dataclasses.replace(program, source=source)


def parse_stored(text: str, filename: str) -> Program:
    """Return the checked Program of a state's stored text; it reads no file."""
    return parse_program(text, filename, confined=STORED)


def load_program(path: str | os.PathLike[str], include_dirs: Sequence[str] = (), *,
                 preprocessor: bool = True, confined: Confined | None = None) -> Program:
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
    program = parse_program(text, name, include_dirs, preprocessor=preprocessor,
                            confined=confined)
    for note in program.notes:  # once per program read from a file, not per stored reload
        print(note, file=sys.stderr)
    return program
