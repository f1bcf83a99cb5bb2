"""The `nodes` field of a jobtrace/1 object checked: ids, durations, work and span, and the
extra keys a node may carry; in bulk when all is well, one by one to name what is not."""

from __future__ import annotations

import math
import sys
from operator import itemgetter

from levelflow.traces.trace_values import KINDS, MISSING, NODE_FIELDS, TraceError, json_type, quote


def _number(value: object, where: str, what: str) -> float:
    """Return `value` as a finite float >= 0, or raise a TraceError saying what is wrong."""
    t = type(value)
    if t is float or t is int:
        try:
            v = float(value)
        except OverflowError:  # an integer beyond any double
            raise TraceError(f"{where}: {what} is not finite (an integer of "
                             f"{len(str(abs(value)))} digits)") from None
        if 0.0 <= v < math.inf:
            return v
        if v != v:
            raise TraceError(f"{where}: {what} is not a number")
        if v < 0:
            raise TraceError(f"{where}: negative {what} {value!r}")
        raise TraceError(f"{where}: {what} {value!r} is not finite")
    if value is MISSING:
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
        elif key not in NODE_FIELDS:
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
        if total != total or max(durations) == math.inf or min(durations) < 0.0:
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
        nid = node.get("id", MISSING)
        if type(nid) is not str or not nid:
            if nid is MISSING:
                raise TraceError(f"{source}: nodes[{i}]: missing \"id\"")
            raise TraceError(f"{source}: nodes[{i}]: id must be a non-empty string, got "
                             f"{quote(nid)}")
        if not _is_text(nid):
            raise TraceError(f"{source}: nodes[{i}]: id {ascii(nid)} is not Unicode text "
                             f"(a lone surrogate escape)")
        names.append(nid)
        durations.append(_number(node.get("duration", MISSING),
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


def check_nodes(raw: object, source: str):
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
