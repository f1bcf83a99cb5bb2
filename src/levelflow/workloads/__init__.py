"""levelflow.workloads: generated programs and facts to run and benchmark (gMark graphs)."""
