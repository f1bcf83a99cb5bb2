"""What every part of reading and writing a job trace shares: the format's name, the node
fields it defines, its one-line errors and how they show a JSON value."""

from __future__ import annotations

import json

from levelflow.errors import LevelflowError

FORMAT = "jobtrace/1"
KINDS = ("task", "predicate")
NODE_FIELDS = frozenset(("id", "duration", "work", "span"))
MISSING = object()  # a field a trace object does not have


class TraceError(LevelflowError):
    """A job trace that cannot be read or breaks the jobtrace/1 contract (one line)."""


def quote(value: object) -> str:
    """Return a short JSON rendering of a value for an error message."""
    text = json.dumps(value, default=repr, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def json_type(value: object) -> str:
    """Return the JSON name of a value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
