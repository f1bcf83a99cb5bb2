"""The one error the Datalog front end raises: `file:line:col: error: <what>` on one line."""

from __future__ import annotations

from levelflow.errors import LevelflowError
from levelflow.tasks.ast import Loc


class DatalogError(LevelflowError):
    """A problem in a Datalog program; str() is `file:line:col: error: <what>` (one line)."""

    def __init__(self, what: str, loc: Loc | None = None, file: str | None = None) -> None:
        # Newlines in the message would break the one-line promise (e.g. from a quoted token).
        what = what.replace("\n", "\\n").replace("\r", "\\r")
        self.what = what
        self.loc = loc
        where = str(loc) if loc is not None else (file or "<input>")
        super().__init__(f"{where}: error: {what}")
