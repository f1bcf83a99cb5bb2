"""CLI commands: run."""
