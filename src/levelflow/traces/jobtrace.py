"""Read, check and write `jobtrace/1` files (../shared/spec/jobtrace.md).

Reading goes in three steps, each all-or-nothing: bytes -> JSON object (gzip by magic bytes),
object -> checked parts on integer ids (types, ids, edges, initial), parts -> JobTrace (the
TaskGraph finds duplicate edges and cycles, then activations are checked against it).
Every problem is a TraceError whose str() is one line naming the file, the field and the id.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, islice, repeat
from operator import itemgetter
from pathlib import Path

from levelflow.errors import LevelflowError
from levelflow.gcpause import paused_gc
from levelflow.tasks.graph import GraphError, TaskGraph
from levelflow.traces.model import JobTrace

FORMAT = "jobtrace/1"
KINDS = ("task", "predicate")
_GZIP_MAGIC = b"\x1f\x8b"
_NODE_FIELDS = frozenset(("id", "duration", "work", "span"))
_INF = math.inf
_MISSING = object()


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


# ---------------------------------------------------------------- bytes -> JSON object

def _read_bytes(path: str | os.PathLike) -> bytes:
    """Return the raw bytes of a trace file, or raise a TraceError naming it."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, not a trace file") from None
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None


def parse_json_bytes(data: bytes | str, source: str, gz_name: bool = False) -> object:
    """Return the JSON value in `data`, gunzipping it first if it starts with the gzip magic."""
    if isinstance(data, bytes) and data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(f"{source}: not a valid gzip file: {e}") from None
        gz_name = False
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        hint = " (and not gzip-compressed)" if gz_name else ""
        raise TraceError(f"{source}: line {e.lineno}: not JSON{hint}: {e.msg} "
                         f"(column {e.colno})") from None
    except UnicodeDecodeError as e:
        hint = "not gzip-compressed and " if gz_name else ""
        raise TraceError(f"{source}: {hint}not UTF-8 JSON text: {e.reason} at byte {e.start}") \
            from None
    except RecursionError:
        raise TraceError(f"{source}: not JSON this reader accepts: nested too deeply") from None
    except ValueError as e:  # e.g. an integer of more digits than Python converts
        raise TraceError(f"{source}: not JSON this reader accepts: {e}") from None


def read_json(path: str | os.PathLike) -> object:
    """Return the JSON value stored in a `.json` or gzip-compressed file."""
    return parse_json_bytes(_read_bytes(path), str(path), gz_name=str(path).endswith(".gz"))


# ---------------------------------------------------------------- JSON object -> parts

@dataclass(slots=True)
class TraceParts:
    """A checked trace before its graph is built: everything on integer ids."""

    names: list[str]
    durations: list[float]
    pairs: list[tuple[int, int]]
    initial: tuple[int, ...]
    raw_activations: dict | None
    index: dict[str, int]
    name: str
    processors: int | None
    work: dict[int, float]
    span: dict[int, float]
    extra: dict[int, dict]


def _number(value: object, where: str, what: str) -> float:
    """Return `value` as a finite float >= 0, or raise a TraceError saying what is wrong."""
    t = type(value)
    if t is float or t is int:
        try:
            v = float(value)
        except OverflowError:  # an integer beyond any double
            raise TraceError(f"{where}: {what} is not finite (an integer of "
                             f"{len(str(abs(value)))} digits)") from None
        if 0.0 <= v < _INF:
            return v
        if v != v:
            raise TraceError(f"{where}: {what} is not a number")
        if v < 0:
            raise TraceError(f"{where}: negative {what} {value!r}")
        raise TraceError(f"{where}: {what} {value!r} is not finite")
    if value is _MISSING:
        raise TraceError(f"{where}: missing {what}")
    raise TraceError(f"{where}: {what} must be a number, got {json_type(value)} {quote(value)}")


def _node_fields(i: int, node: dict, nid: str, work: dict, span: dict, extra: dict,
                 source: str) -> None:
    """Record a node's optional keys (work, span, kind, anything else) for node i."""
    where = f"{source}: nodes[{i}] ({quote(nid)})"
    kept = {}
    for key, value in node.items():
        if key == "work":
            work[i] = _number(value, where, "work")
        elif key == "span":
            span[i] = _number(value, where, "span")
        elif key not in _NODE_FIELDS:
            if key == "kind" and value not in KINDS:
                raise TraceError(f"{where}: kind must be \"task\" or \"predicate\", got "
                                 f"{quote(value)}")
            kept[key] = value
    if kept:
        extra[i] = kept


def _is_text(value: str) -> bool:
    """Return whether a string is Unicode text: JSON lets `\\ud800` escapes make one that isn't."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf8_bytes(text: str, shown: str, error: type[Exception]) -> bytes:
    """Return text as UTF-8, or raise `error` naming the file: nothing is written then."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise error(f"{shown}: cannot write: {ascii(e.object[e.start:e.end])} is not "
                    f"Unicode text") from None


def _nodes_in_bulk(raw: list) -> tuple[list[str], list[float]] | None:
    """Return ids and durations if every node is well formed, checked in bulk; else None."""
    # C-level map/set passes: several times faster than one Python loop over the nodes.
    if not set(map(type, raw)) <= {dict}:
        return None
    try:
        names = list(map(itemgetter("id"), raw))
        durations = list(map(itemgetter("duration"), raw))
    except KeyError:
        return None
    if not set(map(type, names)) <= {str} or "" in names:
        return None
    types = set(map(type, durations))
    if not types <= {float, int}:
        return None
    if int in types:
        try:
            durations = [float(d) for d in durations]
        except OverflowError:
            return None  # checked one by one to name the node
    if not _is_text("".join(names)):
        return None  # a lone surrogate (`"\ud800"`): named one by one
    if durations:
        total = sum(durations)
        if total != total or max(durations) == _INF or min(durations) < 0.0:
            return None
    return names, durations


def _nodes_one_by_one(raw: list, source: str) -> tuple[list[str], list[float]]:
    """Return ids and durations, checking node by node to name the first bad one."""
    names: list[str] = []
    durations: list[float] = []
    for i, node in enumerate(raw):
        if type(node) is not dict:
            raise TraceError(f"{source}: nodes[{i}]: expected an object with \"id\" and "
                             f"\"duration\", got {json_type(node)} {quote(node)}")
        nid = node.get("id", _MISSING)
        if type(nid) is not str or not nid:
            if nid is _MISSING:
                raise TraceError(f"{source}: nodes[{i}]: missing \"id\"")
            raise TraceError(f"{source}: nodes[{i}]: id must be a non-empty string, got "
                             f"{quote(nid)}")
        if not _is_text(nid):
            raise TraceError(f"{source}: nodes[{i}]: id {ascii(nid)} is not Unicode text "
                             f"(a lone surrogate escape)")
        names.append(nid)
        durations.append(_number(node.get("duration", _MISSING),
                                 f"{source}: nodes[{i}] ({quote(nid)})", "duration"))
    return names, durations


def _check_total(durations: list[float], work: dict[int, float], span: dict[int, float],
                 source: str) -> None:
    """Refuse finite times whose sum is not: every makespan and bound is at most that sum.

    Two chained 1e308 durations made `simulate --json` print Infinity (not JSON).
    """
    total = sum(durations) + sum(work.values()) + sum(span.values())  # fsum would raise
    if not math.isfinite(total):
        raise TraceError(f"{source}: durations overflow: the nodes' durations, work and span "
                         f"sum beyond the largest float ({sys.float_info.max:.3g}), so no "
                         f"makespan could be computed")


def _check_nodes(raw: object, source: str):
    """Return names, durations, the id->int index, work, span and extra of the `nodes` field."""
    if type(raw) is not list:
        raise TraceError(f"{source}: nodes: expected an array of node objects, got "
                         f"{json_type(raw)}")
    names, durations = _nodes_in_bulk(raw) or _nodes_one_by_one(raw, source)
    work: dict[int, float] = {}
    span: dict[int, float] = {}
    extra: dict[int, dict] = {}
    for i in [i for i, k in enumerate(map(len, raw)) if k > 2]:
        _node_fields(i, raw[i], names[i], work, span, extra, source)
    _check_total(durations, work, span, source)
    index = {nid: i for i, nid in enumerate(names)}
    if len(index) != len(names):
        first: dict[str, int] = {}
        for i, nid in enumerate(names):
            if nid in first:
                raise TraceError(f"{source}: nodes: duplicate id {quote(nid)} "
                                 f"(nodes[{first[nid]}] and nodes[{i}])")
            first[nid] = i
    return names, durations, index, work, span, extra


def _edge_problem(raw: list, index: dict[str, int], source: str) -> TraceError:
    """Return the error for the first edge that is not a pair of known node ids."""
    for i, edge in enumerate(raw):
        if type(edge) is not list or len(edge) != 2:
            return TraceError(f"{source}: edges[{i}]: expected a pair [u, v] of node ids, got "
                              f"{quote(edge)}")
        for end in edge:
            if type(end) is not str:
                return TraceError(f"{source}: edges[{i}]: node ids must be strings, got "
                                  f"{quote(end)} in edge {quote(edge)}")
            if end not in index:
                return TraceError(f"{source}: edges: unknown node {quote(end)} in edge "
                                  f"{quote(edge)}")
    return TraceError(f"{source}: edges: malformed")  # unreachable: the fast path failed


def _check_edges(raw: object, index: dict[str, int], source: str) -> list[tuple[int, int]]:
    """Return the `edges` field as integer pairs, checking each names two known nodes."""
    if type(raw) is not list:
        raise TraceError(f"{source}: edges: expected an array of [u, v] pairs, got "
                         f"{json_type(raw)}")
    # Unpacking a 2-character string would pass as a pair, so the shape is checked first.
    if set(map(type, raw)) <= {list} and set(map(len, raw)) <= {2}:
        get = index.__getitem__
        try:
            return list(zip(map(get, map(itemgetter(0), raw)), map(get, map(itemgetter(1), raw)),
                            strict=True))
        except (KeyError, TypeError):
            pass
    raise _edge_problem(raw, index, source)


def _check_initial(raw: object, index: dict[str, int], source: str) -> tuple[int, ...]:
    """Return the `initial` field as a tuple of ids, in the file's order."""
    if type(raw) is not list:
        raise TraceError(f"{source}: initial: expected an array of node ids, got "
                         f"{json_type(raw)}")
    out: list[int] = []
    for x in raw:
        if type(x) is not str:
            raise TraceError(f"{source}: initial: node ids must be strings, got {quote(x)}")
        v = index.get(x)
        if v is None:
            raise TraceError(f"{source}: initial: unknown node {quote(x)}")
        out.append(v)
    if len(set(out)) != len(out):
        seen: set[int] = set()
        for v in out:
            if v in seen:
                raise TraceError(f"{source}: initial: duplicate id {quote(raw[out.index(v)])}")
            seen.add(v)
    return tuple(out)


def check_obj(obj: object, source: str) -> TraceParts:
    """Return the checked parts of a decoded jobtrace/1 object (all but graph-level checks)."""
    if type(obj) is not dict:
        raise TraceError(f"{source}: expected a JSON object at the top level, got "
                         f"{json_type(obj)}")
    fmt = obj.get("format", _MISSING)
    if fmt is _MISSING:
        raise TraceError(f"{source}: format: missing (expected {quote(FORMAT)})")
    if fmt != FORMAT:
        raise TraceError(f"{source}: format: expected {quote(FORMAT)}, got {quote(fmt)}")
    for key in ("nodes", "edges", "initial"):
        if key not in obj:
            raise TraceError(f"{source}: {key}: missing (a jobtrace/1 file needs format, "
                             f"nodes, edges and initial)")
    name = obj.get("name", "")
    if type(name) is not str:
        raise TraceError(f"{source}: name: expected a string, got {json_type(name)}")
    processors = obj.get("processors")
    if "processors" in obj and (type(processors) is not int or processors < 1):
        raise TraceError(f"{source}: processors: expected a positive integer, got "
                         f"{quote(processors)}")
    names, durations, index, work, span, extra = _check_nodes(obj["nodes"], source)
    pairs = _check_edges(obj["edges"], index, source)
    initial = _check_initial(obj["initial"], index, source)
    acts = obj.get("activations", _MISSING)
    if acts is _MISSING:
        acts = None
    elif type(acts) is not dict:
        raise TraceError(f"{source}: activations: expected an object mapping a node id to the "
                         f"children it activates, got {json_type(acts)}")
    return TraceParts(names, durations, pairs, initial, acts, index, name, processors,
                      work, span, extra)


# ---------------------------------------------------------------- parts -> JobTrace

def _activations_in_bulk(raw: dict, index: dict[str, int],
                         pairs: list[tuple[int, int]]) -> dict[int, tuple[int, ...]] | None:
    """Return the activations on ids if all are well formed, checked in bulk; else None."""
    lists = list(raw.values())
    if not set(map(type, lists)) <= {list}:
        return None
    us = list(map(index.get, raw))
    flat = list(chain.from_iterable(lists))
    if None in us or not set(map(type, flat)) <= {str}:
        return None
    vs = list(map(index.get, flat))
    if None in vs:
        return None
    lens = list(map(len, lists))
    acts = list(zip(chain.from_iterable(map(repeat, us, lens)), vs, strict=True))
    # Every (u, v) must be an edge of G, and none may repeat.
    if not set(pairs).issuperset(acts) or len(set(acts)) != len(acts):
        return None
    it = iter(vs)
    return dict(zip(us, [tuple(islice(it, k)) for k in lens], strict=True))


def _check_activations(raw: dict, index: dict[str, int], graph: TaskGraph,
                       source: str) -> dict[int, tuple[int, ...]]:
    """Return the `activations` field on ids, checking each activated node is a child in G."""
    out: dict[int, tuple[int, ...]] = {}
    children = graph.children
    for key, lst in raw.items():
        u = index.get(key)
        if u is None:
            raise TraceError(f"{source}: activations: unknown node {quote(key)}")
        if type(lst) is not list:
            raise TraceError(f"{source}: activations: {quote(key)}: expected an array of child "
                             f"ids, got {json_type(lst)}")
        kids = children[u]
        if len(kids) > 8:
            kids = set(kids)
        ids = []
        for c in lst:
            v = index.get(c) if type(c) is str else None
            if v is None:
                what = "unknown node" if type(c) is str else "a non-string id"
                raise TraceError(f"{source}: activations: {quote(key)} activates {what} {quote(c)}")
            if v not in kids:
                raise TraceError(f"{source}: activations: {quote(key)} activates {quote(c)}, "
                                 f"which is not its child")
            ids.append(v)
        if len(set(ids)) != len(ids):
            dup = next(c for i, c in enumerate(lst) if c in lst[:i])
            raise TraceError(f"{source}: activations: {quote(key)} lists {quote(dup)} twice")
        out[u] = tuple(ids)
    return out


def build_graph(names: Sequence[str], pairs: list[tuple[int, int]], source: str) -> TaskGraph:
    """Return the TaskGraph of checked edges; a duplicate edge or cycle is a TraceError."""
    try:
        return TaskGraph(names, pairs)
    except GraphError as e:
        if e.kind == "duplicate":
            u, v = e.nodes
            raise TraceError(f"{source}: edges: duplicate edge {quote([names[u], names[v]])}"
                             ) from None
        if e.kind == "cycle":
            raise TraceError(f"{source}: edges: cycle through {quote(names[e.nodes[0]])}"
                             ) from None
        raise TraceError(f"{source}: edges: {e}") from None


def assemble(parts: TraceParts, source: str) -> JobTrace:
    """Return the JobTrace of checked parts: builds G, then checks the activations against it."""
    graph = build_graph(parts.names, parts.pairs, source)
    acts = None
    if parts.raw_activations is not None:
        acts = _activations_in_bulk(parts.raw_activations, parts.index, parts.pairs)
        if acts is None:  # something is wrong: go one by one to name it
            acts = _check_activations(parts.raw_activations, parts.index, graph, source)
    return JobTrace(graph=graph, durations=parts.durations, initial=parts.initial,
                    activations=acts, name=parts.name, processors=parts.processors,
                    work=parts.work, span=parts.span, extra=parts.extra)


# ---------------------------------------------------------------- public API

def loads_trace(text_or_obj: str | bytes | dict, source: str = "<string>") -> JobTrace:
    """Return the JobTrace in a JSON string, (maybe gzipped) bytes or an already decoded object."""
    if isinstance(text_or_obj, str):
        obj = parse_json_bytes(text_or_obj, source)
    elif isinstance(text_or_obj, (bytes, bytearray)):
        obj = parse_json_bytes(bytes(text_or_obj), source)
    else:
        obj = text_or_obj
    with paused_gc():
        return assemble(check_obj(obj, source), source)


def load_trace(path: str | os.PathLike) -> JobTrace:
    """Return the JobTrace stored at `path` (`.json` or gzip-compressed, found by magic bytes)."""
    source = str(path)
    with paused_gc():
        return assemble(check_obj(read_json(path), source), source)


def trace_to_obj(trace: JobTrace) -> dict:
    """Return the jobtrace/1 JSON object of a trace (the inverse of `loads_trace`)."""
    g = trace.graph
    names = g.names
    obj: dict = {"format": FORMAT}
    if trace.name:
        obj["name"] = trace.name
    if trace.processors is not None:
        obj["processors"] = trace.processors
    nodes = []
    work, span, extra = trace.work, trace.span, trace.extra
    for i, (nid, d) in enumerate(zip(names, trace.durations, strict=True)):
        node = {"id": nid, "duration": float(d)}
        if i in work:
            node["work"] = float(work[i])
        if i in span:
            node["span"] = float(span[i])
        more = extra.get(i)
        if more:
            node.update((k, v) for k, v in more.items() if k not in _NODE_FIELDS)
        nodes.append(node)
    obj["nodes"] = nodes
    obj["edges"] = [[names[u], names[v]] for u, kids in enumerate(g.children) for v in kids]
    obj["initial"] = [names[v] for v in trace.initial]
    if trace.activations is not None:
        obj["activations"] = {names[u]: [names[c] for c in kids]
                              for u, kids in trace.activations.items()}
    return obj


def dump_trace(trace: JobTrace, path: str | os.PathLike) -> None:
    """Write a trace as jobtrace/1 JSON, gzip-compressed when the name ends in `.gz`."""
    shown = str(path)
    path = Path(path)
    data = json.dumps(trace_to_obj(trace), separators=(",", ":"), ensure_ascii=False)
    raw = utf8_bytes(data, shown, TraceError)  # a lone surrogate in a name or an extra key
    if path.name.endswith(".gz"):
        raw = gzip.compress(raw, compresslevel=6, mtime=0)
    try:
        if path.exists() and not path.is_file():  # /dev/stdout, a pipe: no rename possible
            path.write_bytes(raw)
            return
        # Write beside the target and rename, so a failed write never leaves half a trace.
        path = path.resolve()
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(raw)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as e:
        raise TraceError(f"{shown}: cannot write: {e.strerror or e}") from None
