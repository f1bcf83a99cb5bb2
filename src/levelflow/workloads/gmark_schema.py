"""gMark's XML schema format, read into plain records; a bad file is one line naming the element.

    <generator><graph><nodes>N</nodes></graph>
      <predicates><alias symbol="0">knows</alias> ...</predicates>
      <types><alias type="0">Person</alias> <fixed type="0">21</fixed> | <proportion ...>0.1<
      <schema><source type="0"><target type="0" symbol="0" multiplicity="*">
          <indistribution type="zipfian"><alpha>2.5</alpha></indistribution>
          <outdistribution type="uniform"><min>0</min><max>3</max></outdistribution>
      </target></source></schema>
    </generator>
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from xml.parsers import expat

from levelflow.errors import LevelflowError

DISTRIBUTIONS = {"uniform": ("min", "max"), "gaussian": ("mu", "sigma"), "zipfian": ("alpha",)}
MULTIPLICITIES = ("1", "?", "*", "+")
# Node counts and degree parameters are at most this: the generator holds per node and per edge
# int64 arrays in memory, so a schema asking for more is refused before anything is allocated.
MAX_NODES = 100_000_000
# A linear view costs at most this many tuples (derived, join matches, closure walks) per node
# (gmark.py's budget; here so that the CLI's help needs no polars, 0.5 s to import).
LINEAR_TUPLES_PER_NODE = 20
# Type and symbol ids are dense (gMark numbers them 0..size-1): a table per type is built.
MAX_IDS = 100_000


class SchemaError(LevelflowError):
    """A gMark schema file that cannot be read; str() is `file:line: error: <what>`."""


@dataclass(frozen=True, slots=True)
class Distribution:
    """A degree distribution: kind in DISTRIBUTIONS, its parameters by name."""

    kind: str
    params: dict[str, float]


@dataclass(frozen=True, slots=True)
class EdgeSpec:
    """Edges of one label from one node type to another, with their degree distributions."""

    source: int
    label: str
    target: int
    multiplicity: str
    out_dist: Distribution | None
    in_dist: Distribution | None


@dataclass(frozen=True, slots=True)
class Schema:
    """A gMark schema: node types (name, fixed count, proportion), labels, edge specs."""

    nodes: int
    types: tuple[tuple[str, int | None, float | None], ...]
    labels: tuple[str, ...]
    edges: tuple[EdgeSpec, ...]


class _Reader:
    """Parses with expat through ElementTree, remembering each element's line for errors."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lines: dict[int, int] = {}
        self.texts: dict[int, list[str]] = {}  # element -> its text's pieces, joined at its end
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise SchemaError(f"{path}: error: cannot read schema: {e.strerror or e}") from None
        self.root = self._parse(data)

    def _parse(self, data: bytes):
        """Return the root element, built with expat (whose line numbers ElementTree hides)."""
        parser = expat.ParserCreate()
        stack: list[ET.Element] = []
        done: list[ET.Element] = []

        def start(tag, attrs):
            el = ET.Element(tag, attrs)
            self.lines[id(el)] = parser.CurrentLineNumber
            (stack[-1].append(el) if stack else done.append(el))
            stack.append(el)

        def end(tag):
            el = stack.pop()
            if not len(el):  # leaf text only: the values this format holds
                el.text = "".join(self.texts.pop(id(el), ())) or None

        def text(data):
            if stack:  # pieces kept in a list: joining them by `+=` is quadratic
                self.texts.setdefault(id(stack[-1]), []).append(data)

        def entity(name, *_):
            # Refused as defusedxml does: nested entities expand exponentially ("billion laughs")
            raise SchemaError(f"{self.path}:{parser.CurrentLineNumber}: error: <!ENTITY {name}>: "
                              "entity declarations are not allowed in a schema")

        parser.StartElementHandler = start
        parser.EndElementHandler = end
        parser.CharacterDataHandler = text
        parser.EntityDeclHandler = entity
        try:
            parser.Parse(data, True)
        except expat.ExpatError as e:
            raise SchemaError(f"{self.path}:{e.lineno}:{e.offset + 1}: error: not well-formed "
                              f"XML ({expat.ErrorString(e.code)})") from None
        return done[0]

    def error(self, el, what: str) -> SchemaError:
        """Return the error located at element `el`."""
        return SchemaError(f"{self.path}:{self.lines.get(id(el), 0)}: error: <{el.tag}>: {what}")

    def number(self, el, kind=float, what: str | None = None, *, low: float = 0,
               high: float = MAX_NODES):
        """Return the element's text (or attribute `what`) as a number of `kind`, finite and
        within [low, high]."""
        text = (el.get(what) if what else el.text) or ""
        shown = f"attribute {what}={text!r}" if what else f"{text.strip()!r}"
        try:
            value = kind(text.strip())
        except ValueError:
            raise self.error(el, f"{shown} is not a{'n integer' if kind is int else ' number'}"
                             ) from None
        if not math.isfinite(value) or not low <= value <= high:
            raise self.error(el, f"{shown} is out of range (expected {_num(low)} to "
                                 f"{_num(high)})")
        return value

    def child(self, el, tag: str):
        """Return the element's child `tag`, which must exist."""
        found = el.find(tag)
        if found is None:
            raise self.error(el, f"missing <{tag}>")
        return found


def _num(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


def _distribution(r: _Reader, el) -> Distribution | None:
    if el is None:
        return None
    kind = el.get("type")
    if kind not in DISTRIBUTIONS:
        raise r.error(el, f"type={kind!r} (expected one of {', '.join(DISTRIBUTIONS)})")
    params = {}
    for name in DISTRIBUTIONS[kind]:
        node = el.find(name)
        if node is not None:
            params[name] = r.number(node)
    if kind == "uniform" and "max" not in params:  # gMark: an empty uniform is 1..1
        params = {"min": params.get("min", 1.0), "max": max(params.get("min", 1.0), 1.0)}
    missing = [n for n in DISTRIBUTIONS[kind] if n not in params]
    if missing:
        raise r.error(el, f"missing <{missing[0]}>")
    if kind == "uniform" and params["min"] > params["max"]:
        raise r.error(el, f"<min> {params['min']:g} is above <max> {params['max']:g}")
    return Distribution(kind, params)


def _types(r: _Reader, root) -> tuple:
    types_el = r.child(root, "types")
    names: dict[int, str] = {}
    fixed: dict[int, int] = {}
    share: dict[int, float] = {}
    for el in types_el:
        if el.tag in ("alias", "fixed", "proportion"):
            t = r.number(el, int, "type", high=MAX_IDS - 1)
            if el.tag == "alias":
                names[t] = (el.text or "").strip()
            elif el.tag == "fixed":
                fixed[t] = r.number(el, int)
            else:
                share[t] = r.number(el, high=1)  # a share of the graph's nodes
    if not names:
        raise r.error(types_el, "no <alias type=...> names a node type")
    if sum(share.values()) > 1 + 1e-9:
        raise r.error(types_el, f"the <proportion>s add up to {sum(share.values()):g} (at most 1:"
                                " each is a share of the graph's nodes)")
    if sum(fixed.values()) > MAX_NODES:
        raise r.error(types_el, f"the <fixed> counts add up to {sum(fixed.values()):,} nodes "
                                f"(at most {MAX_NODES:,})")
    return tuple((names.get(t, f"type{t}"), fixed.get(t), share.get(t))
                 for t in range(max(names) + 1))


def _edges(r: _Reader, root, labels: dict[int, str], ntypes: int) -> tuple[EdgeSpec, ...]:
    out = []
    for src in r.child(root, "schema").iter("source"):
        s = r.number(src, int, "type", high=MAX_IDS - 1)
        for tgt in src.iter("target"):
            t = r.number(tgt, int, "type", high=MAX_IDS - 1)
            sym = r.number(tgt, int, "symbol", high=MAX_IDS - 1)
            mult = tgt.get("multiplicity", "*")
            for bad, what in ((s, "source type"), (t, "target type")):
                if not 0 <= bad < ntypes:
                    raise r.error(tgt if what[0] == "t" else src, f"{what} {bad} is not declared")
            if sym not in labels:
                raise r.error(tgt, f"symbol {sym} is not declared in <predicates>")
            if mult not in MULTIPLICITIES:
                raise r.error(tgt, f"multiplicity={mult!r} (expected one of 1 ? * +)")
            out.append(EdgeSpec(s, labels[sym], t, mult,
                                _distribution(r, tgt.find("outdistribution")),
                                _distribution(r, tgt.find("indistribution"))))
    return tuple(out)


def read_schema(path: str | os.PathLike[str]) -> Schema:
    """Return the schema in a gMark XML file; raise SchemaError naming file and line."""
    r = _Reader(os.fspath(path))
    root = r.root
    if root.tag != "generator":
        raise r.error(root, "the root element must be <generator>")
    nodes_el = root.find("graph/nodes")
    nodes = r.number(nodes_el, int, low=1) if nodes_el is not None else 1000
    labels = {r.number(el, int, "symbol", high=MAX_IDS - 1): (el.text or "").strip()
              for el in r.child(root, "predicates").iter("alias")}
    for sym, name in labels.items():
        if not name.isidentifier():
            raise SchemaError(f"{r.path}: error: predicate {sym} is named {name!r}, not a "
                              "Datalog identifier")
    types = _types(r, root)
    edges = _edges(r, root, labels, len(types))
    return Schema(nodes, types, tuple(labels[k] for k in sorted(labels)), edges)
