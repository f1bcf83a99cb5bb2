"""`IO=sqlite` outputs, written as Soufflé's SQLite writer lays them out (the layout:
engine/sqlite_io.py): staged in a copy of the database, swapped in with the other outputs."""

from __future__ import annotations

import os
import shutil
import sqlite3
import uuid
from contextlib import closing
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from levelflow.engine.frame_outputs import OutputError, Staged
from levelflow.engine.incremental.backends.driver_rows import arrow_rows
from levelflow.engine.sqlite_io import SYMBOLS, db_path, q
from levelflow.tasks.ast import IO, Decl


def stage_sqlite(ios: list[IO], decls: dict[str, Decl], relations, outdir: Path
                 ) -> list[tuple[object, dict[str, int]]]:
    """Return per database the outputs write (staged in a copy beside it, frame_outputs.Staged)
    and its relations' tuple counts; a failure leaves no copy and raises OutputError."""
    by_db: dict[Path, list[IO]] = {}
    for io in ios:
        by_db.setdefault(db_path(io, outdir), []).append(io)
    done = []
    try:
        for db, group in by_db.items():
            tmp = db.with_name(f".{db.name}.levelflow-{os.getpid()}-{uuid.uuid4().hex[:6]}")
            staged = Staged("file", str(db), str(tmp))
            done.append((staged, {}))
            tmp.parent.mkdir(parents=True, exist_ok=True)
            if db.is_file():  # its other tables stay, as Soufflé writes into the database
                shutil.copyfile(db, tmp)
            try:
                with closing(sqlite3.connect(tmp)) as con:
                    con.execute("PRAGMA journal_mode = OFF")  # a staged copy: no journal
                    con.execute("PRAGMA synchronous = OFF")
                    for io in group:
                        decl = decls[io.relation]
                        done[-1][1][io.relation] = _write(con, decl, io,
                                                          relations[io.relation], db)
                    con.commit()
            except sqlite3.Error as e:
                raise OutputError(f"relation {group[0].relation} ({db}): error: cannot write "
                                  f"({e}); nothing was written") from None
    except BaseException:
        for staged, _ in done:
            staged.abort()
        raise
    return done


def _write(con, decl: Decl, io: IO, df, db: Path) -> int:
    """Return the tuples written to table `_R` and view `R` (both made anew)."""
    table = arrow_rows(df)
    name, data = io.relation, q("_" + io.relation)
    kind = con.execute("SELECT type FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    if kind is not None and kind[0] != "view":
        raise OutputError(f"relation {decl.name} ({db}): error: the database holds a {kind[0]} "
                          f"named {name!r}, where the relation's view goes")
    con.execute(f"CREATE TABLE IF NOT EXISTS {q(SYMBOLS)} "
                f"(id INTEGER PRIMARY KEY, symbol TEXT UNIQUE)")
    con.execute(f"DROP VIEW IF EXISTS {q(name)}")
    con.execute(f"DROP TABLE IF EXISTS {data}")
    cols = [f'{q(str(i))} {"REAL" if t == "float" else "INTEGER"}'
            for i, t in enumerate(decl.types)]
    # Soufflé's layout: a small tuple is the primary key of a table WITHOUT ROWID
    small = decl.arity * 9 + 1 < 200
    key = f", PRIMARY KEY ({', '.join(q(str(i)) for i in range(decl.arity))})" if small else ""
    con.execute(f"CREATE TABLE {data} ({', '.join(cols)}{key})"
                + (" WITHOUT ROWID" if small else ""))
    columns = [table.column(i) for i in range(decl.arity)]
    symbolic = [i for i, t in enumerate(decl.types) if t == "symbol"]
    for i in symbolic:
        columns[i] = columns[i].cast(pa.string())
    if symbolic:
        distinct = pc.unique(pa.chunked_array([c for i in symbolic
                                               for c in columns[i].chunks], pa.string()))
        con.executemany(f"INSERT OR IGNORE INTO {q(SYMBOLS)} (symbol) VALUES (?)",
                        zip(distinct.to_pylist()))
        ids, symbols = zip(*con.execute(f"SELECT id, symbol FROM {q(SYMBOLS)}"), strict=True)
        known, ids = pa.array(symbols, pa.string()), pa.array(ids, pa.int64())
        for i in symbolic:
            columns[i] = pc.take(ids, pc.index_in(columns[i], value_set=known))
    con.executemany(f"INSERT INTO {data} VALUES ({', '.join('?' * decl.arity)})",
                    zip(*(c.to_pylist() for c in columns), strict=True))
    shown, tables, joins = [], [data], []
    for i, attr in enumerate(decl.attrs):
        col = f"{data}.{q(str(i))}"
        if decl.types[i] == "symbol":
            sym = q(f"_symtab_{i}")
            tables.append(f"{q(SYMBOLS)} AS {sym}")
            joins.append(f"{col} = {sym}.id")
            col = f"{sym}.symbol"
        shown.append(f"{col} AS {q(attr or str(i))}")
    where = f" WHERE {' AND '.join(joins)}" if joins else ""
    con.execute(f"CREATE VIEW {q(name)} AS SELECT {', '.join(shown)} "
                f"FROM {', '.join(tables)}{where}")
    return table.num_rows
