"""The SparkSession a profile asks for: embedded local Spark by default, a cluster by config."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from framework import jvm
from framework.profiles import Profile

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")

#: The session this process started (the CLI stops it at exit; a session someone else made is left alone).
started_here: SparkSession | None = None

#: Settings every session gets unless the profile overrides them.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # delta-rs (and many Delta readers) refuse INT96 timestamps, Spark's Parquet default.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    # Frames the run persists (a step read twice, a step its expectations check) are read back
    # once or twice: building an uncompressed cache took half the time of a compressed one here
    # (1M rows: 1.6 s vs 3.3-4.1 s), for more memory. A profile can turn compression back on.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # PySpark records the Python call site of every DataFrame and Column call for Spark's own error
    # messages: four more round trips to the JVM per call (6100 vs 2730 calls to plan the SWA
    # benchmark's four micro-batches). Tributary's errors name the spec's file and line instead.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()}",
}


def spark_session(profile: Profile) -> SparkSession:
    """Start (or reuse) the session. Python workers use this interpreter, not `python3` on PATH."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    global started_here
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(profile.spark.app_name)
    if profile.spark.remote:
        builder = builder.remote(profile.spark.remote)
    elif profile.spark.master:
        builder = builder.master(profile.spark.master)
    conf = {**DEFAULT_CONF, **{k: _conf_value(v) for k, v in profile.spark.conf.items()}}
    if profile.spark.remote:
        conf = {k: v for k, v in conf.items() if not k.startswith(("spark.driver.", "spark.ui."))}
    elif jvm.enabled() and (functions_jar := jvm.jar()) is not None:
        conf["spark.jars"] = ",".join(filter(None, [conf.get("spark.jars"), str(functions_jar)]))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    started_here = spark
    if not profile.spark.remote:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop_started_session() -> None:
    global started_here
    if started_here is not None:
        try:
            started_here.stop()
        finally:
            started_here = None


def _conf_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
