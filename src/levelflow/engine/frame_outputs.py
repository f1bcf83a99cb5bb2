"""`.output` to Parquet and to catalog tables, staged so that the writer can keep all-or-nothing.

Each output is first written beside its target (a hidden folder next to the Parquet path, a
table `<name>__levelflow_<id>` in the target's database); only once every output of the run
is staged are they swapped into place, and a failure drops every staged one. Columns carry the
declaration's attribute names (spark_io.named).
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from levelflow.engine.spark_io import InputError, named, parquet_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from levelflow.tasks.ast import IO, Decl


class OutputError(InputError):
    """A Parquet or table output cannot be written; str() names the relation and the target."""


@dataclass
class Staged:
    """One output written to its stand-in, waiting for `commit` (swap) or `abort` (drop)."""

    kind: str  # "parquet" | "file" (an SQLite database) | "spark"
    final: str  # the folder or table name
    tmp: str
    spark: object = None

    def commit(self) -> None:
        """Put the staged output in place of the old one (a folder by renames, a table by
        drop and rename)."""
        if self.kind != "spark":
            final, tmp = Path(self.final), Path(self.tmp)
            old = final.with_name(f".{final.name}.levelflow-old-{uuid.uuid4().hex[:6]}")
            if final.exists() or final.is_symlink():
                os.replace(final, old)
            os.replace(tmp, final)
            if old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
            else:
                old.unlink(missing_ok=True)
            return
        self.spark.sql(f"DROP TABLE IF EXISTS {self.final}")
        self.spark.sql(f"ALTER TABLE {self.tmp} RENAME TO {self.final}")

    def abort(self) -> None:
        """Drop the staged output."""
        if self.kind == "file":
            Path(self.tmp).unlink(missing_ok=True)
        elif self.kind == "parquet":
            shutil.rmtree(self.tmp, ignore_errors=True)
        elif self.spark is not None:
            self.spark.sql(f"DROP TABLE IF EXISTS {self.tmp}")


def stage_output(df: DataFrame, decl: Decl, io: IO, outdir: Path) -> tuple[Staged, int]:
    """Return the staged output of relation `decl` and its tuple count (one write job)."""
    import pyspark.sql.functions as F
    from pyspark.errors import PySparkException
    from pyspark.sql import Observation

    seen = Observation()
    out = named(decl, df).observe(seen, F.count(F.lit(1)).alias("rows"))
    if io.option("IO") == "parquet":
        final = parquet_path(io, outdir)
        tmp = final.with_name(f".{final.name}.levelflow-{os.getpid()}-{uuid.uuid4().hex[:6]}")
        staged = Staged("parquet", str(final), str(tmp))
        tmp.parent.mkdir(parents=True, exist_ok=True)
        write = lambda: out.write.parquet(str(tmp.resolve()))  # noqa: E731
    else:
        table = io.option("table")
        staged = Staged("spark", table, f"{table}__levelflow_{uuid.uuid4().hex[:8]}",
                        df.sparkSession)
        write = lambda: out.write.saveAsTable(staged.tmp)  # noqa: E731
    try:
        write()
    except PySparkException as e:
        from levelflow.engine.workers import one_line

        staged.abort()
        raise OutputError(f"relation {decl.name} ({staged.final}): error: cannot write "
                          f"({one_line(e)}); nothing was written") from None
    except BaseException:
        staged.abort()
        raise
    return staged, int(seen.get["rows"])
