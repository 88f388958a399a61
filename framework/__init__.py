"""Tributary: declarative pipelines (YAML + Spark SQL templates) on Spark, written to Delta."""

__version__ = "0.1.0"
