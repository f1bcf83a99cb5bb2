"""The C preprocessor Soufflé runs on a program first: includes, macros, conditionals.

Constant: the include search path. Changes: the macro table, the stack of conditionals, the
files being included. Each output line keeps the file and line it came from (`LineMap`), so
errors point at the original text; directive lines become blank lines, so a file's own lines
keep their numbers. `stored_text` renders the result with `#line N "file"` markers, which this
preprocessor reads back: preprocessing that text again gives the same lines at the same places
(an incremental state stores it and reloads without the included files).

Supported: `#include "f"` / `<f>` and `.include "f"` (relative to the including file, then each
-I directory), `#pragma once` / `.once`, `#define` with and without parameters (`#` and `##`
in bodies are refused), `#undef`, `#ifdef`, `#ifndef`, `#if`, `#elif`, `#else`, `#endif`,
`#error`, `#line`, `__LINE__`, `__FILE__`; `\\` line continuations.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from levelflow.tasks.ast import Loc
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.ppexpr import evaluate_condition

MAX_INCLUDE_DEPTH = 64
MAX_EXPANSIONS = 100_000  # macro expansions per line: a runaway definition stops here

# A program with none of these needs no preprocessing at all (the fast path).
_NEEDS = re.compile(r"^[ \t]*(?:#|\.include\b|\.once\b)|__LINE__|__FILE__|\\\r?\n", re.M)
_DIRECTIVE = re.compile(r"[ \t]*(?:#[ \t]*([A-Za-z_]*)|\.(include|once)\b)(.*)", re.S)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Strings and comments are copied as they are; identifiers may be macros.
_PIECES = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*|[A-Za-z_][A-Za-z0-9_]*')


@dataclass
class LineMap:
    """Per run of output lines: the first output line, its file and its line there."""

    starts: list[int] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)

    def add(self, out_line: int, file: str, line: int) -> None:
        """Record that output line `out_line` is `file`:`line` (and so on downwards)."""
        if self.starts and self.files[-1] == file and \
                self.lines[-1] + out_line - self.starts[-1] == line:
            return  # continues the current run
        if self.starts and self.starts[-1] == out_line:
            self.files[-1], self.lines[-1] = file, line
            return
        self.starts.append(out_line)
        self.files.append(file)
        self.lines.append(line)

    def where(self, out_line: int) -> tuple[str, int]:
        """Return (file, line) of 1-based output line `out_line`."""
        k = max(bisect_right(self.starts, out_line) - 1, 0)
        return self.files[k], self.lines[k] + out_line - self.starts[k]


@dataclass(frozen=True)
class Macro:
    """A `#define`: params None for an object-like macro."""

    body: str
    params: tuple[str, ...] | None


@dataclass
class Preprocessed:
    """The preprocessed program: its text for the lexer and where each line came from."""

    text: str
    map: LineMap

    def stored_text(self) -> str:
        """Return the text with `#line` markers: preprocessing it again gives this result."""
        lines = self.text.split("\n")
        out: list[str] = []
        bounds = self.map.starts[1:] + [len(lines) + 1]
        for k, start in enumerate(self.map.starts):
            quoted = self.map.files[k].replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'#line {self.map.lines[k]} "{quoted}"')
            out.extend(lines[start - 1:bounds[k] - 1])
        return "\n".join(out)


def needs_preprocessing(text: str) -> bool:
    """Return whether `text` has any directive, macro name or continuation to act on."""
    return _NEEDS.search(text) is not None


def preprocess(text: str, file: str, include_dirs: tuple[str, ...] = ()) -> Preprocessed:
    """Return `text` preprocessed; raise DatalogError at the original file and line."""
    pp = _Preprocessor(tuple(include_dirs))
    pp.run(text, file, 0)
    if pp.conds:
        raise DatalogError(f"#{pp.conds[-1][2]} without #endif", pp.conds[-1][3])
    return Preprocessed("\n".join(pp.out), pp.map)


class _Preprocessor:
    __slots__ = ("dirs", "macros", "conds", "out", "map", "once", "pattern")

    def __init__(self, include_dirs: tuple[str, ...]) -> None:
        self.dirs = include_dirs
        self.macros: dict[str, Macro] = {}
        # Per open conditional: (this branch is taken, a branch was taken, directive, where).
        self.conds: list[tuple[bool, bool, str, Loc]] = []
        self.out: list[str] = []
        self.map = LineMap()
        self.once: set[str] = set()
        self.pattern: re.Pattern | None = None

    def active(self) -> bool:
        return all(c[0] for c in self.conds)

    def run(self, text: str, file: str, depth: int) -> None:
        lines = text.split("\n")
        n, i, line_no = len(lines), 0, 1
        in_comment = False
        while i < n:
            first = line_no
            line = lines[i]
            i += 1
            line_no += 1
            while line.endswith("\\") and i < n:  # a continuation joins the next line
                line = line[:-1] + lines[i]
                i += 1
                line_no += 1
            loc = Loc(file, first, 1)
            m = None if in_comment else _DIRECTIVE.match(line)
            if m is not None and (m.group(1) is not None or m.group(2)):
                name = m.group(1) if m.group(1) is not None else "." + m.group(2)
                jump = self.directive(name, m.group(3).strip(), loc, file, depth)
                if jump is not None:  # #line: no line of its own; the next is (file, line)
                    file, line_no = jump
                else:
                    self.emit([""] * (line_no - first), file, first)
                continue
            if not self.active():
                self.emit([""] * (line_no - first), file, first)
                continue
            expanded, in_comment = self.expand_line(line, loc, in_comment)
            self.emit([expanded] + [""] * (line_no - first - 1), file, first)

    def emit(self, lines: list[str], file: str, line: int) -> None:
        self.map.add(len(self.out) + 1, file, line)
        self.out.extend(lines)

    # -- directives ------------------------------------------------------------------------
    def directive(self, name: str, rest: str, loc: Loc, file: str, depth: int):
        if name in ("ifdef", "ifndef", "if", "elif", "else", "endif"):
            self.conditional(name, rest, loc)
            return None
        if not self.active():
            return None
        if name in ("include", ".include"):
            self.include(rest, loc, file, depth)
        elif name == "define":
            self.define(rest, loc)
        elif name == "undef":
            self.macros.pop(rest.split()[0] if rest.split() else "", None)
            self.pattern = None
        elif name in ("pragma", ".once"):
            if name == ".once" or rest.split()[:1] == ["once"]:
                self.once.add(os.path.realpath(file))
            # other #pragma lines are for C compilers: ignored, as cpp passes them on
        elif name == "error":
            raise DatalogError(f"#error {rest}", loc)
        elif name == "warning" or name == "":
            pass  # `#` alone is a null directive
        elif name == "line":
            return self.line_directive(rest, loc, file)
        else:
            raise DatalogError(f"unknown preprocessor directive '#{name}'", loc)
        return None

    def line_directive(self, rest: str, loc: Loc, file: str) -> tuple[str, int]:
        m = re.fullmatch(r'(\d+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*', rest)
        if m is None:
            raise DatalogError("#line takes a line number and an optional \"file\"", loc)
        name = re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None else file
        return name, int(m.group(1))

    def conditional(self, name: str, rest: str, loc: Loc) -> None:
        outer = all(c[0] for c in self.conds)
        if name in ("ifdef", "ifndef", "if"):
            if not outer:
                self.conds.append((False, True, name, loc))  # skipped whole: no branch runs
                return
            if name == "if":
                taken = self.condition(rest, loc)
            else:
                words = rest.split()
                if not words or not _IDENT.fullmatch(words[0]):
                    raise DatalogError(f"#{name} takes a macro name", loc)
                taken = (words[0] in self.macros) == (name == "ifdef")
            self.conds.append((taken, taken, name, loc))
            return
        if not self.conds:
            raise DatalogError(f"#{name} without #if", loc)
        _, done, opened, where = self.conds.pop()
        if name == "endif":
            return
        if opened == "else":
            raise DatalogError(f"#{name} after #else", loc)
        outer = all(c[0] for c in self.conds)
        taken = (not done and outer and (name == "else" or self.condition(rest, loc)))
        self.conds.append((taken, done or taken, "else" if name == "else" else opened, where))

    def condition(self, rest: str, loc: Loc) -> bool:
        # `defined X` is decided before macros expand, as in C.
        rest = re.sub(r"\bdefined\s*(?:\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))",
                      lambda m: "1" if (m.group(1) or m.group(2)) in self.macros else "0", rest)
        expanded, _ = self.expand_line(rest, loc, False)
        return evaluate_condition(expanded, loc)

    def define(self, rest: str, loc: Loc) -> None:
        m = re.match(r"([A-Za-z_]\w*)(\(([^)]*)\))?\s*(.*)", rest, re.S)
        if m is None:
            raise DatalogError("#define takes a macro name", loc)
        params = None
        if m.group(2) is not None:
            params = tuple(p.strip() for p in m.group(3).split(",")) if m.group(3).strip() else ()
            if any(not _IDENT.fullmatch(p) for p in params):
                raise DatalogError(f"#define {m.group(1)}: parameters must be names", loc)
        body = m.group(4).strip()
        if "#" in re.sub(r'"(?:[^"\\]|\\.)*"', "", body):
            raise DatalogError(f"#define {m.group(1)}: '#' and '##' in a macro body are not "
                               "supported", loc)
        self.macros[m.group(1)] = Macro(body, params)
        self.pattern = None

    def include(self, rest: str, loc: Loc, file: str, depth: int) -> None:
        m = re.fullmatch(r'"([^"]+)"|<([^>]+)>', rest)
        if m is None:
            raise DatalogError('#include takes "file" or <file>', loc)
        name = m.group(1) or m.group(2)
        if depth >= MAX_INCLUDE_DEPTH:
            raise DatalogError(f"includes nest deeper than {MAX_INCLUDE_DEPTH} (does '{name}' "
                               "include itself?)", loc)
        here = os.path.dirname(file)
        for base in (here, *self.dirs):
            path = Path(base, name)
            if path.is_file():
                break
        else:
            searched = ", ".join([here or "."] + list(self.dirs))
            raise DatalogError(f"cannot find included file '{name}' (searched {searched})", loc)
        if os.path.realpath(path) in self.once:
            return
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise DatalogError(f"cannot read included file '{name}': {e}", loc) from None
        self.run(text, os.path.normpath(path) if here else str(path), depth + 1)

    # -- macro expansion -------------------------------------------------------------------
    def expand_line(self, line: str, loc: Loc, in_comment: bool) -> tuple[str, bool]:
        """Return the line with macros expanded, and whether a block comment stays open."""
        if in_comment:
            end = line.find("*/")
            if end < 0:
                return line, True
            head, line = line[:end + 2], line[end + 2:]
        else:
            head = ""
        if self.pattern is None:  # any macro name, the special names or a comment opening
            names = sorted(self.macros, key=len, reverse=True) + ["__LINE__", "__FILE__"]
            self.pattern = re.compile(r"/\*|\b(?:" + "|".join(map(re.escape, names)) + r")\b")
        if self.pattern.search(line) is None:
            return head + line, False
        out: list[str] = []
        pos, budget = 0, [MAX_EXPANSIONS]
        while True:
            m = _PIECES.search(line, pos)
            if m is None:
                out.append(line[pos:])
                return head + "".join(out), False
            out.append(line[pos:m.start()])
            word = m.group()
            if word == "/*":
                end = line.find("*/", m.end())
                if end < 0:
                    out.append(line[m.start():])
                    return head + "".join(out), True
                out.append(line[m.start():end + 2])
                pos = end + 2
                continue
            if word[0] in '"/' or (word not in self.macros and not word.startswith("__")):
                out.append(word)
                pos = m.end()
                continue
            text, pos = self.replace(word, line, m.end(), loc, frozenset(), budget)
            out.append(text)

    def replace(self, word: str, line: str, pos: int, loc: Loc, hidden: frozenset,
                budget: list[int]) -> tuple[str, int]:
        """Return the expansion of `word` found before `pos` in `line`, and where it ends."""
        if word == "__LINE__" and word not in self.macros:
            return str(loc.line), pos
        if word == "__FILE__" and word not in self.macros:
            return '"' + loc.file.replace("\\", "\\\\").replace('"', '\\"') + '"', pos
        macro = self.macros.get(word)
        if macro is None or word in hidden:
            return word, pos
        budget[0] -= 1
        if budget[0] < 0:
            raise DatalogError(f"macro '{word}' expands without end", loc)
        body = macro.body
        if macro.params is not None:
            args, end = _call_args(line, pos)
            if args is None:
                return word, pos  # a function-like macro's name without '(' is left alone
            if len(args) != len(macro.params) and not (macro.params == () and args == [""]):
                raise DatalogError(f"macro '{word}' takes {len(macro.params)} argument"
                                   f"{'s' if len(macro.params) != 1 else ''}, given "
                                   f"{len(args)}", loc)
            values = {p: self.rescan(a.strip(), loc, hidden, budget)
                      for p, a in zip(macro.params, args, strict=False)}
            body = _IDENT.sub(lambda m: values.get(m.group(), m.group()), body)
            pos = end
        return self.rescan(body, loc, hidden | {word}, budget), pos

    def rescan(self, text: str, loc: Loc, hidden: frozenset, budget: list[int]) -> str:
        out: list[str] = []
        pos = 0
        while True:
            m = _PIECES.search(text, pos)
            if m is None:
                out.append(text[pos:])
                return "".join(out)
            out.append(text[pos:m.start()])
            word = m.group()
            if word[0] in '"/' or word not in self.macros and not word.startswith("__"):
                out.append(word)
                pos = m.end()
                continue
            piece, pos = self.replace(word, text, m.end(), loc, hidden, budget)
            out.append(piece)


def _call_args(line: str, pos: int) -> tuple[list[str] | None, int]:
    """Return the arguments of a macro call whose '(' follows `pos`, and the end of the call."""
    j = pos
    while j < len(line) and line[j] in " \t":
        j += 1
    if j >= len(line) or line[j] != "(":
        return None, pos
    depth, args, start, k = 0, [], j + 1, j
    while k < len(line):
        c = line[k]
        if c == '"':
            m = re.compile(r'"(?:[^"\\\n]|\\.)*"').match(line, k)
            k = m.end() if m else k + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append(line[start:k])
                return args, k + 1
        elif c == "," and depth == 1:
            args.append(line[start:k])
            start = k + 1
        k += 1
    return None, pos  # unbalanced: left as it is, the parser will say where
