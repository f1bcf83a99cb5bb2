"""`python -m levelflow` runs the CLI."""

from levelflow.cli import main

main()
