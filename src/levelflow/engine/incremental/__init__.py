"""Incremental maintenance: keep a program's results up to date as input facts change, in epochs.

session.py (the Python API), epoch.py (one epoch: the driver's workers, the elastic switch),
program_change.py (a new program as an epoch), updates.py (validated update input), versions.py
(what a task's update reads and produces). strategies/: how a task is maintained (counting,
delete-and-rederive, recompute and diff). backends/: where it runs (the driver, Spark, the Python
workers holding a task's state). state/: the state on disk.
"""

from levelflow.engine.incremental.results import Delta, EpochError, EpochResult
from levelflow.engine.incremental.session import IncrementalSession
from levelflow.engine.incremental.state.directory import StateDir, StateError
from levelflow.engine.incremental.state.snapshot import Snapshot
from levelflow.engine.incremental.updates import Op, UpdateError, read_updates

__all__ = ["Delta", "EpochError", "EpochResult", "IncrementalSession", "Op", "Snapshot",
           "StateDir", "StateError", "UpdateError", "read_updates"]
