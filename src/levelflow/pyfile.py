"""Import a Python file by path once per process (user schedulers, user functors)."""

from __future__ import annotations

import importlib.util
import sys


def import_file(path: str, key: str):
    """Return the module at `path`, imported once per process as `key` in sys.modules."""
    if key in sys.modules:  # a second import would run its top level (registrations) again
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[key]
        raise
    return module
