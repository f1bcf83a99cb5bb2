"""levelflow.engine: run a program's tasks as Spark jobs in the order a scheduler decides.

Names are resolved lazily, so importing the package does not import Spark.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "load": "levelflow.engine.api",
    "run": "levelflow.engine.api",
    "run_program": "levelflow.engine.runner",
    "write_outputs": "levelflow.engine.runner",
    "RunResult": "levelflow.engine.runner",
    "RunError": "levelflow.engine.runner",
    "Progress": "levelflow.engine.progress",
    "RichProgress": "levelflow.engine.progress",
    "make_progress": "levelflow.engine.progress",
    "make_session": "levelflow.engine.session",
    "evaluate_task": "levelflow.engine.evaluate",
    "evaluate_program": "levelflow.engine.evaluate",
    "read_facts": "levelflow.engine.facts",
    "write_relation": "levelflow.engine.facts",
    "FactError": "levelflow.engine.facts",
    "empty_relation": "levelflow.engine.types",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """Return the exported name `name`, importing its module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'levelflow.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
