"""CLI commands: simulate."""
