"""levelflow.simulator."""
