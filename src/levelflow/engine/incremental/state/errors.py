"""The one error type of the state on disk."""

from levelflow.errors import LevelflowError


class StateError(LevelflowError):
    """A state directory is missing, locked, corrupt or made by another program."""
