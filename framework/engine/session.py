"""The SparkSession a profile asks for: embedded local Spark by default, a cluster by config."""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from framework import cluster_auth, jvm
from framework.engine import connect_server, ctrl_c
from framework.profiles import Profile

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_LOG_CONFIG = Path(__file__).with_name("log4j2.properties")

#: The session this process started (the CLI stops it at exit; a session someone else made is left alone).
started_here: SparkSession | None = None

CODEGEN_CACHE = "spark.sql.codegen.cache.maxEntries"  # a server's own: the Connect servers Tributary starts set it too
SORT_AGGREGATE = "spark.sql.execution.replaceHashWithSortAgg"

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
    # The embedded engine keeps streaming state (join buffers, aggregation state) in the driver's
    # heap; Spark's 1 GB default ran out on the contact-join benchmark (300k people, one
    # micro-batch) once time joins carried a bucket. Set only when Spark starts the JVM here.
    "spark.driver.memory": "2g",
    # Spark keeps 100 compiled classes of generated code by default. One micro-batch of a stream
    # with a count-window join runs more than 100 (its jobs number, checkpoint, cache and join the
    # rows), so the cache evicted each class before the next micro-batch needed it again, and every
    # micro-batch compiled ~110 classes anew (36 with room for them). A process running several
    # pipelines (the warm engine, a scheduler, the tests) meets the same.
    CODEGEN_CACHE: "1000",
    # An aggregation whose rows already come sorted by its grouping columns runs as one sort
    # aggregate, each group aggregated as its rows stream past, instead of a partial and a final
    # hash aggregation in the same task with every buffer serialised between them. SWA's windows
    # come that way (framework.operators.keyed_windows.unit_rows): 12 % off a streaming SWA run
    # of the benchmark (6.9 s against 7.8 s, medians of 6 alternated rounds, 2026-12-06). Only a
    # plan whose rows are sorted anyway changes, and only in how it aggregates them.
    SORT_AGGREGATE: "true",
}

#: Settings no profile can override, set on every session Tributary starts or is given (guard):
#: Spark's `${env:...}` / `${system:...}` substitution would rewrite the SQL text after Tributary
#: rendered it, so a var holding `${env:SECRET}` would reach the table as the engine's environment.
GUARDS: dict[str, str] = {"spark.sql.variable.substitute": "false"}

#: Settings a Spark Connect server fixes when it starts: a client's session cannot change them
_SERVER_CONF = ("spark.driver.", "spark.ui.", "spark.python.sql.dataFrameDebugging.enabled", "spark.sql.codegen.cache.")

#: PySpark's own loggers that print an error's query context to stderr as JSON
_PYSPARK_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def default_log_file() -> Path:
    """Where Spark's log goes when the caller names no file (a session shared by several runs)."""
    return Path(tempfile.gettempdir()) / "tributary-logs" / f"spark-{os.getpid()}.log"


def _this_threads_session() -> SparkSession | None:
    """The session this thread made active, as the JVM keeps it per thread.

    PySpark's `getActiveSession()` answers with the session any thread made active last in
    Python: `createDataFrame` makes its session active, and a stream's micro-batch that makes a
    DataFrame (an SWA stream's first state) does so on the stream's own session, in a thread of
    Spark's. The next run in this process then got that session, with the confs the stream set
    (`partitions:`) and without those set on this thread's session since."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is None or not hasattr(active, "_jsparkSession"):  # none, or Spark Connect's (one per thread)
        return active
    kept = SparkSession._get_j_spark_session_class(active._jvm).getActiveSession()
    if not kept.isDefined() or active._jsparkSession.equals(kept.get()):
        return active
    return SparkSession(active.sparkContext, kept.get())


def spark_session(profile: Profile, log_file: Path | None = None, java_options: str = "") -> SparkSession:
    """Start (or reuse) the session. Python workers use this interpreter, not `python3` on PATH.

    Spark's errors and their Java stacks go to `log_file` (framework/engine/log4j2.properties),
    not the console: a failed run says what failed in one line and names the file. `java_options`
    go to the driver's JVM when it starts here (the warm engine's class archive)."""
    os.environ.setdefault("PYSPARK_PYTHON", _worker_python(profile))
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    global started_here
    active = _this_threads_session()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(profile.spark.app_name)
    if profile.spark.remote:
        connect_server.check(profile)
        builder = builder.remote(cluster_auth.connect_url(profile.spark.remote))  # with the token of a server of ours
    elif profile.spark.master:
        builder = builder.master(profile.spark.master)
    log = log_file or default_log_file()
    log.parent.mkdir(parents=True, exist_ok=True)
    logging_options = f"-Dlog4j2.configurationFile={_LOG_CONFIG.as_uri()} -Dtributary.log.file={_java_option(str(log))}"
    own = {k: _conf_value(v) for k, v in profile.spark.conf.items()}
    # a profile's own driver options (a time zone, a heap flag) come after Tributary's, so they add
    # to the log settings (and can override one of them) instead of replacing them all
    driver_options = " ".join(filter(None, [logging_options, java_options, own.pop("spark.driver.extraJavaOptions", "")]))
    conf = {**defaults_for(own), "spark.driver.extraJavaOptions": driver_options, **own, **GUARDS}
    if profile.spark.remote:
        # the server's own: its driver, its UI and its static confs (a session cannot set them)
        conf = {k: v for k, v in conf.items() if not k.startswith(_SERVER_CONF)}
    else:
        if jvm.enabled() and (functions_jar := jvm.jar()) is not None:
            conf["spark.jars"] = ",".join(filter(None, [conf.get("spark.jars"), str(functions_jar)]))
    for key, value in conf.items():
        builder = builder.config(key, value)
    with cluster_auth.submit_args(None if profile.spark.remote else profile.spark.master):  # a local cluster's secret
        spark = builder.getOrCreate()
    started_here = spark
    if profile.spark.remote:
        connect_server.watch(spark, profile)
    else:
        spark.sparkContext.setLogLevel("ERROR")
        ctrl_c.take_over_from_pyspark(spark)  # Ctrl-C cancels the jobs without two py4j tracebacks
    _log_pyspark_to(log)
    return spark


def defaults_for(own: dict[str, str]) -> dict[str, str]:
    """DEFAULT_CONF for a profile with these settings of its own. With a Hive catalog, Spark keeps
    its hash aggregation: in Spark 4.2 a Hive UDAF that keeps one kind of buffer for rows and
    another for merging fails in the one-pass aggregate (SPARK-58294, fixed after 4.2)."""
    if own.get("spark.sql.catalogImplementation") == "hive":
        return {k: v for k, v in DEFAULT_CONF.items() if k != SORT_AGGREGATE}
    return DEFAULT_CONF


def _worker_python(profile: Profile) -> str:
    """The interpreter Spark starts its Python processes with: this one, through
    framework.engine.worker_python when Spark runs them on this machine (a `local` master) and
    Tributary is installed beside it (they then import PySpark from its bytecode, not its zip)."""
    if (profile.spark.master or "local[*]").startswith("local") and not profile.spark.remote:
        from framework.engine.worker_python import script

        found = script()
        if found is not None:
            return str(found)
    return sys.executable


def guard(spark: SparkSession) -> None:
    """Set GUARDS on a session (one started elsewhere, or one a profile's conf reached first)."""
    for key, value in GUARDS.items():
        spark.conf.set(key, value)


def spark_log_file(spark: SparkSession) -> str | None:
    """The file the session's JVM logs to (None on Spark Connect, or a session started elsewhere)."""
    try:
        return spark.sparkContext._jvm.java.lang.System.getProperty("tributary.log.file")  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - Spark Connect has no JVM on this side
        return None


def _log_pyspark_to(log: Path) -> None:
    from pyspark.logger import PySparkLogger

    for name in _PYSPARK_LOGGERS:
        logger = PySparkLogger.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(logging.FileHandler(log))
        logger.propagate = False


def _java_option(value: str) -> str:
    """A -D value Spark splits correctly even with spaces in it."""
    return f'"{value}"' if any(c.isspace() for c in value) else value


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
