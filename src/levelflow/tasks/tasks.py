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
    reads: frozenset[str]  # relations its rules' bodies read (its own included)
    closure: bool = False  # a path expression's `e+` (Program.closures): a native operator runs it
    # The `@sub:r` pair rules of its subsumed relations (tasks/subsume.py): pruned each round.
    subsumes: tuple[Rule, ...] = ()

    @property
    def reads_from(self) -> list[str]:
        """Return the sorted relations of other tasks this task reads."""
        return sorted(self.reads - set(self.relations))


@dataclass(frozen=True, slots=True)
class ProgramTasks:
    """A program condensed into tasks; `graph` node i is `tasks[i]`, ids in topological order.

    `initial`: the tasks a from-scratch run activates (input, facts, rules with no positive
    atom). `edge_reads[v]`: per child c of v, (c, positions in v.relations that c reads); a
    finished task activates c when one of those relations changed.
    """

    program: Program
    tasks: tuple[Task, ...]
    graph: TaskGraph
    initial: tuple[int, ...]
    edge_reads: tuple[tuple[tuple[int, tuple[int, ...]], ...], ...]

    def task_of(self, relation: str) -> Task:
        """Return the task that computes `relation`."""
        for task in self.tasks:
            if relation in task.relations:
                return task
        raise KeyError(relation)
