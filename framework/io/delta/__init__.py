"""Delta tables: one interface (base.DeltaStore) over two writers, and the choice between them.

- delta_rs: delta-rs (`deltalake`), the embedded default; needs no JVM jars.
- delta_spark: Spark's own Delta writer, when the delta-spark jars are on the classpath (a cluster).

Spark writes the Parquet files either way; the store commits them in one Delta transaction.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from framework.errors import BadInput, Problem
from framework.io.delta.base import CommitResult, DeltaStore, StagedWrite, WriteMode

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CommitResult", "DeltaStore", "StagedWrite", "WriteMode", "choose_store", "has_delta_jars", "local_store"]


def choose_store(spark: SparkSession | None, preference: str, storage_options: dict[str, str] | None = None) -> DeltaStore:
    """Spark's Delta writer when its jars are on the classpath (or the profile asks), else delta-rs."""
    if preference == "delta-rs" or spark is None:
        return local_store(storage_options)
    if preference == "spark" and not has_delta_jars(spark):
        raise BadInput(
            Problem(
                "the profile says delta_writer: spark, but Delta Lake's Spark jars are not on this Spark's class path "
                "(pyspark does not include them)",
                hint="add them to the profile's spark.conf (spark.jars.packages: io.delta:delta-spark_2.13:<version>, "
                "or spark.jars with the files), or write with delta-rs: delta_writer: auto",
            )
        )
    if preference == "spark" or has_delta_jars(spark):
        from framework.io.delta.delta_spark import SparkDeltaStore

        return SparkDeltaStore(spark)
    return local_store(storage_options)


def local_store(storage_options: dict[str, str] | None = None) -> DeltaStore:
    """delta-rs: reads and writes tables without a JVM (the CLI's listings, the run log)."""
    from framework.io.delta.delta_rs import DeltaRsStore

    return DeltaRsStore(storage_options or {})


#: has_delta_jars per session: a JVM's classpath does not change, and asking costs a round trip
#: through py4j (~0.1 s on a busy machine) for every store chosen (each test, each delivery of a scenario)
_jars_known: weakref.WeakKeyDictionary[SparkSession, bool] = weakref.WeakKeyDictionary()


def has_delta_jars(spark: SparkSession) -> bool:
    """True when Spark's own Delta implementation is on the classpath (a cluster with delta-spark jars)."""
    try:
        known = _jars_known.get(spark)
    except TypeError:  # a session that cannot be weakly referenced: asked each time
        return _has_delta_jars(spark)
    if known is None:
        known = _jars_known[spark] = _has_delta_jars(spark)
    return known


def _has_delta_jars(spark: SparkSession) -> bool:
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - Spark Connect has no JVM on this side; trust the server's extensions
        return "DeltaSparkSessionExtension" in (spark.conf.get("spark.sql.extensions", "") or "")
    if jvm is None:
        return False
    try:
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
        return True
    except Exception:  # noqa: BLE001 - ClassNotFoundException through py4j
        return False
