"""levelflow.traces."""
