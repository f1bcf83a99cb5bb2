"""levelflow: keep Datalog results up to date by scheduling predicate tasks on a DAG."""

__version__ = "0.1.0"
