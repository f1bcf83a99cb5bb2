"""The rows of the symbol table `ord` reads (`@ord`, tasks/ordinals.py): built from the program's
constants and the input facts at a run or a bootstrap, extended by each epoch's new symbols."""

from __future__ import annotations

from levelflow.tasks.ordinals import ORD, OrdinalsInput, symbol_columns


def table_symbols(io: OrdinalsInput, factdir, read_frame) -> list[str]:
    """Return the table's symbols in number order: the program's constants, then each source
    input's symbols as its fact file is read (a DataFrame, Parquet or table input's, which
    `read_frame(decl, io)` reads, in text order); a missing file adds none."""
    import polars as pl

    from levelflow.engine.facts import (
        fact_table,
        input_missing,
        input_path,
        io_delimiter,
        io_headers,
    )

    table = dict.fromkeys(io.constants)
    for _, src, decl in io.sources:
        cols = symbol_columns(decl)
        df = read_frame(decl, src)
        if df is not None:
            names = [f"c{i}" for i in cols]
            found = {v for row in df.select(*names).collect() for v in row}
            table.update(dict.fromkeys(sorted(found)))
            continue
        if factdir is None or input_missing(path := input_path(src, factdir)):
            continue
        # The file's distinct tuples in the order of their first lines, each tuple's symbols
        # left to right: the order a line-by-line read meets them.
        rows = pl.from_arrow(fact_table(path, decl, io_delimiter(src), io_headers(src)))
        met = rows.select(pl.concat_list([f"c{i}" for i in cols]).alias("s")).explode("s")
        table.update(dict.fromkeys(met["s"].unique(maintain_order=True).to_list()))
    return list(table)


def table_rows(io: OrdinalsInput, factdir, read_frame) -> list[tuple[str, int]]:
    """Return `@ord`'s tuples (symbol, its number) at a run or a bootstrap (table_symbols)."""
    return [(s, n) for n, s in enumerate(table_symbols(io, factdir, read_frame))]


def new_symbol_ops(session, ops, constants: bool = False) -> list:
    """Return the `+@ord(s, n)` ops that number each symbol the ops insert into an input and
    the table lacks, in the order the ops insert them (n from the table's size on); with
    `constants` (a program change that keeps `ord`), the program's new constants first."""
    from levelflow.engine.incremental.updates import Op

    io = session.program.inputs.get(ORD)
    if not isinstance(io, OrdinalsInput):
        return []
    cols = {name: symbol_columns(decl) for name, _, decl in io.sources}
    inserted = dict.fromkeys((*io.constants,) if constants else ())
    inserted.update(dict.fromkeys(op.row[i] for op in ops
                                  if op.sign > 0 and op.relation in cols
                                  for i in cols[op.relation]))
    if not inserted:
        return []
    known = dict(_rows(session.snap.tuples(ORD), ["c0", "c1"]))
    new = [s for s in inserted if s not in known]
    return [Op(+1, ORD, (s, len(known) + k)) for k, s in enumerate(new)]


def seed_rows(io: OrdinalsInput, base: dict) -> list[tuple[str, int]]:
    """Return `@ord`'s rows for a program change that brings `ord` in: the new program's
    constants, then the symbols of each source input after the epoch, in text order."""
    table = dict.fromkeys(io.constants)
    for name, _, decl in io.sources:
        ver = base.get(name)
        if ver is None:
            continue
        found = {v for row in _rows(ver.new, [f"c{i}" for i in symbol_columns(decl)])
                 for v in row}
        table.update(dict.fromkeys(sorted(found)))
    return [(s, n) for n, s in enumerate(table)]


def _rows(df, columns: list[str]) -> list[tuple]:
    """Return a frame's rows of `columns`: read in the driver where it holds them (a tiny
    state's epoch asks nothing of Spark), else collected."""
    from levelflow.engine.incremental.backends.driver_rows import rows_of

    table = rows_of(df)
    if table is None:
        return [tuple(r) for r in df.select(*columns).collect()]
    return list(zip(*(table.column(c).to_pylist() for c in columns), strict=True))
