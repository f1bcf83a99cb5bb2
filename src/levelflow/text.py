"""User text (file names, trace names, task ids) made safe to show through rich and matplotlib."""

from __future__ import annotations


def printable(text: object) -> str:
    """Return str(text) with lone surrogates (undecodable file-name bytes) as \\udcxx escapes."""
    s = str(text)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # a terminal or PNG font cannot encode half a code point
        return s.encode("utf-8", "backslashreplace").decode("utf-8")
    return s


def for_rich(text: object) -> str:
    """Return text that rich prints as it is: `[/]` is not markup, lone surrogates escaped."""
    from rich.markup import escape

    return escape(printable(text))


def for_matplotlib(text: object) -> str:
    """Return text that matplotlib draws as it is: `$...$` is not mathtext."""
    return printable(text).replace("$", r"\$")
