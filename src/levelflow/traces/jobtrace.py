"""Read, check and write `jobtrace/1` files (../shared/spec/jobtrace.md).

Reading goes in three steps, each all-or-nothing: bytes -> JSON object (gzip by magic bytes),
object -> checked parts on integer ids (types, ids, edges, initial), parts -> JobTrace (the
TaskGraph finds duplicate edges and cycles, then activations are checked against it).
Every problem is a TraceError whose str() is one line naming the file, the field and the id
(trace_values.py; the `nodes` field is checked in jobtrace_nodes.py).
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, islice, repeat
from operator import itemgetter
from pathlib import Path

from levelflow.gcpause import paused_gc
from levelflow.tasks.graph import GraphError, TaskGraph
from levelflow.traces.jobtrace_nodes import check_nodes
from levelflow.traces.jobtrace_nodes import utf8_bytes as utf8_bytes
from levelflow.traces.model import JobTrace
from levelflow.traces.trace_values import FORMAT as FORMAT
from levelflow.traces.trace_values import KINDS as KINDS
from levelflow.traces.trace_values import (
    MISSING,
    NODE_FIELDS,
    TraceError,
    json_type,
    quote,
)

_GZIP_MAGIC = b"\x1f\x8b"


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
    fmt = obj.get("format", MISSING)
    if fmt is MISSING:
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
    names, durations, index, work, span, extra = check_nodes(obj["nodes"], source)
    pairs = _check_edges(obj["edges"], index, source)
    initial = _check_initial(obj["initial"], index, source)
    acts = obj.get("activations", MISSING)
    if acts is MISSING:
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
            node.update((k, v) for k, v in more.items() if k not in NODE_FIELDS)
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
