"""Spark's Python daemon for embedded Spark: its workers import PySpark as installed, from bytecode.

Spark starts its Python daemon (and so every worker it forks) with PySpark's source zip first on
the path (`pyspark/python/lib/pyspark.zip` and py4j's), and Python caches no bytecode for what it
imports from a zip: each new Python process compiled PySpark's modules again. Measured here,
`import pyspark.daemon` took 1.05 s of CPU from the zip against 0.25 s as installed, and a pandas
UDF worker's imports 1.9 s against 0.8 s. A `tributary test` starts about a dozen such processes
on a 2-core machine.

This module is the daemon Spark runs for embedded Spark (`spark.python.daemon.module`, set by
framework.engine.session): it takes the zips off the path when they are the very PySpark
installed beside this interpreter (the zip ships inside that package, so nothing changes but
where the same code is read from), then runs PySpark's own daemon. The workers it forks inherit
the path. A cluster keeps PySpark's daemon: its executors need not have Tributary installed.
"""

from __future__ import annotations

import os


def without_spark_zips(path: list[str]) -> list[str]:
    """`path` without PySpark's and py4j's source zips, when both packages are importable without
    them and each zip lies inside the installed PySpark (Spark's own copy of that installation)."""
    zips = [p for p in path if os.path.basename(p) == "pyspark.zip" or os.path.basename(p).startswith("py4j-")]
    if not zips:
        return list(path)
    rest = [p for p in path if p not in zips]
    installed = _package_dir("pyspark", rest)
    if installed is None or _package_dir("py4j", rest) is None:
        return list(path)
    if not all(os.path.realpath(z).startswith(os.path.realpath(installed) + os.sep) for z in zips):
        return list(path)  # another Spark's zips (SPARK_HOME elsewhere): its workers must match its JVM
    return rest


def _package_dir(name: str, path: list[str]) -> str | None:
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(name, path)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def main() -> None:
    import sys

    sys.path[:] = without_spark_zips(sys.path)
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
