"""The error of a forced plan that does not apply (planner.py, routing.py)."""

from __future__ import annotations

from levelflow.errors import LevelflowError


class PlanError(LevelflowError):
    """A forced plan does not apply to a task; str() is one line naming the task."""
