"""Each run in the warm engine gets a SparkSession of its own, and what it leaves is removed after it.

Why: one engine serves every project of a user with the same Spark settings, one run after
another. A project's udfs/ code runs in the engine (it is imported there) and may do anything
with the session it finds; a run registers its @udf functions and views by name. Without a
session per run, project B's SQL could call A's functions (`system.session.f(...)`), read A's
views, or run in the database and time zone A's module chose.

A run's session is `newSession()` of the engine's: its own SQL confs, temporary views, temporary
functions (Python udfs and SQL ones), current catalog and database, over the same SparkContext
(no JVM to start). It is made the active and default session for the run, so every
`SparkSession.getActiveSession()` and `builder.getOrCreate()` (framework.engine.session, udfs/
code) finds it, not the engine's. What sessions share is cleaned after the run: global temporary
views, databases, tables and functions the run created in the catalog, cached data, streaming
queries, and the udfs/ modules (and their pickling by value) in this Python process.
"""

from __future__ import annotations

import contextlib
import sys
import uuid
from typing import Any

from framework.functions import loader


class RunSession:
    """The session one run uses (`spark`), and how to put the engine back after it."""

    def __init__(self, root: Any, between_runs: dict[str, set[str]]):
        """`between_runs`: what the shared catalog holds when no run runs (catalog_objects, read
        once when the engine starts: each run leaves it so), what close() keeps."""
        self.root = root
        self.group = f"tributary-engine-{uuid.uuid4().hex[:12]}"
        self._catalog = between_runs
        self.spark = root.newSession()
        _make_active(self.spark)
        with contextlib.suppress(Exception):  # its jobs: cancelled (and their threads interrupted) together
            self.spark.sparkContext.setJobGroup(self.group, "tributary warm engine run", interruptOnCancel=True)

    def cancel(self) -> None:
        """Cancel the run's Spark jobs (from any thread)."""
        with contextlib.suppress(Exception):
            self.spark.sparkContext.cancelJobGroup(self.group)
        with contextlib.suppress(Exception):
            self.spark.sparkContext.cancelAllJobs()

    def close(self) -> None:
        """After the run: its queries stopped, what it left in shared places removed, the engine's
        session active again."""
        spark = self.spark
        self.cancel()
        with contextlib.suppress(Exception):
            for query in spark.streams.active:
                query.stop()
        with contextlib.suppress(Exception):
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
            spark.sparkContext.setLocalProperty("spark.job.description", None)
            spark.sparkContext.setLocalProperty("spark.job.interruptOnCancel", None)
        spark.sparkContext.environment.pop(loader.WORKERS_OF, None)  # set by Functions.use
        _drop_newcatalog_objects(self.root, self._catalog)
        with contextlib.suppress(Exception):
            self.root.catalog.clearCache()
        _make_active(self.root)
        forget_udfs()


def forget_udfs() -> None:
    """The udfs/ package of the run's project leaves this process: the next run imports its own."""
    with contextlib.suppress(Exception):
        from pyspark import cloudpickle

        for name in [m for m in sys.modules if m == loader.PACKAGE or m.startswith(loader.PACKAGE + ".")]:
            with contextlib.suppress(Exception):
                cloudpickle.unregister_pickle_by_value(sys.modules[name])
    for name in [m for m in sys.modules if m == loader.PACKAGE or m.startswith(loader.PACKAGE + ".")]:
        del sys.modules[name]
    loader.forget()


def _make_active(spark: Any) -> None:
    """`spark` for SparkSession.getActiveSession() and builder.getOrCreate(), here and in the JVM."""
    from pyspark.sql import SparkSession

    SparkSession._instantiatedSession = spark
    SparkSession._activeSession = spark
    jvm_class = SparkSession._get_j_spark_session_class(spark._jvm)
    jvm_class.setDefaultSession(spark._jsparkSession)
    jvm_class.setActiveSession(spark._jsparkSession)


def _rows(spark: Any, sql: str) -> list[Any]:
    try:
        return spark.sql(sql).collect()
    except Exception:  # noqa: BLE001 - a catalog that cannot list what is asked: nothing to compare
        return []


def catalog_objects(spark: Any) -> dict[str, set[str]]:
    """What the shared catalog holds: databases, each one's tables and functions, global temp views."""
    found: dict[str, set[str]] = {"": {str(r[0]) for r in _rows(spark, "SHOW DATABASES IN spark_catalog")}}
    for database in found[""]:
        found[f"tables:{database}"] = {str(r[1]) for r in _rows(spark, f"SHOW TABLES IN spark_catalog.`{database}`")}
        found[f"functions:{database}"] = {
            str(r[0]) for r in _rows(spark, f"SHOW USER FUNCTIONS IN spark_catalog.`{database}`") if "." in str(r[0])
        }
    global_temp = str(spark.conf.get("spark.sql.globalTempDatabase", "global_temp"))
    found["global"] = {str(r[1]) for r in _rows(spark, f"SHOW VIEWS IN `{global_temp}`")}
    return found


def _drop_newcatalog_objects(spark: Any, before: dict[str, set[str]]) -> None:
    after = catalog_objects(spark)
    for view in after["global"]:  # no run's global view outlives it (they are for one session's queries)
        with contextlib.suppress(Exception):
            spark.catalog.dropGlobalTempView(view)
    for database in sorted(after[""] - before[""]):
        with contextlib.suppress(Exception):
            spark.sql(f"DROP DATABASE IF EXISTS spark_catalog.`{database}` CASCADE")
    for database in after[""] & before[""]:
        for table in after.get(f"tables:{database}", set()) - before.get(f"tables:{database}", set()):
            with contextlib.suppress(Exception):
                spark.sql(f"DROP TABLE IF EXISTS spark_catalog.`{database}`.`{table}`")
            with contextlib.suppress(Exception):
                spark.sql(f"DROP VIEW IF EXISTS spark_catalog.`{database}`.`{table}`")
        for function in after.get(f"functions:{database}", set()) - before.get(f"functions:{database}", set()):
            with contextlib.suppress(Exception):
                spark.sql(f"DROP FUNCTION IF EXISTS {function}")
