"""The C preprocessor Soufflé runs on a program first: includes, macros, conditionals.

Constant: the include search path. Changes: the macro table, the stack of conditionals, the
files being included. Each output line keeps the file and line it came from (`LineMap`), so
errors point at the original text; directive lines become blank lines, so a file's own lines
keep their numbers. `stored_text` renders the result with `#line N "file"` markers, which this
preprocessor reads back: preprocessing that text again gives the same lines at the same places
(an incremental state stores it and reloads without the included files).

Supported: `#include "f"` / `<f>` and `.include "f"` (relative to the including file, then each
-I directory; a confined program (`Confined`: serve, `--confine`) reads only files inside the
folders it names, looked up there too, and a file outside is refused by its name, never
read), `#pragma once` / `.once`, `#define` with and without parameters (`#` and `##` in
bodies are refused), `#undef`, `#ifdef`, `#ifndef`, `#if`, `#elif`, `#else`, `#endif`,
`#error`, `#line`, `__LINE__`, `__FILE__`; `\\` line continuations. Bounded: the text macro
expansion makes (MAX_GROWTH), how deep macro calls nest, include depth.
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
MAX_MACRO_NESTING = 100  # a macro call inside a macro's argument or body, inside another ...
# What expansion may make, in characters: every macro's text as substituted and as expanded,
# counted at each level (so a nested expansion counts once per level), is bounded by the text
# read (the program and its includes) times MAX_GROWTH, and at least MIN_ROOM. A macro
# whose parameter repeats (`#define D(x) x x x x`) makes text exponential in the nesting of
# its calls: one 12 KB program so grew to 1 GB. A macro-built program of ordinary shape
# (one call a line, bodies of a few rules) counts 2 to 10 times its text.
MAX_GROWTH = 32
MIN_ROOM = 1 << 20

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
class Confined:
    """The folders a confined program may include from, and how a refusal says why."""

    folders: tuple[str, ...]
    why: str = "--confine"

    def holds(self, path: str) -> bool:
        """Return whether the resolved `path` lies inside one of the folders."""
        return any(path.startswith(os.path.join(os.path.realpath(f), "")) for f in self.folders)

    def refusal(self, name: str) -> str:
        """Return the one line refusing `#include "name"` (it names the file, never its text)."""
        where = ", ".join(os.path.realpath(f) for f in self.folders) or "none"
        return (f"#include \"{name}\": no such file inside the folders a program may include "
                f"from ({where}) ({self.why})")


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


def preprocess(text: str, file: str, include_dirs: tuple[str, ...] = (),
               confined: Confined | None = None) -> Preprocessed:
    """Return `text` preprocessed; raise DatalogError at the original file and line.

    `confined`: read only included files inside its folders (None: any file, as Soufflé)."""
    pp = _Preprocessor(tuple(include_dirs), confined)
    pp.run(text, file, 0)
    if pp.conds:
        raise DatalogError(f"#{pp.conds[-1][2]} without #endif", pp.conds[-1][3])
    return Preprocessed("\n".join(pp.out), pp.map)


class _Preprocessor:
    __slots__ = ("dirs", "confined", "macros", "conds", "out", "map", "once", "pattern",
                 "read", "made")

    def __init__(self, include_dirs: tuple[str, ...], confined: Confined | None) -> None:
        # A confined program looks in its folders too (a posted program has no folder of its
        # own); any place it looks outside them is passed over unread.
        self.dirs = include_dirs + (confined.folders if confined is not None else ())
        self.confined = confined
        self.macros: dict[str, Macro] = {}
        # Per open conditional: (this branch is taken, a branch was taken, directive, where).
        self.conds: list[tuple[bool, bool, str, Loc]] = []
        self.out: list[str] = []
        self.map = LineMap()
        self.once: set[str] = set()
        self.pattern: re.Pattern | None = None
        self.read = 0  # characters of program text read, included files too
        self.made = 0  # characters macro expansion made (counted as MAX_GROWTH says)

    def active(self) -> bool:
        return all(c[0] for c in self.conds)

    def run(self, text: str, file: str, depth: int) -> None:
        self.read += len(text)
        lines = text.split("\n")
        n, i, line_no = len(lines), 0, 1
        in_comment = False
        while i < n:
            first = line_no
            line = lines[i]
            i += 1
            line_no += 1
            if line.endswith("\\") and i < n:  # continuations join the next lines (once)
                parts = [line[:-1]]
                while i < n:
                    line = lines[i]
                    i += 1
                    line_no += 1
                    if not (line.endswith("\\") and i < n):
                        break
                    parts.append(line[:-1])
                line = "".join(parts) + line
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
        path = self._find(name, here)
        if path is None:
            if self.confined is not None:
                raise DatalogError(self.confined.refusal(name), loc)
            searched = ", ".join([here or "."] + list(self.dirs))
            raise DatalogError(f"cannot find included file '{name}' (searched {searched})", loc)
        if os.path.realpath(path) in self.once:
            return
        try:  # a confined file is read by its resolved path: no link is followed after the check
            text = Path(os.path.realpath(path) if self.confined else path).read_text(
                encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise DatalogError(f"cannot read included file '{name}': {e}", loc) from None
        self.run(text, os.path.normpath(path) if here else str(path), depth + 1)

    def _find(self, name: str, here: str) -> Path | None:
        """Return the file `name` names beside the includer or in an include folder (the first
        there is); a confined program's candidates outside its folders are not looked at."""
        for base in (here, *self.dirs):
            path = Path(base, name)
            try:
                if self.confined is not None and not self.confined.holds(os.path.realpath(path)):
                    continue
                if path.is_file():
                    return path
            except (OSError, ValueError):  # a NUL byte, a link loop: no file there
                continue
        return None

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
            text, pos = self.replace(word, line, m.end(), loc, frozenset(), budget, 0)
            out.append(text)

    def charge(self, size: int, word: str, loc: Loc) -> None:
        """Count `size` characters made expanding `word`; refuse past the bound."""
        self.made += size
        room = max(MIN_ROOM, MAX_GROWTH * self.read)
        if self.made > room:
            raise DatalogError(f"macro '{word}' expands past {room:,} characters (macros may "
                               f"make {MAX_GROWTH} times the program's {self.read:,}, at least "
                               f"{MIN_ROOM:,})", loc)

    def replace(self, word: str, line: str, pos: int, loc: Loc, hidden: frozenset,
                budget: list[int], depth: int) -> tuple[str, int]:
        """Return the expansion of `word` found before `pos` in `line`, and where it ends
        (`depth`: the macro calls it is inside)."""
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
        if depth >= MAX_MACRO_NESTING:
            raise DatalogError(f"macro calls nest deeper than {MAX_MACRO_NESTING} levels (at "
                               f"'{word}')", loc)
        body = macro.body
        if macro.params is not None:
            args, end = _call_args(line, pos)
            if args is None:
                return word, pos  # a function-like macro's name without '(' is left alone
            if len(args) != len(macro.params) and not (macro.params == () and args == [""]):
                raise DatalogError(f"macro '{word}' takes {len(macro.params)} argument"
                                   f"{'s' if len(macro.params) != 1 else ''}, given "
                                   f"{len(args)}", loc)
            values = {p: self.rescan(a.strip(), loc, hidden, budget, depth + 1)
                      for p, a in zip(macro.params, args, strict=False)}
            uses = [m.group() for m in _IDENT.finditer(body) if m.group() in values]
            self.charge(len(body) + sum(len(values[u]) - len(u) for u in uses), word, loc)
            body = _IDENT.sub(lambda m: values.get(m.group(), m.group()), body)
            pos = end
        out = self.rescan(body, loc, hidden | {word}, budget, depth + 1)
        self.charge(len(out), word, loc)
        return out, pos

    def rescan(self, text: str, loc: Loc, hidden: frozenset, budget: list[int],
               depth: int) -> str:
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
            piece, pos = self.replace(word, text, m.end(), loc, hidden, budget, depth)
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
