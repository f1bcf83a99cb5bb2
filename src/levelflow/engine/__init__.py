"""levelflow.engine."""
