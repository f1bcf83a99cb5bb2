"""Plans: how one task's fixpoint runs on Spark, chosen per task so it costs O(1) Spark jobs.

  local        the whole fixpoint, every rule and round, inside one Spark task (small inputs)
  partitioned  linear recursion that carries one argument unchanged: each of P Spark tasks runs
               the fixpoint of the tuples whose carried key hashes to it, inputs broadcast
  global       round-by-round DataFrame jobs (engine/evaluate.py), for big inputs
The first two are one Spark job per task; `auto` picks by the task's shape and input size.
"""

from __future__ import annotations

from levelflow.engine.plans.planner import (
    LOCAL_ROWS,
    PARTITION_MIN_ROWS,
    PLANS,
    Plan,
    PlanError,
    carried_key,
    check_plan,
    choose_plan,
    static_plan,
)
from levelflow.engine.plans.run import evaluate_planned, input_rows

__all__ = ["LOCAL_ROWS", "PARTITION_MIN_ROWS", "PLANS", "Plan", "PlanError", "carried_key",
           "check_plan", "choose_plan", "evaluate_planned", "input_rows", "static_plan"]
