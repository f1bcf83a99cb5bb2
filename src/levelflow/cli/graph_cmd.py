"""CLI commands: graph."""
