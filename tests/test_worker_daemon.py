"""Embedded Spark's Python workers import PySpark as installed (framework.engine.worker_daemon)."""

from __future__ import annotations

import os
import sys

import pyspark

from framework.engine.worker_daemon import without_spark_zips

INSTALLED = os.path.dirname(pyspark.__file__)
ZIPS = [
    os.path.join(INSTALLED, "python", "lib", "pyspark.zip"),
    os.path.join(INSTALLED, "python", "lib", "py4j-0.10.9.9-src.zip"),
]


def _where_a_worker_imports_from(rows):
    import sys

    import pyspark as worker_pyspark

    with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
        parent = cmdline.read().replace(b"\0", b" ").decode()
    for _ in rows:
        pass
    yield worker_pyspark.__file__, parent, [p for p in sys.path if os.path.basename(p).startswith(("pyspark", "py4j"))]


def test_an_embedded_worker_imports_pyspark_from_its_installation_not_the_source_zip(spark):
    rdd = spark.sparkContext.parallelize([1], 1).mapPartitions(_where_a_worker_imports_from)
    ((module, daemon, zips),) = rdd.collect()
    assert ".zip" not in module, f"the worker compiled PySpark from its zip again: {module}"
    assert module.startswith(INSTALLED)
    assert "framework.engine.worker_daemon" in daemon
    assert zips == []


def test_the_zips_go_only_when_they_are_the_installed_pyspark():
    installed = [p for p in sys.path if not p.endswith(".zip")]
    assert without_spark_zips([*ZIPS, *installed]) == installed
    elsewhere = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/python/lib/py4j-0.10.9.9-src.zip", *installed]
    assert without_spark_zips(elsewhere) == elsewhere  # another Spark's: its workers must match its JVM
    assert without_spark_zips([*ZIPS, "/x"]) == [*ZIPS, "/x"]  # no PySpark without them
