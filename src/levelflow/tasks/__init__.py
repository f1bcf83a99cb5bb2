"""levelflow.tasks: the Datalog front end, the predicate task DAG and its levels."""

from levelflow.tasks.build import build_tasks
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.graph import GraphError, TaskGraph
from levelflow.tasks.load import load_program, parse_program, parse_stored
from levelflow.tasks.tasks import ProgramTasks, Task

__all__ = [
    "DatalogError",
    "GraphError",
    "ProgramTasks",
    "Task",
    "TaskGraph",
    "build_tasks",
    "load_program",
    "parse_program",
    "parse_stored",
]
