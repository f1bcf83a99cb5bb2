"""levelflow: keep Datalog results up to date by scheduling predicate tasks on a DAG."""

__version__ = "0.1.0"

# The Python API (levelflow.load / levelflow.run), resolved lazily so that importing levelflow
# (e.g. for the simulator or the CLI's help) does not import Spark.
_API = {"load", "run", "RunResult"}


def __getattr__(name: str):
    """Return levelflow.load, levelflow.run or levelflow.RunResult on first use."""
    if name in _API:
        from levelflow.engine import api, runner

        return getattr(api if name != "RunResult" else runner, name)
    raise AttributeError(f"module 'levelflow' has no attribute {name!r}")
