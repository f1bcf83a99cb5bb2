"""`IO=sqlite` inputs and outputs, laid out as Soufflé's SQLite reader and writer lay them out.

The database is `filename=` or `dbname=` (the former wins, as in Soufflé), else R.sqlite,
relative to -F for an input and -D for an output. An `.input` reads the table or view named as
the relation, its first columns by position (more are ignored, as Soufflé ignores them).
An `.output` writes table `_R` (columns "0", "1", ... holding numbers, and the id of each
symbol in the shared table `__SymbolTable(id INTEGER PRIMARY KEY, symbol TEXT UNIQUE)`), and
view `R` showing the symbols, its columns named as the attributes. Unlike Soufflé, a float is
stored as a REAL, not as its bits in an integer, so it reads back as itself; an unsigned is
stored as its 64 bits in an INTEGER, as Soufflé stores it (above 2^63 - 1 negative), and read
back so; a record or ADT as its JSON text, a symbol. This module reads inputs;
engine/sqlite_output.py writes outputs. Nothing here keeps state.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from levelflow.engine import io_meter
from levelflow.errors import InputError
from levelflow.tasks.ast import IO, Decl

SYMBOLS = "__SymbolTable"
_ARROW = {"number": pa.int64(), "unsigned": pa.int64(), "float": pa.float64(),
          "symbol": pa.string()}


def q(name: str) -> str:
    """Return an SQL identifier quoted."""
    return '"' + name.replace('"', '""') + '"'


def _where(io: IO, db: Path) -> str:
    """Return how an error line names the directive and the database."""
    loc = f"{io.loc}: " if io.loc is not None else ""
    return f"{loc}error: .{io.kind} {io.relation}(IO=sqlite) {db}"


def db_path(io: IO, folder) -> Path:
    """Return the database file of an `IO=sqlite` directive, relative to `folder`."""
    return Path(folder if folder is not None else Path.cwd()) / io.file_name


def _columns(con, io: IO, db: Path, decl: Decl) -> list[str]:
    """Return the names of the columns an input reads, or raise InputError naming what is
    missing."""
    found = con.execute("SELECT count(*) FROM sqlite_master WHERE type IN ('table', 'view') "
                        "AND name = ?", (io.relation,)).fetchone()[0]
    if not found:
        raise InputError(f"{_where(io, db)}: no table or view named {io.relation!r}")
    names = [d[0] for d in con.execute(f"SELECT * FROM {q(io.relation)} LIMIT 0").description]
    if len(names) < decl.arity:
        raise InputError(f"{_where(io, db)}: {io.relation!r} has {len(names)} columns, "
                         f"{decl.name} has {decl.arity} ({', '.join(decl.attrs)})")
    return names[:decl.arity]


def _open(io: IO, db: Path):
    """Return a read-only connection to an input's database, or raise InputError."""
    if not db.is_file():
        why = "a directory" if db.is_dir() else "no such database file"
        raise InputError(f"{_where(io, db)}: {why}")
    try:
        con = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as e:
        raise InputError(f"{_where(io, db)}: {e}") from None
    return con


def check_sqlite(decl: Decl, io: IO, factdir) -> None:
    """Return None if an `IO=sqlite` input's database, table and columns are there (before
    Spark starts); else raise InputError naming the directive and the file."""
    db = db_path(io, factdir)
    with closing(_open(io, db)) as con:
        try:
            _columns(con, io, db, decl)
        except sqlite3.Error as e:
            raise InputError(f"{_where(io, db)}: {e}") from None


def read_sqlite(decl: Decl, io: IO, factdir) -> pa.Table:
    """Return an `IO=sqlite` input's rows as an Arrow table (c0.., repeats kept): numbers from
    integers, floats from integers or reals, symbols as text (a number's text too, as Soufflé
    reads text); a null, another kind of value or an infinite float is refused in one line."""
    with io_meter.timed("reading"):
        db = db_path(io, factdir)
        with closing(_open(io, db)) as con:
            try:
                return _read(con, decl, io, db)
            except sqlite3.Error as e:
                raise InputError(f"{_where(io, db)}: {e}") from None


def _read(con, decl: Decl, io: IO, db: Path) -> pa.Table:
    """Return read_sqlite's table from an open database: one pass reads the values, a value
    of the wrong kind read as a null; only then a second pass finds what to refuse."""
    names = _columns(con, io, db, decl)
    source = q(io.relation)
    checks, selects = [], []
    for i, (name, primitive) in enumerate(zip(names, decl.types, strict=True)):
        c = q(name)
        checks.append((i, "null", f"{c} IS NULL"))
        if primitive in ("number", "unsigned"):
            checks.append((i, "a value that is not an integer", f"typeof({c}) <> 'integer'"))
            selects.append(f"CASE WHEN typeof({c}) = 'integer' THEN {c} END")
        elif primitive == "float":
            checks.append((i, "a value that is not a number",
                           f"typeof({c}) NOT IN ('integer', 'real')"))
            checks.append((i, "an infinite number", f"abs({c}) > 1.7976931348623157e308"))
            selects.append(f"CASE WHEN typeof({c}) IN ('integer', 'real') "
                           f"THEN CAST({c} AS REAL) END")
        else:
            selects.append(f"CAST({c} AS TEXT)")
    rows = con.execute(f"SELECT {', '.join(selects)} FROM {source}").fetchall()
    columns = list(zip(*rows, strict=True)) if rows else [()] * decl.arity
    table = pa.table({f"c{i}": pa.array(col, _ARROW[t])
                      for i, (col, t) in enumerate(zip(columns, decl.types, strict=True))})
    if any(col.null_count for col in table.columns) or not all(
            pc.all(pc.is_finite(table.column(i))).as_py() in (True, None)
            for i, t in enumerate(decl.types) if t == "float"):
        found = con.execute("SELECT " + ", ".join(f"max({cond})" for _, _, cond in checks)
                            + f" FROM {source}").fetchone()
        i, why = next((i, why) for (i, why, _), bad in zip(checks, found, strict=True) if bad)
        raise InputError(f"{_where(io, db)}: a row holds {why} in {decl.name}."
                         f"{decl.attrs[i]} (column {i + 1}, {names[i]!r})")
    if decl.shapes:  # records and ADTs: each distinct value checked against its type
        from levelflow.engine.record_columns import arrow_records
        table = arrow_records(decl, table, f"relation {decl.name} ({db})", InputError)
    return table


def count_rows(io: IO, factdir) -> int:
    """Return the rows of an `IO=sqlite` input's table (0 when it cannot be read: it is
    refused with its own line when read)."""
    try:
        with closing(sqlite3.connect(f"{db_path(io, factdir).resolve().as_uri()}?mode=ro",
                                     uri=True)) as con:
            return con.execute(f"SELECT count(*) FROM {q(io.relation)}").fetchone()[0]
    except (sqlite3.Error, OSError, ValueError):
        return 0
