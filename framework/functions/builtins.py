"""The names of Spark's built-in SQL functions (`SHOW FUNCTIONS` of the pinned Spark, stored with
the package), so `validate` knows a misspelt function without starting a JVM.

Regenerate spark_functions.txt when the pinned pyspark changes:
    spark.sql("SHOW FUNCTIONS") -> one name per line, sorted.
"""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def spark_functions() -> frozenset[str]:
    text = resources.files("framework.functions").joinpath("spark_functions.txt").read_text(encoding="utf-8")
    return frozenset(line.strip().lower() for line in text.splitlines() if line.strip())
