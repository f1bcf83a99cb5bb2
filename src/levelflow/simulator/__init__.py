"""levelflow.simulator: replay job traces under any scheduler on P simulated processors."""

from levelflow.simulator.bounds import lower_bound
from levelflow.simulator.greedy import greedy_makespan, greedy_schedule
from levelflow.simulator.replay import default_processors, simulate
from levelflow.simulator.result import SchedulerStall, SimResult, SimulationError

__all__ = ["simulate", "SimResult", "SimulationError", "SchedulerStall", "greedy_makespan",
           "greedy_schedule", "lower_bound", "default_processors"]
