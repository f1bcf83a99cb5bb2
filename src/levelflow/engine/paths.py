"""Where `.input` / `.output` files are: checked before Spark starts, one line each.

As in Soufflé, `filename=` may name any path (absolute, or `../` out of -F / -D), so by default
`run`, `update` and `shell` read and write wherever the program says. Always refused: two
`.output` directives writing one file however it is spelled (`x.csv`, `./x.csv`, `D/x.csv`),
and an `.output` writing the fact file an `.input` reads (but for `IO=sqlite` directives of
different relations: one database holds them all). With `confine`, any input outside
the fact directory (-F) and any output outside the output directory (-D) is refused too,
symbolic links followed: `serve` checks every program a client posts so (serve_service). So
is an `#include` outside the fact directory and the -I folders (`confined_includes`): it is
refused by the preprocessor before the file is read.
"""

from __future__ import annotations

import os
from pathlib import Path

from levelflow.tasks.ast import IO, Program
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.preprocess import Confined

# `run`, `update` and `shell` default to Soufflé's behaviour (paths anywhere). `serve`, which
# takes programs it did not write, defaults to CONFINE_SERVE.
CONFINE_DEFAULT = False
CONFINE_SERVE = True
# How a refusal names the folders and the switch: `run`'s flags (serve passes its own).
FLAGS = ("-F", "-D", "--confine")


class PathError(DatalogError):
    """A directive's file is refused: `program:line:col: error: ...` on one line."""


def confined_includes(confine: bool, folders, why: str = FLAGS[2]) -> Confined | None:
    """Return the folders a confined program's `#include` may read (the fact folder and the
    -I folders given; None among them is skipped), or None when it is not confined."""
    if not confine:
        return None
    return Confined(tuple(os.fspath(f) for f in folders if f is not None), why)


def _where(base: Path, io: IO) -> Path:
    """Return the absolute, normalized path a directive reads or writes (links followed)."""
    try:
        return Path(os.path.realpath(Path(base) / io.file_name))
    except (ValueError, OSError) as e:  # a NUL byte, a symlink loop
        raise PathError(f"bad path {io.file_name!r} for .{io.kind} {io.relation} ({e})",
                        io.loc) from None


def _inside(path: Path, root: Path) -> bool:
    return root in path.parents


def within(path: Path, root: Path) -> bool:
    """Return whether `path` is `root` or inside it, symbolic links followed (`..` resolved)."""
    path, root = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    return path == root or _inside(path, root)


def _confine(io: IO, path: Path, root: Path, flag: str, what: str, why: str) -> None:
    """Raise PathError if `path` is not inside `root`."""
    if not _inside(path, Path(os.path.realpath(root))):
        verb = "reads" if io.kind == "input" else "writes"
        named = f"{flag} {root}" if flag else str(root)
        raise PathError(f".{io.kind} {io.relation} {verb} {path}, outside the {what} "
                        f"{named} ({why})", io.loc)


def check_io_paths(program: Program, factdir: Path | None, outdir: Path | None,
                   confine: bool = CONFINE_DEFAULT, flags: tuple[str, str, str] = FLAGS) -> None:
    """Return None if the directives' files may be used; else raise one PathError line.

    `factdir` None: the inputs are not read now (update, a resumed shell); `outdir` None: no
    output files are written. `flags`: how a refusal names -F, -D and the switch.
    """
    fact_flag, out_flag, why = flags
    inputs: dict[object, IO] = {}  # by path, and by inode (a hard link is the same file)
    if factdir is not None:
        for io in sorted(program.inputs.values(), key=_order):
            if _table(io, confine, "fact directory"):
                continue
            path = _where(factdir, io)
            if confine:
                _confine(io, path, factdir, fact_flag, "fact directory", why)
            for key in (path, _inode(path)):
                if key is not None:
                    inputs.setdefault(key, io)
    if outdir is None:
        return
    written: dict[Path, list[IO]] = {}
    for io in sorted(program.output_directives, key=_order):
        if io.option("IO") == "stdout" or _table(io, confine, "output directory"):
            continue
        path = _where(outdir, io)
        if confine:
            _confine(io, path, outdir, out_flag, "output directory", why)
        first = next((w for w in written.get(path, ()) if not _beside(w, io)), None)
        if first is not None:
            raise PathError(f"the .output directive at {_at(first)} already writes "
                            f"'{first.relation}' to {path}", io.loc)
        inode = _inode(path)
        read = inputs.get(path) or (inputs.get(inode) if inode is not None else None)
        if read is not None and not _beside(read, io):
            raise PathError(f".output {io.relation} would overwrite {path}, the fact file "
                            f"the .input directive at {_at(read)} reads", io.loc)
        written.setdefault(path, []).append(io)


def _beside(a: IO, b: IO) -> bool:
    """Return whether two directives may share their file: an SQLite database holds several
    relations' tables, as in Soufflé."""
    return a.option("IO") == b.option("IO") == "sqlite" and a.relation != b.relation


def _table(io: IO, confine: bool, what: str) -> bool:
    """Return whether the directive names a catalog table (no file); refused when confined."""
    if io.option("IO") != "spark":
        return False
    if confine:
        verb = "reads" if io.kind == "input" else "writes"
        raise PathError(f".{io.kind} {io.relation} {verb} the catalog table "
                        f"{io.option('table')}, outside the {what} (confined)", io.loc)
    return True


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _order(io: IO) -> tuple[int, int]:
    return (io.loc.line, io.loc.col) if io.loc is not None else (0, 0)


def _at(io: IO) -> str:
    return f"{io.loc.line}:{io.loc.col}" if io.loc is not None else "?"
