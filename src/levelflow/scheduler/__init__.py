"""levelflow.scheduler: pure state machines that hand out ready tasks of a TaskGraph.

Importing the package registers the built-in schedulers with the registry.
"""

from levelflow.scheduler.base import Scheduler
from levelflow.scheduler.core import ActiveSet, Finder, FinderScheduler
from levelflow.scheduler.hybrid import Budget, Hybrid
from levelflow.scheduler.levelbased import LevelBased
from levelflow.scheduler.logicblox import LogicBlox
from levelflow.scheduler.lookahead import LookAhead
from levelflow.scheduler.registry import (
    SchedulerSpecError,
    available_schedulers,
    make_scheduler,
    register,
)
from levelflow.scheduler.signal import Signal

__all__ = [
    "Scheduler", "register", "make_scheduler", "available_schedulers", "SchedulerSpecError",
    "LevelBased", "LookAhead", "LogicBlox", "Hybrid", "Signal", "Budget",
    "ActiveSet", "Finder", "FinderScheduler",
]
