"""levelflow.scheduler."""
