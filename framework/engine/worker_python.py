"""The Python interpreter embedded Spark starts: PySpark imported as installed, from bytecode.

Spark starts every Python process of its own (the daemon that forks the udf workers, and, each
time a query plans or starts a Python data source, a process of its own for it) with PySpark's
source zip first on the path (`pyspark/python/lib/pyspark.zip` and py4j's), and Python caches no
bytecode for what it imports from a zip: each of them compiled PySpark's modules again. Measured
here, `import pyspark.daemon` took 1.05 s of CPU from the zip against 0.25 s as installed, a pandas
udf worker's imports 1.9 s against 0.8 s, and a chained step's reader (a Python data source,
framework.io.delta_stream) took 1.0 s to start on each run instead of 0.6 s through this module.
A cold `tributary test` starts about twenty such processes on a 2-core machine.

`tributary-python` (this module's `main`, a console script beside the interpreter) is the
interpreter Spark is given for a `local` master (PYSPARK_PYTHON, set by framework.engine.session):
it takes the zips off PYTHONPATH when they are the very PySpark installed beside the interpreter
(the zip ships inside that package, so nothing changes but where the same code is read from),
then replaces itself with the interpreter (exec: same process, same arguments). A cluster keeps
the plain interpreter: its executors need not have Tributary installed.

Only the standard library is imported here: this runs before every Python process Spark starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SCRIPT = "tributary-python"


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


def script() -> Path | None:
    """This interpreter's `tributary-python`, when Tributary is installed beside it."""
    found = Path(sys.executable).with_name(SCRIPT)
    return found if found.is_file() and os.access(found, os.X_OK) else None


def main() -> None:
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    dropped = {os.path.abspath(p) for p in set(sys.path) - set(without_spark_zips(sys.path))}
    kept = [p for p in entries if os.path.abspath(p) not in dropped]
    if kept != entries:
        if kept:
            os.environ["PYTHONPATH"] = os.pathsep.join(kept)
        else:
            del os.environ["PYTHONPATH"]
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])


if __name__ == "__main__":
    main()
