"""Incremental maintenance: keep a program's results up to date as input facts change, in epochs.

state.py (snapshots, the on-disk epochs), updates.py (validated update input), versions.py (what
a task's update reads and produces), joins.py (rule bodies over versions), counting.py (one
non-recursive task), scratch.py (one task from scratch, diffed), dred.py (one recursive task:
delete and re-derive with ranks), maintain.py (one epoch: the driver's workers, elastic switch),
program_change.py (a new program as an epoch), session_api.py (the Python API).
"""

from levelflow.engine.incremental.epoch import Delta, EpochError, EpochResult
from levelflow.engine.incremental.session import IncrementalSession
from levelflow.engine.incremental.state.directory import Snapshot, StateDir, StateError
from levelflow.engine.incremental.updates import Op, UpdateError, read_updates

__all__ = ["Delta", "EpochError", "EpochResult", "IncrementalSession", "Op", "Snapshot",
           "StateDir", "StateError", "UpdateError", "read_updates"]
