"""CLI commands: trace."""
