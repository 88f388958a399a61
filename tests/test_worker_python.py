"""Embedded Spark's Python processes import PySpark as installed (framework.engine.worker_python)."""

from __future__ import annotations

import os
import sys

import pyspark

from framework.engine.worker_python import without_spark_zips

INSTALLED = os.path.dirname(pyspark.__file__)
ZIPS = [
    os.path.join(INSTALLED, "python", "lib", "pyspark.zip"),
    os.path.join(INSTALLED, "python", "lib", "py4j-0.10.9.9-src.zip"),
]


def _where_a_worker_imports_from(rows):
    import sys

    import pyspark as worker_pyspark

    for _ in rows:
        pass
    yield worker_pyspark.__file__, [p for p in sys.path if os.path.basename(p).startswith(("pyspark", "py4j"))]


def test_an_embedded_worker_imports_pyspark_from_its_installation_not_the_source_zip(spark):
    rdd = spark.sparkContext.parallelize([1], 1).mapPartitions(_where_a_worker_imports_from)
    ((module, zips),) = rdd.collect()
    assert ".zip" not in module, f"the worker compiled PySpark from its zip again: {module}"
    assert module.startswith(INSTALLED)
    assert zips == []


def test_a_python_data_sources_planner_imports_pyspark_from_its_installation(spark):
    """Spark plans a Python data source's read in a Python process of its own, not one its daemon
    forks (a chained step's reader, framework.io.delta_stream, starts one each run)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class Reader(DataSourceReader):
        def __init__(self) -> None:
            import pyspark as planner_pyspark

            self.planned_with = planner_pyspark.__file__  # in the planner's process; pickled to the reader's

        def read(self, partition):
            import pyspark as reader_pyspark

            yield self.planned_with, reader_pyspark.__file__

    class WhereFrom(DataSource):
        @classmethod
        def name(cls) -> str:
            return "tributary_test_where_from"

        def schema(self) -> str:
            return "planned_with STRING, read_with STRING"

        def reader(self, schema):
            return Reader()

    spark.dataSource.register(WhereFrom)
    ((planned_with, read_with),) = spark.read.format("tributary_test_where_from").load().collect()
    assert ".zip" not in planned_with, f"the planner compiled PySpark from its zip again: {planned_with}"
    assert planned_with.startswith(INSTALLED) and read_with.startswith(INSTALLED)


def test_the_zips_go_only_when_they_are_the_installed_pyspark():
    installed = [p for p in sys.path if not p.endswith(".zip")]
    assert without_spark_zips([*ZIPS, *installed]) == installed
    elsewhere = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/python/lib/py4j-0.10.9.9-src.zip", *installed]
    assert without_spark_zips(elsewhere) == elsewhere  # another Spark's: its workers must match its JVM
    assert without_spark_zips([*ZIPS, "/x"]) == [*ZIPS, "/x"]  # no PySpark without them
