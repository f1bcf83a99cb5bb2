"""Scheduler names -> classes: the built-ins, custom heuristics, import paths and entry points.

Constant: nothing. Changes: the name -> class table, filled by the `register` decorator (the
built-in modules register themselves when `levelflow.scheduler` is imported).

A spec is `name[:arg[:arg...]]` (the args go, as strings, to the constructor after the graph),
`package.module:Class[:arg...]` (an import path: the part before the first ':' has a '.'),
`path/to/file.py:Class[:arg...]` (a Python file, from any working directory), or a name
published by an installed package in the entry-point group `levelflow.schedulers`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from levelflow.errors import LevelflowError
from levelflow.pyfile import import_file
from levelflow.scheduler.base import Scheduler
from levelflow.tasks.graph import TaskGraph

ENTRY_POINT_GROUP = "levelflow.schedulers"

_REGISTRY: dict[str, type[Scheduler]] = {}


class SchedulerSpecError(LevelflowError):
    """A scheduler spec names no known scheduler or passes it a bad argument; str() is one line."""

    exit_code = 2


def register(name: str) -> Callable[[type[Scheduler]], type[Scheduler]]:
    """Return a class decorator that makes the class available as scheduler `name`."""
    if not name or ":" in name or "," in name:
        raise ValueError(f"bad scheduler name {name!r}: must be non-empty, without ':' or ','")

    def decorate(cls: type[Scheduler]) -> type[Scheduler]:
        """Return the class itself, now registered."""
        _REGISTRY[name] = cls
        cls.name = name
        return cls

    return decorate


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Return the installed entry points of the scheduler group by name."""
    try:
        eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # a broken installed distribution must not break the built-ins
        return {}
    return {ep.name: ep for ep in eps}


def _load_builtins() -> None:
    """Import the built-in scheduler modules so that they register themselves."""
    importlib.import_module("levelflow.scheduler")


def available_schedulers() -> list[str]:
    """Return the sorted names of every registered or entry-point scheduler."""
    _load_builtins()
    return sorted(set(_REGISTRY) | set(_entry_points()))


def _known() -> str:
    """Return the known names as one comma-separated line for error messages."""
    return ", ".join(available_schedulers())


def _import_file(file: str, spec: str):
    """Return the module of the Python file `file` (loaded once per process)."""

    path = Path(file).resolve()
    if not path.is_file():
        raise SchedulerSpecError(f"scheduler {spec!r}: no such file {file}")
    name = f"levelflow_user.{path.stem}_{abs(hash(str(path))):x}"
    return import_file(str(path), name)


def _import_path(path: str, spec: str) -> type[Scheduler]:
    """Return the class named by `package.module:Class` or `path/to/file.py:Class`."""
    module_name, _, attr = path.partition(":")
    if module_name.endswith(".py"):
        return _class_of(_import_file(module_name, spec), module_name, attr, spec)
    # Console scripts do not put the working directory on sys.path the way `python -m` does;
    # users expect `--scheduler mymodule:Class` to find ./mymodule.py.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise SchedulerSpecError(f"scheduler {spec!r}: cannot import {module_name}: {e} (run "
                                 f"from the folder it is in, or name the file: "
                                 f"path/to/file.py:Class); known schedulers: {_known()}") from None
    return _class_of(module, module_name, attr, spec)


def _class_of(module, module_name: str, attr: str, spec: str) -> type[Scheduler]:
    """Return the class `attr` of an imported module, or raise naming the spec."""
    cls = getattr(module, attr, None)
    if cls is None:
        raise SchedulerSpecError(f"scheduler {spec!r}: module {module_name} has no {attr!r}; "
                                 f"known schedulers: {_known()}")
    return cls


def resolve(spec: str) -> tuple[type[Scheduler], list[str]]:
    """Return the scheduler class a spec names and the string arguments it passes."""
    _load_builtins()
    spec = spec.strip()
    head = spec.split(":", 1)[0]
    if "." in head:
        parts = spec.split(":")
        if len(parts) < 2 or not parts[1]:
            raise SchedulerSpecError(f"scheduler {spec!r}: an import path needs "
                                     f"'package.module:Class'; known schedulers: {_known()}")
        cls = _import_path(f"{parts[0]}:{parts[1]}", spec)
        args = parts[2:]
    else:
        name, *args = spec.split(":")
        cls = _REGISTRY.get(name)
        if cls is None:
            ep = _entry_points().get(name)
            if ep is None:
                raise SchedulerSpecError(f"unknown scheduler {name!r}; known schedulers: "
                                         f"{_known()}")
            try:
                cls = ep.load()
            except Exception as e:
                raise SchedulerSpecError(f"scheduler {name!r}: entry point {ep.value} fails to "
                                         f"load: {e}; known schedulers: {_known()}") from None
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)):
        raise SchedulerSpecError(f"scheduler {spec!r} is not a levelflow Scheduler class; "
                                 f"known schedulers: {_known()}")
    return cls, args


def make_scheduler(spec: str, graph: TaskGraph,
                   costs: Sequence[float] | None = None) -> Scheduler:
    """Return a fresh scheduler for `graph` built from a spec such as `lookahead:15`."""
    cls, args = resolve(spec)
    try:
        return cls(graph, *args, costs=costs)
    except (TypeError, ValueError) as e:
        # The constructor's complaint, but as one line that also says what would have worked.
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SchedulerSpecError(f"scheduler {spec!r}: bad argument: {msg}; known schedulers: "
                                 f"{_known()}") from None
