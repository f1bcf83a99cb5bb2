"""levelflow.tasks."""
