"""Incremental maintenance: keep a program's results up to date as input facts change, in epochs.

session.py (the Python API), epoch.py (one epoch: the driver's workers, the elastic switch),
program_change.py (a new program as an epoch), updates.py (validated update input), versions.py
(what a task's update reads and produces). strategies/: how a task is maintained (counting,
delete-and-rederive, recompute and diff). backends/: where it runs (the driver, Spark, the Python
workers holding a task's state). state/: the state on disk.

Names are resolved lazily, so importing a module of the package (`state check` reads
state/ only) does not import Spark.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Delta": "levelflow.engine.incremental.results",
    "EpochError": "levelflow.engine.incremental.results",
    "EpochResult": "levelflow.engine.incremental.results",
    "IncrementalSession": "levelflow.engine.incremental.session",
    "StateDir": "levelflow.engine.incremental.state.directory",
    "StateError": "levelflow.engine.incremental.state.errors",
    "Snapshot": "levelflow.engine.incremental.state.snapshot",
    "Op": "levelflow.engine.incremental.updates",
    "UpdateError": "levelflow.engine.incremental.updates",
    "read_updates": "levelflow.engine.incremental.updates",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """Return the exported name `name`, importing its module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'levelflow.engine.incremental' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
