"""A program's predicate tasks: one per strongly connected component of the precedence graph."""

from __future__ import annotations

from dataclasses import dataclass

from levelflow.tasks.ast import Program, Rule
from levelflow.tasks.graph import TaskGraph


@dataclass(frozen=True, slots=True)
class Task:
    """One SCC: its relations, the rules whose heads lie in it, whether it recurses or is input."""

    id: int
    name: str
    relations: tuple[str, ...]
    rules: tuple[Rule, ...]
    recursive: bool
    input: bool


@dataclass(frozen=True, slots=True)
class ProgramTasks:
    """A program condensed into tasks; `graph` node i is `tasks[i]`, ids in topological order."""

    program: Program
    tasks: tuple[Task, ...]
    graph: TaskGraph

    def task_of(self, relation: str) -> Task:
        """Return the task that computes `relation`."""
        for task in self.tasks:
            if relation in task.relations:
                return task
        raise KeyError(relation)
