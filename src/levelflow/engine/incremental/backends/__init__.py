"""Where a strategy runs and how rows get there: the driver, Spark, the Python workers."""
