"""Python-worker backends: a task's state kept on the executors, one Spark job per epoch."""
