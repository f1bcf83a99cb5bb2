"""The tuple guard: a task that would make more than `max_tuples` tuples stops with one line.

Before a task's jobs start, a rule whose body is a product of whole relations (atoms that share
no variable, as in `p(x, y) :- a(x), b(y).`) is refused from the input counts alone: its join
makes the product of their sizes, and Spark would spill all of it before anything could be
counted; so is a `range` over constants that makes more values than the limit
(`range(0, 1000000000)`). A range whose bounds are variables has its values counted (over the
rows it extends) before they are made (rules.Ops.values), in every plan. While a task runs,
its tuples are counted where the plans count them anyway: after each round of the global
plan, after each round of the Python worker's fixpoint (per share), after a closure's search;
the task stops there once they pass the limit. The error is a user error like a bad fact
file: the run writes no output and an epoch changes no state.
Pure Python (it runs in the Python workers too).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from levelflow.errors import LevelflowError
from levelflow.tasks.ast import Atom, Call, Comparison, Loc, Rule, Var, Wildcard
from levelflow.tasks.exists import components
from levelflow.tasks.functors import MAX_SYMBOL, functor_name, range_count
from levelflow.tasks.typecheck import fold

# Per task, by default: generous, so that only a runaway (a cross product, an exploding join
# or recursion) is stopped. `--max-tuples` and `max_tuples=` change it.
MAX_TUPLES = 100_000_000
# The message of a TupleLimit raised in a Python worker, inside the text Spark wraps it in.
_RAISED = re.compile(r"(TupleLimit|SymbolLimit): ((?:[^\n]*?:\d+: )?(?:task|error:) "
                     r"[^\n]*?; stopped)")


class TupleLimit(LevelflowError):
    """A task would make more than max_tuples tuples; str() is one line naming it."""


class SymbolLimit(LevelflowError):
    """A functor made a symbol longer than MAX_SYMBOL: one line naming where.

    Polars re-raises an error from inside an expression with the expression appended; only
    the first line is kept."""

    def __init__(self, message: str) -> None:
        super().__init__(message.split("\n", 1)[0])


def symbol_limit(call: Call) -> str:
    """Return the line refusing the symbol `call` makes past MAX_SYMBOL."""
    where = f"{call.loc}: " if call.loc is not None else ""
    return (f"{where}error: {functor_name(call.name)} makes a symbol longer than "
            f"{MAX_SYMBOL:,} characters, the longest levelflow holds; stopped")


def check_limit(limit) -> int | None:
    """Return the limit as given (None: no limit); refuse one that is not a positive int."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise TupleLimit(f"max_tuples: must be a positive number of tuples, got {limit!r}")
    return limit


def over(task: str, limit: int, why: str = "", where: str = "") -> TupleLimit:
    """Return the error for task `task` past `limit` (`where`: 'file:line: ' of the rule)."""
    why = f": {why}" if why else ""
    return TupleLimit(f"{where}task {task}: more than {limit:,} tuples "
                      f"(--max-tuples {limit}){why}; stopped")


@dataclass(frozen=True, slots=True)
class Limit:
    """A task's limit, as the evaluators check it (pickled to the Python workers)."""

    task: str
    tuples: int

    def check(self, rows: int, where: str = "") -> None:
        """Raise TupleLimit if the task holds more than its limit of tuples."""
        if rows > self.tuples:
            raise over(self.task, self.tuples, f"{rows:,} so far", where)

    def check_range(self, values: int, loc: Loc | None) -> None:
        """Raise TupleLimit, before they are made, if a range makes more values than the
        limit (`loc`: where the range is)."""
        if values > self.tuples:
            raise over(self.task, self.tuples, f"its range makes {values:,} values", at(loc))


class Cancelled(Exception):
    """The evaluation was cancelled between iterations (the caller set the cancel event)."""


@dataclass(frozen=True, slots=True)
class Watched(Limit):
    """A limit that also stops the evaluation once `cancel` is set: a task in the driver
    checks it each round, where Spark would cancel a task of its own."""

    cancel: threading.Event = field(default=None, compare=False)

    def check(self, rows: int, where: str = "") -> None:
        """Raise Cancelled if the run was cancelled, else TupleLimit past the limit."""
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled(f"task {self.task} cancelled")
        Limit.check(self, rows, where)


def watched(limit: Limit | None, task: str, cancel: threading.Event | None) -> Limit | None:
    """Return `limit` (None: no limit) checked against `cancel` too, each round."""
    if cancel is None:
        return limit
    return Watched(task, limit.tuples if limit is not None else sys.maxsize, cancel)


# The cancel flag of the run or epoch whose task this thread evaluates: rounds run in the
# driver check it (a task on Spark is cancelled with its job; in a Python worker it is unset).
CANCEL: ContextVar[threading.Event | None] = ContextVar("levelflow_cancel", default=None)


def check_cancelled() -> None:
    """Raise Cancelled if this thread's run or epoch was cancelled (CANCEL)."""
    cancel = CANCEL.get()
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled")


@contextmanager
def cancelled_by(cancel: threading.Event | None) -> Iterator[None]:
    """Set CANCEL to `cancel` for the block (a task evaluated in this thread)."""
    token = CANCEL.set(cancel)
    try:
        yield
    finally:
        CANCEL.reset(token)


# The limit of the task an epoch updates in this thread: the rule bodies its strategies build
# there (rules.Ops) count a range's values against it. Their many paths are not each handed the
# limit; a share updated in a Python worker is not reached (the update is checked after it).
UPDATING: ContextVar[Limit | None] = ContextVar("levelflow_updating", default=None)


@contextmanager
def updating(limit: Limit | None) -> Iterator[None]:
    """Set UPDATING to `limit` for the block (an epoch's update of one task)."""
    token = UPDATING.set(limit)
    try:
        yield
    finally:
        UPDATING.reset(token)


def task_limit(task, max_tuples: int | None) -> Limit | None:
    """Return the limit a task's evaluation checks: None without one, or for a task with no
    rule to derive by (its fact file's tuples are the input's, not derived)."""
    if max_tuples is None or not any(r.body for r in task.rules):
        return None
    return Limit(task.name, max_tuples)


def from_failure(exc: BaseException, file: str) -> TupleLimit | SymbolLimit | None:
    """Return the TupleLimit or SymbolLimit a Spark job failed with (raised in a Python worker,
    or by Spark for a symbol), naming the program `file` where the line says no place; None
    if it failed otherwise."""
    found = _RAISED.search(str(exc))
    if found is None:
        return None
    error = TupleLimit if found.group(1) == "TupleLimit" else SymbolLimit
    said = found.group(2)  # a range's or a symbol's line says where it is: file:line
    return error(f"{file}: {said}" if said.startswith("task ") else said)


def at(loc: Loc | None) -> str:
    """Return 'file:line: ' of a rule or term, as a limit's line starts (empty without one)."""
    return f"{loc.file}:{loc.line}: " if loc is not None else ""


def range_call(lit: object) -> Call | None:
    """Return the range of a body literal `x = range(...)` (either way round), else None."""
    if isinstance(lit, Comparison) and lit.op == "=":
        for term in (lit.left, lit.right):
            if isinstance(term, Call) and term.name == "range":
                return term
    return None


def constant_values(call: Call) -> int | None:
    """Return how many values a range over constant expressions makes, else None."""
    args = [fold(a, lambda loc, msg: None) for a in call.args]
    if any(a is None or a.kind == "symbol" for a in args):
        return None
    return range_count(*(a.value for a in args))


def check_ranges(task, limit: int | None) -> None:
    """Raise TupleLimit before a task runs if a range over constants in one of its rules
    makes more than `limit` values."""
    if limit is None:
        return
    for rule in task.rules:
        for lit in rule.body:
            call = range_call(lit)
            values = constant_values(call) if call is not None else None
            if values is not None:
                Limit(task.name, limit).check_range(values, call.loc or rule.loc)


def product_size(rule: Rule, counts: Mapping[str, int]) -> tuple[int, list[int]] | None:
    """Return (tuples the rule's join makes, the factors) when its body's positive atoms are
    whole relations sharing no variable (a product of known sizes), else None.

    An equality shares a variable as a join does (`a(x), b(y), y = x + 1` binds y from x and
    joins b on it); other comparisons and negations filter the product Spark makes."""
    atoms = [lit for lit in rule.body if isinstance(lit, Atom) and lit.args]  # a() is 0 or 1
    if len(atoms) < 2:
        return None
    for atom in atoms:
        names = [a.name for a in atom.args if isinstance(a, Var)]
        plain = all(isinstance(a, Var | Wildcard) for a in atom.args)
        if not plain or len(set(names)) < len(names) or atom.relation not in counts:
            return None  # a filter: its size is not the relation's
    linked = tuple(atoms) + tuple(lit for lit in rule.body
                                  if isinstance(lit, Comparison) and lit.op == "=")
    if any(sum(i < len(atoms) for i in part) > 1 for part in components(linked)):
        return None  # a join: its size is not a product
    sizes = [counts[a.relation] for a in atoms]
    total = 1
    for size in sizes:
        total *= size
    return total, sizes


def check_products(file: str, task, counts: Mapping[str, int], limit: int | None) -> None:
    """Raise TupleLimit before a task runs if one of its rules is a product past `limit`."""
    if limit is None:
        return
    for rule in task.rules:
        found = product_size(rule, counts)
        if found is not None and found[0] > limit:
            total, sizes = found
            where = f"{file}:{rule.loc.line}: " if rule.loc else f"{file}: "
            product = " x ".join(f"{s:,}" for s in sizes)
            raise over(task.name, limit, f"its rule joins {product} = {total:,}", where)
