"""User-facing errors: each is printed as one line and exits non-zero, never a traceback."""


class LevelflowError(Exception):
    """An error the user caused (bad program, trace, fact file or flag); str() is the one line."""

    exit_code = 1
