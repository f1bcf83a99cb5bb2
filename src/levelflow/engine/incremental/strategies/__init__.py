"""Maintenance strategies: counting, delete-and-rederive, and a task recomputed and diffed."""
