"""Job traces (jobtrace/1): read, check, write, summarize, generate, convert; schedule/1 CSVs."""

from levelflow.traces.generate import generate_trace
from levelflow.traces.jobtrace import (
    FORMAT,
    TraceError,
    dump_trace,
    load_trace,
    loads_trace,
    trace_to_obj,
)
from levelflow.traces.model import JobTrace
from levelflow.traces.schedule import (
    ScheduleError,
    check_schedule,
    read_schedule,
    write_schedule,
)
from levelflow.traces.stats import active_span, trace_stats
from levelflow.traces.wfcommons import convert_wfcommons

__all__ = [
    "FORMAT",
    "JobTrace",
    "ScheduleError",
    "TraceError",
    "active_span",
    "check_schedule",
    "convert_wfcommons",
    "dump_trace",
    "generate_trace",
    "load_trace",
    "loads_trace",
    "read_schedule",
    "trace_stats",
    "trace_to_obj",
    "write_schedule",
]
