"""Convert WfCommons workflow instances (wfformat) into job traces.

Three layouts are read, found by shape rather than by `schemaVersion`:
  0.x      workflow.jobs[]  {name, runtime, parents: [names]}
  1.0-1.4  workflow.tasks[] {name, id, runtimeInSeconds | runtime, parents, children: [names]}
  1.5      workflow.specification.tasks[] {id, name, parents, children: [ids]}
           + workflow.execution.tasks[] {id, runtimeInSeconds}
Parents and children lists are unioned and deduplicated; a missing runtime is 0 seconds.
By default every source is initial and every task activates all its children.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from levelflow.traces.jobtrace import (
    TraceError,
    build_graph,
    json_type,
    quote,
    read_json,
)
from levelflow.traces.model import JobTrace


def _runtime(task: dict, keys: Sequence[str], where: str) -> float:
    """Return a task's runtime in seconds from the first key present (0 when none is)."""
    for key in keys:
        value = task.get(key)
        if value is None:
            continue
        if type(value) not in (int, float) or value != value or value == math.inf:
            raise TraceError(f"{where}: {key} must be a finite number, got {quote(value)}")
        if value < 0:
            raise TraceError(f"{where}: negative {key} {value!r}")
        try:
            return float(value)
        except OverflowError:  # an integer beyond any double
            raise TraceError(f"{where}: {key} must be a finite number, got an integer of "
                             f"{len(str(value))} digits") from None
    return 0.0


def _tasks_list(container: dict, key: str, path: str, source: str) -> list:
    """Return container[key] as a list of objects, or raise naming the field."""
    tasks = container.get(key)
    if type(tasks) is not list:
        raise TraceError(f"{source}: {path}: expected an array of task objects, got "
                         f"{json_type(tasks)}")
    for i, t in enumerate(tasks):
        if type(t) is not dict:
            raise TraceError(f"{source}: {path}[{i}]: expected a task object, got "
                             f"{json_type(t)}")
    return tasks


def _refs(task: dict, key: str, where: str) -> list:
    """Return a task's `parents` or `children` list (empty when absent)."""
    refs = task.get(key)
    if refs is None:
        return []
    if type(refs) is not list or any(type(r) is not str for r in refs):
        raise TraceError(f"{where}: {key} must be an array of task names, got {quote(refs)}")
    return refs


class _Task(NamedTuple):
    """One task as read: `key` is what references use, `alias` the other label (name or id)."""

    key: str
    alias: object
    runtime: float
    parents: list
    children: list
    where: str


def _records(obj: object, source: str) -> tuple[list[_Task], str]:
    """Return the tasks of a WfCommons instance, and the path of the field that lists them."""
    if type(obj) is not dict:
        raise TraceError(f"{source}: not a WfCommons instance: expected a JSON object, got "
                         f"{json_type(obj)}")
    wf = obj.get("workflow")
    if type(wf) is not dict:
        raise TraceError(f"{source}: workflow: missing or not an object (not a WfCommons "
                         f"instance)")
    if "specification" in wf:  # schema 1.5: structure and execution kept apart, all by id
        spec = wf["specification"]
        if type(spec) is not dict:
            raise TraceError(f"{source}: workflow.specification: expected an object")
        path = "workflow.specification.tasks"
        tasks = _tasks_list(spec, "tasks", path, source)
        runtimes: dict[str, float] = {}
        execution = wf.get("execution")
        if type(execution) is dict and "tasks" in execution:
            epath = "workflow.execution.tasks"
            for i, t in enumerate(_tasks_list(execution, "tasks", epath, source)):
                tid = t.get("id")
                if type(tid) is str:
                    runtimes[tid] = _runtime(t, ("runtimeInSeconds", "runtime"),
                                             f"{source}: {epath}[{i}] ({quote(tid)})")
        records = []
        for i, t in enumerate(tasks):
            tid = t.get("id", t.get("name"))
            if type(tid) is not str or not tid:
                raise TraceError(f"{source}: {path}[{i}]: missing \"id\"")
            where = f"{source}: {path}[{i}] ({quote(tid)})"
            # Some writers keep runtimes on the specification task as well.
            rt = runtimes.get(tid)
            if rt is None:
                rt = _runtime(t, ("runtimeInSeconds", "runtime"), where)
            records.append(_Task(tid, t.get("name"), rt, _refs(t, "parents", where),
                                 _refs(t, "children", where), where))
        return records, path
    if "tasks" in wf or "jobs" in wf:  # 1.0-1.4 (tasks) and 0.x (jobs): references by name
        key = "tasks" if "tasks" in wf else "jobs"
        path = f"workflow.{key}"
        records = []
        for i, t in enumerate(_tasks_list(wf, key, path, source)):
            tname = t.get("name", t.get("id"))
            if type(tname) is not str or not tname:
                raise TraceError(f"{source}: {path}[{i}]: missing \"name\"")
            where = f"{source}: {path}[{i}] ({quote(tname)})"
            rt = _runtime(t, ("runtimeInSeconds", "runtime"), where)
            records.append(_Task(tname, t.get("id"), rt, _refs(t, "parents", where),
                                 _refs(t, "children", where), where))
        return records, path
    raise TraceError(f"{source}: workflow: no tasks found (expected workflow.specification.tasks"
                     f", workflow.tasks or workflow.jobs)")


def _resolver(records: list[_Task], path: str, source: str) -> dict[str, int]:
    """Return the map from a task reference (its key, or its unique alias) to its index."""
    index: dict[str, int] = {}
    for i, rec in enumerate(records):
        if rec.key in index:
            raise TraceError(f"{source}: {path}: duplicate task {quote(rec.key)}")
        index[rec.key] = i
    # Writers differ on whether references use names or ids: accept the other one when unique.
    alias: dict[str, int] = {}
    clash: set[str] = set()
    for i, rec in enumerate(records):
        other = rec.alias
        if type(other) is str and other not in index:
            if other in alias:
                clash.add(other)
            alias[other] = i
    for other, i in alias.items():
        if other not in clash:
            index[other] = i
    return index


def _choose_initial(sources: list[int], index: dict[str, int],
                    all_sources_initial: bool, initial: Sequence[str] | None,
                    initial_fraction: float | None, rng: random.Random,
                    source: str) -> tuple[int, ...]:
    """Return the initial task ids: those given, a random share of the sources, or all sources."""
    if initial:
        ids = []
        for x in initial:
            if x not in index:
                raise TraceError(f"{source}: initial: unknown task {quote(x)}")
            if index[x] not in ids:
                ids.append(index[x])
        return tuple(ids)
    if initial_fraction is not None:
        if not 0.0 < initial_fraction <= 1.0:
            raise TraceError(f"{source}: initial fraction must be in (0, 1], got "
                             f"{initial_fraction}")
        k = max(1, math.ceil(initial_fraction * len(sources))) if sources else 0
        return tuple(sorted(rng.sample(sources, k)))
    if all_sources_initial:
        return tuple(sources)
    raise TraceError(f"{source}: no initial tasks: give initial task ids or an initial fraction")


def convert_wfcommons(obj_or_path: dict | str | os.PathLike, all_sources_initial: bool = True,
                      activate_all: bool = True, *, initial: Sequence[str] | None = None,
                      initial_fraction: float | None = None, activation_p: float | None = None,
                      seed: int = 0, name: str | None = None) -> JobTrace:
    """Return the job trace of a WfCommons instance (a decoded object or a file path).

    initial: task ids to activate (default: every source, or a random `initial_fraction` of
    them). activation_p: each task activates each child with this probability (seeded);
    otherwise every task activates all children (`activate_all`) or none.
    """
    if isinstance(obj_or_path, (str, os.PathLike)):
        source = str(obj_or_path)
        obj = read_json(obj_or_path)
    else:
        source, obj = "<wfcommons>", obj_or_path
    records, path = _records(obj, source)
    index = _resolver(records, path, source)

    names = [rec.key for rec in records]
    durations = [rec.runtime for rec in records]
    pairs: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for v, rec in enumerate(records):
        for ref, as_parent in [(r, True) for r in rec.parents] + [(r, False) for r in rec.children]:
            other = index.get(ref)
            if other is None:
                role = "parent" if as_parent else "child"
                raise TraceError(f"{rec.where}: {role} {quote(ref)} is not a task in {path}")
            edge = (other, v) if as_parent else (v, other)
            if edge not in seen:
                seen.add(edge)
                pairs.append(edge)
    graph = build_graph(names, pairs, source)

    rng = random.Random(seed)
    init = _choose_initial(graph.sources, index, all_sources_initial, initial,
                           initial_fraction, rng, source)
    activations = None
    if activation_p is not None:
        if not 0.0 <= activation_p <= 1.0:
            raise TraceError(f"{source}: activation probability must be in [0, 1], got "
                             f"{activation_p}")
        activations = {}
        for u, kids in enumerate(graph.children):
            chosen = tuple(c for c in kids if rng.random() < activation_p)
            if chosen:
                activations[u] = chosen
    elif not activate_all:
        activations = {}

    extra: dict[int, dict] = {}
    for i, rec in enumerate(records):
        node = {"kind": "task"}
        if type(rec.alias) is str and rec.alias != rec.key:
            node["name" if path.endswith("specification.tasks") else "wf_id"] = rec.alias
        extra[i] = node
    label = name or (obj.get("name") if type(obj.get("name")) is str else "") or (
        Path(source).name if source != "<wfcommons>" else "wfcommons")
    return JobTrace(graph=graph, durations=durations, initial=init, activations=activations,
                    name=label, extra=extra)
