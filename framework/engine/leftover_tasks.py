"""Spark tasks that go on after their job was cancelled, and the one remedy that always works.

Why: cancelling a job interrupts its task threads, and most work stops at once. Java code that
never checks for interrupts does not: a regular expression backtracking over a 41-character line
(`line rlike '^(.*a){12}$'`) kept a core at ~90 % for as long as it took, while Spark already
reported the job cancelled, no active job, and the executor's running-task count back at zero.
Spark's task reaper (spark.task.reaper.*) would end such an executor's JVM, but not in local mode,
where the executor is the driver: it logs "not killing JVM because we are running in local
mode". So a process that owns a local session (the warm engine, the scheduler) asks the JVM which
task threads still run a task and, when some do after a grace period, ends that JVM: the next
run starts on free cores.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

#: how long cancelled tasks get to stop before their JVM is ended
GRACE_S = 10.0
_TASK_THREAD = "Executor task launch worker"
_RUNNING_TASK = "org.apache.spark.executor.Executor$TaskRunner"


def running_tasks(spark: Any) -> list[str]:
    """Names of the JVM threads running a Spark task now (empty on Spark Connect or a dead JVM)."""
    try:
        jvm = spark.sparkContext._jvm
        threads = jvm.java.lang.management.ManagementFactory.getThreadMXBean().dumpAllThreads(False, False)
        running = []
        for info in threads:
            name = str(info.getThreadName())
            if _TASK_THREAD in name and any(str(frame.getClassName()) == _RUNNING_TASK for frame in info.getStackTrace()):
                running.append(name)
        return running
    except Exception:  # noqa: BLE001 - no JVM on this side, or it is gone
        return []


def wait_until_stopped(spark: Any, within_s: float = GRACE_S) -> list[str]:
    """Wait up to `within_s` for every running task to end; the ones still running then."""
    deadline = time.monotonic() + within_s
    while True:
        left = running_tasks(spark)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.25)


def end_jvm() -> None:
    """Kill this process's Spark JVM at once (a task in it cannot be stopped), and forget it, so a
    new session here starts a new JVM. Sessions and DataFrames of the old one are unusable."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is not None:
        with contextlib.suppress(Exception):
            process.kill()
            process.wait(30)
    if gateway is not None:
        with contextlib.suppress(Exception):
            gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
