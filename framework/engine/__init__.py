"""Running pipelines: Spark session, batch runner, run log."""
