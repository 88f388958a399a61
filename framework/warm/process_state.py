"""What a run may change in the warm engine's process that no Spark session holds, put back after it.

Why: a run's session is its own (framework.warm.isolation), but a project's udfs/ code is imported
in the engine's process and may change what every later run shares: the SIGINT handler (a module
that ignores Ctrl-C turned it off for every later run, which then committed when its user had
interrupted it), the Hadoop configuration of the SparkContext (where a credential goes), JVM
system properties, the main thread's job properties (they reach every task), files, jars and
Python modules shipped to the executors, the checkpoint folder.

The engine takes this state once, when it is ready, and after each run puts back what can be put
back: the signal handlers, the Hadoop settings, the system properties and the thread's job
properties. What Spark cannot take back (a file, jar, archive or Python module shipped to the
executors, a checkpoint folder set) is named instead, and the engine ends after that run: the
next command starts a new one. Python state a module changes in other modules (an attribute set
on `json`) is not seen here: udfs/ code is the project's own (docs/security.md).
"""

from __future__ import annotations

import contextlib
import signal
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class ProcessState:
    handlers: dict[int, Any]  # signal number -> handler
    hadoop: dict[str, str]  # the SparkContext's Hadoop configuration, raw values
    system_properties: Any  # a copy of the JVM's System properties (a java.util.Properties)
    job_properties: Any  # a copy of the main thread's SparkContext local properties
    shipped: dict[str, str]  # what Spark cannot take back, as text to compare

    @classmethod
    def of(cls, spark: Any) -> ProcessState:
        """The state now (on the main thread: the signal handlers and job properties are its)."""
        jvm, sc = spark._jvm, spark.sparkContext._jsc.sc()
        return cls(
            handlers={signum: signal.getsignal(signum) for signum in SIGNALS},
            hadoop=hadoop_settings(spark),
            system_properties=jvm.java.lang.System.getProperties().clone(),
            job_properties=sc.getLocalProperties().clone(),
            shipped=shipped(spark),
        )

    def restore(self, spark: Any) -> list[str]:
        """Put back what a run changed; returns what it changed that cannot be put back."""
        for signum, handler in self.handlers.items():
            if signal.getsignal(signum) is not handler and handler is not None:
                signal.signal(signum, handler)
        jvm, sc = spark._jvm, spark.sparkContext._jsc.sc()
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        now = hadoop_settings(spark)
        for key in now.keys() - self.hadoop.keys():
            conf.unset(key)
        for key, value in self.hadoop.items():
            if now.get(key) != value:
                conf.set(key, value)
        if not jvm.java.lang.System.getProperties().equals(self.system_properties):
            jvm.java.lang.System.setProperties(self.system_properties.clone())
        if not sc.getLocalProperties().equals(self.job_properties):
            sc.setLocalProperties(self.job_properties.clone())
        now_shipped = shipped(spark)
        return [what for what, value in self.shipped.items() if now_shipped.get(what) != value]


def hadoop_settings(spark: Any) -> dict[str, str]:
    """The SparkContext's Hadoop configuration as it is written (one call into the JVM, not one per key)."""
    writer = spark._jvm.java.io.StringWriter()
    spark.sparkContext._jsc.hadoopConfiguration().writeXml(writer)
    found = {}
    for prop in ET.fromstring(str(writer.toString())).iter("property"):
        name, value = prop.findtext("name"), prop.findtext("value")
        if name is not None:
            found[name] = value or ""
    return found


def shipped(spark: Any) -> dict[str, str]:
    sc = spark.sparkContext
    jsc = sc._jsc.sc()
    texts: dict[str, Callable[[], Any]] = {
        "files added to the executors": jsc.listFiles,
        "jars added to the executors": jsc.listJars,
        "archives added to the executors": jsc.listArchives,
        "Python files added to the executors": lambda: sorted(sc._python_includes or []),
        "the checkpoint folder": jsc.getCheckpointDir,
    }
    found = {}
    for what, read in texts.items():
        with contextlib.suppress(Exception):
            found[what] = str(read())
    return found
