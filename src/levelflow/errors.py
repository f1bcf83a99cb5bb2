"""User-facing errors: each is printed as one line and exits non-zero, never a traceback."""

import re

# A name or value longer than this is cut in messages (a 1 MB identifier made a 1 MB line).
LONGEST_WORD = 200
LONGEST_MESSAGE = 2000
_LONG = re.compile(rf"[^\s'\"]{{{LONGEST_WORD + 1},}}")


def brief(message: str) -> str:
    """Return the message with very long words, and the message itself, cut to a readable size."""
    message = _LONG.sub(lambda m: f"{m[0][:80]}...[{len(m[0])} chars]...{m[0][-20:]}", message)
    if len(message) > LONGEST_MESSAGE:
        message = f"{message[:1500]}...[{len(message)} chars]...{message[-300:]}"
    return message


class LevelflowError(Exception):
    """An error the user caused (bad program, trace, fact file or flag); str() is the one line."""

    exit_code = 1

    def __init__(self, *args) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (brief(args[0]),)
        super().__init__(*args)


class InputError(LevelflowError):
    """A DataFrame, Parquet file, table or database does not fit its relation; str() names
    both (engine/spark_io.py, engine/sqlite_io.py)."""


class UsageError(LevelflowError):
    """A command line that is wrong in itself: a malformed or out-of-range flag value, or flags
    that do not combine. Exit 2, as typer's own usage errors; errors in what the flags name
    (a program, a fact file, a state) exit 1."""

    exit_code = 2
