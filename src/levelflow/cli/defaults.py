"""The CLI's defaults, in one Spark-free module so that `--help` stays fast and commands agree."""

SCHEDULER = "hybrid"            # run, update: the shared ready queue over LogicBlox intervals
# simulate compares schedulers: its default is the baseline the others are measured against.
SIMULATE_SCHEDULER = "levelbased"
JOBS = 2                        # run, update: tasks evaluated concurrently
MASTER = "local[*]"
DRIVER_MEMORY = "2g"
CHECKPOINT = "local"
PLAN = "auto"
LOCAL_ROWS = 2_000_000          # engine/plans/planner.py LOCAL_ROWS (tests check they agree)
BY_MASTER = -1                  # engine/memory.py BY_MASTER: driver rows by the master
MAX_TUPLES = 100_000_000        # engine/guard.py MAX_TUPLES: tuples per task

# The engine's elastic-switch defaults (engine/incremental/elastic.py), repeated here so that
# --help does not import Spark; tests/test_cli_defaults.py checks the two agree.
SWITCH = 0.2
SWITCH_FLOOR = 1.0              # seconds: the switch never fires earlier
LARGE_CHANGE = 0.05
STRATEGY = "elastic"

MASTER_HELP = "Spark master URL (local[*], spark://host:7077, yarn, k8s://...)."
DRIVER_MEMORY_HELP = "Memory of the Spark driver (a JVM size: 512m, 2g)."
JOBS_HELP = "Tasks evaluated at the same time."
SCHEDULER_HELP = ("Scheduler: hybrid, levelbased, lookahead:K, logicblox, signal, "
                  "budget:HEURISTIC:BYTES or path/to/file.py:Class / pkg.mod:Class.")
SWITCH_HELP = (f"Elastic switch: stop a task's update after this fraction of its last "
               f"from-scratch time (at least {SWITCH_FLOOR:g} s) and recompute it from scratch; "
               f"15x for a task updated where its state lives. "
               f"--strategy incremental never switches.")
LARGE_CHANGE_HELP = ("Elastic: recompute a recursive task at once when this fraction of the "
                     "tuples it reads changed (5x for a task updated where its state lives).")
PLAN_HELP = ("How tasks run: auto (by shape and size: small inputs in the driver), driver, "
             "local, partitioned, distributed or global.")
LOCAL_ROWS_HELP = "auto runs a task inside Spark tasks up to this many input rows."
MAX_TUPLES_HELP = ("Stop with one line when a task would make more than this many tuples "
                   "(a rule's cross product is refused before it runs); nothing is written.")
