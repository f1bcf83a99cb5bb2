"""What the driver side (in_spark.py) and the Python workers (worker.py) of an in-Spark plan
agree on: the task's `Layout` and the reserved `_rel` codes of the packed output."""

from __future__ import annotations

from dataclasses import dataclass

from levelflow.engine.guard import Limit
from levelflow.engine.plans.routing import Routing
from levelflow.tasks.ast import Decl, Rule

# Prefix of the stand-in relation holding an input's base facts in an incremental from-scratch
# run (incremental/strategies/recompute.py); shipped every epoch, so never kept on the executors.
BASE_FACTS = "@base:"
STATS_REL = -1  # the `_rel` of the one row per share that carries its round count in `_it`
COUNT_REL = -2  # minus r: the `_rel` of a share's row carrying relation r's tuple count in `_it`


@dataclass(frozen=True, slots=True)
class Layout:
    """What the Python side needs to unpack inputs and pack outputs (pickled to the workers)."""

    rules: tuple[Rule, ...]
    names: tuple[str, ...]  # the task's relations, in `_rel` order
    decls: dict[str, Decl]  # every relation the rules touch
    sources: tuple[tuple[str, bool], ...]  # per `_src`: (relation, is it that relation's facts)
    facts: dict[str, list[tuple]]  # the program's own facts, per relation of the task
    key: dict[str, int] | None  # partitioned plan: the carried position per relation
    parts: int
    closure: bool = False  # the task is a path expression's closure: plans/closure.py runs it
    # Whether the caller reads the rounds (`_it`) of the relations' tuples; when not, `_it` is
    # null on those rows: shipping and storing a rank per tuple cost ~1/4 of a large result.
    ranked: bool = True
    # (lineage, token): also leave each share's result on its executor (plans/resident.py),
    # where the task's incremental epochs find it (incremental/backends/worker/dred_job.py).
    keep: tuple[str, str] | None = None
    # False when nothing reads the tuples (no later task, not an output): only their counts
    # come back, as COUNT_REL rows; storing a large result on the JVM side costs more than
    # computing it (2 s for 20M pairs against 0.7 s for their closure).
    emit: bool = True
    # The task's tuple limit, checked after each round of each share (engine/guard.py).
    limit: Limit | None = None
    # The task's `@sub:r` pair rules: its fixpoint is pruned each round (plans/subsume.py).
    subsumes: tuple[Rule, ...] = ()
    # The distributed plan: the relations' partitioned copies (routing.py), and the job's
    # token, which each task presents to its peers (exchange.py).
    routing: Routing | None = None
    token: str = ""
