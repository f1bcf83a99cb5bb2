"""Compaction: fold relations' segment chains into new bases of the current epoch.

The epoch's content does not change, only how it is stored: each relation is read as base plus
segments, written as a new base into a temporary directory, read back and verified (its rows
must be what the manifest says), moved to `epochs/<current>/<kind>/<name>`, and then the
epoch's manifest is replaced by one rename. Until that rename the old manifest, whose chain
is untouched, is the epoch; a directory a killed compaction left behind is named by no manifest
(garbage collection or the next compaction removes it). Each base is flushed to disk before
the manifest names it; then CURRENT is switched to name the new manifest's checksum. The
caller holds the writer lock.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from typing import TYPE_CHECKING

from levelflow.engine.incremental.state.directory import (
    StateDir,
    StateError,
)
from levelflow.engine.incremental.state.durable import (
    SUM_KEY,
    fsync_path,
    fsync_tree,
    manifest_text,
    write_durably,
)
from levelflow.engine.incremental.state.files import arrow_stored_schema
from levelflow.engine.incremental.state.integrity import Stored, cause, observed
from levelflow.engine.incremental.state.segments import needs_compaction
from levelflow.engine.incremental.state.write import write_all
from levelflow.errors import LevelflowError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from levelflow.tasks.ast import Program


def due(data: dict, force: bool = False) -> list[tuple[str, str, str]]:
    """Return (kind, manifest key, name) of every relation with a chain past the policy
    (every relation with a chain if `force`)."""
    return [(kind, key, name) for kind, key in (("rel", "relations"), ("base", "base"))
            for name, info in sorted(data[key].items())
            if info["epoch"] is not None and info.get("segments")
            and (force or needs_compaction(info))]


def compact(spark: SparkSession, state: StateDir, program: Program, *, force: bool = False,
            before_swap=None) -> list[str]:
    """Return the names compacted (`kind/name`) after folding their chains into new bases.

    `before_swap` is a test hook called after the bases are in place, before the rename.
    """
    data = state.manifest()
    todo = due(data, force)
    if not todo:
        return []
    epoch = int(data["epoch"])
    tmp = state.epochs / f".tmp-compact-{epoch}-{uuid.uuid4().hex[:8]}"
    try:
        new = _write_bases(spark, state, program, data, todo, tmp)
        fsync_tree(tmp)  # the new bases are on disk before a manifest names them
        for kind, _key, name in todo:
            dest = state.epochs / str(epoch) / kind / name
            if dest.exists():  # left by a compaction killed before its rename: no one's
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / kind / name, dest)
            fsync_path(dest.parent)
        if before_swap is not None:
            before_swap()
        # CURRENT names the old manifest until it is switched below: a kill in between
        # leaves a manifest that says which one it replaced (StateDir.manifest accepts it).
        new["compacted_from"] = data.get(SUM_KEY)
        text, digest = manifest_text(new)
        write_durably(state.epochs / str(epoch) / "manifest.json", text)
        state.switch(epoch, digest)
    except Exception as e:
        if isinstance(e, LevelflowError):
            raise
        raise StateError(f"{state.path}: error: cannot compact epoch {epoch} ({cause(e)}); "
                         f"the state is unchanged") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [f"{kind}/{name}" for kind, _, name in todo]


def _write_bases(spark, state: StateDir, program: Program, data: dict, todo, tmp) -> dict:
    """Return the new manifest after writing and verifying each relation's base into `tmp`."""
    snap = state.load(spark, program, check=False)
    epoch = int(data["epoch"])
    new = json.loads(json.dumps(data))
    written, frames = [], []
    for kind, key, name in todo:
        rows = int(data[key][name]["rows"])
        df, obs = observed(snap.rel[name] if kind == "rel" else snap.base[name])
        frames.append((df, tmp / kind / name))
        entry = {"epoch": epoch, "rows": rows, "base_rows": rows, "segments": []}
        new[key][name] = entry
        label = f"relation {name}" if kind == "rel" else f"base facts of {name}"
        written.append((entry, Stored(label, tmp / kind / name,
                                      arrow_stored_schema(program, name, kind,
                                                          set(data["counted"])),
                                      rows, None, None), obs))
    write_all(frames)
    state.read_back(spark, epoch, written)  # rows must be the manifest's: else nothing moves
    return new
