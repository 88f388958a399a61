"""Functions Tributary runs inside Spark's JVM, shipped as Java source and compiled at first use.

Why: SWA's rule is a sequential fold per key. As a running-window aggregate in the JVM it runs in
the pass that sorts each key's tuples, with no hand-off to Python, and the window keeps the
shuffle's partitioning, so the windows' aggregates need no second shuffle. Each task numbers the
lines of the file splits it reads (`LineNumber`), in one scan, and a text source's pattern matches
each line once for all its groups (`RegexGroups`). A text source's bad lines are kept as the run
reads them (`BadRecords`), so the quarantine reads the source again only when there are many.

Why source and not a jar: nothing binary in the repository, and no Maven repository is reachable.
The jar is built with the JDK's `javac` against the jars pyspark ships, once per source and Spark
version, and added to the sessions Tributary starts (`spark.jars`, so a cluster's executors get
it too). On Spark Connect there is no py4j gateway to hand the server a function object: the client
uploads the jar as a session artifact (`addArtifacts`) and names the fold's SQL form
(`SwaFoldFunction`) with `CREATE TEMPORARY FUNCTION`, the one way a Connect client registers a JVM
aggregate. Without `javac`, with TRIBUTARY_JVM=0, in a session started without the jar, or on a
Connect server that refuses the artifact, the operators fold in pandas instead, with the same results,
and text is read and parsed with Spark's own functions (framework.io.origin, framework.io.text_source).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

log = logging.getLogger(__name__)

SOURCES = Path(__file__).parent
_JAVA_FILES = sorted(SOURCES.glob("*.java"))  # package tributary; javac lays out the classes


def enabled() -> bool:
    """TRIBUTARY_JVM=0 turns the JVM functions off (the pandas folds run instead)."""
    return os.environ.get("TRIBUTARY_JVM", "1") != "0"


@cache
def jar() -> Path | None:
    """The compiled jar, built now if this source and Spark version have none yet; None when it
    cannot be built (no javac, or a compile error, which is logged)."""
    return find_or_build((SOURCES / "build", Path(tempfile.gettempdir()) / f"tributary-jvm-{os.getuid()}"), shutil.which("javac"))


def find_or_build(folders: tuple[Path, ...], javac: str | None) -> Path | None:
    """The jar of this source and Spark version in the first folder that has it, else built into
    the first writable folder. A jar is taken only from a folder nobody else could have put it in
    (`_safe`): it runs inside Spark's JVM, and the shared temporary folder is everyone's."""
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for source in _JAVA_FILES:
        digest.update(source.read_bytes())
    name = f"tributary-jvm-{digest.hexdigest()[:12]}.jar"
    for folder in folders:
        if (folder / name).is_file() and _safe(folder) and _safe(folder / name):
            return folder / name
    if javac is None:
        log.warning("javac not found: SWA folds in pandas (install a JDK for the faster JVM fold)")
        return None
    for folder in folders:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _safe(folder):
                continue
            return _build(javac, folder / name, Path(pyspark.__file__).parent / "jars")
        except PermissionError:
            continue
        except subprocess.CalledProcessError as e:
            log.warning("could not compile %s: %s", SOURCES, e.stderr.strip())
            return None
    return None


def _safe(path: Path) -> bool:
    """Owned by this user or by root, and writable by nobody else."""
    try:
        info = path.stat()
    except OSError:
        return False
    return info.st_uid in (os.getuid(), 0) and not info.st_mode & 0o022


def _build(javac: str, target: Path, spark_jars: Path) -> Path:
    """Compile into a temporary folder and zip the classes; the jar appears whole or not at all
    (os.replace), so two processes building at once cannot see half a jar."""
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        classes = Path(work) / "classes"
        command = [javac, "-nowarn", "--release", "17", "-cp", f"{spark_jars}/*", "-d", str(classes), *map(str, _JAVA_FILES)]
        subprocess.run(command, check=True, capture_output=True, text=True)
        staged = Path(work) / target.name
        with zipfile.ZipFile(staged, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        os.replace(staged, target)
    return target


def _jvm_class(spark: SparkSession, name: str) -> Any:  # a py4j JavaClass or None
    """Tributary's JVM class `name` in this session, or None when the session has no JVM functions
    (TRIBUTARY_JVM=0, or a session started without the jar)."""
    from py4j.java_gateway import JavaClass

    if not enabled():
        return None
    try:
        found = getattr(spark.sparkContext._jvm.tributary, name)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - Spark Connect: no JVM on this side
        return None
    return found if isinstance(found, JavaClass) else None


def is_connect(spark: SparkSession) -> bool:
    """A Spark Connect session: its plans go to a server over gRPC, and this process holds no JVM."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


#: The SQL name of the fold's SQL form (a temporary function of the session)
SQL_FOLD = "tributary_swa_fold"
#: Connect sessions (by id) that hold the jar as an artifact, and the jar they hold
_connect_sessions: dict[str, Path] = {}


def sql_fold(spark: SparkSession, micros: Column, size: Column, timeout_micros: Column) -> Column:
    """The fold through its SQL form (`SwaFoldFunction`, named by CREATE TEMPORARY FUNCTION) in a
    session whose class path has the jar; the struct swa_fold gives."""
    from pyspark.sql import functions as F

    spark.sql(f"CREATE OR REPLACE TEMPORARY FUNCTION {SQL_FOLD} AS 'tributary.SwaFoldFunction'")
    return F.call_function(SQL_FOLD, micros.cast("long"), size.cast("long"), timeout_micros.cast("long"))


def _connect_artifact(spark: SparkSession) -> bool:
    """Whether this Spark Connect session holds the jar, uploaded as a session artifact once per
    session; False when there is no jar or the server refuses it (logged)."""
    if not enabled() or (functions_jar := jar()) is None:
        return False
    session_id = str(spark.session_id)  # type: ignore[attr-defined]
    try:
        if _connect_sessions.get(session_id) != functions_jar:
            spark.addArtifacts(str(functions_jar))  # type: ignore[attr-defined]
            _connect_sessions[session_id] = functions_jar
        return True
    except Exception as e:  # noqa: BLE001 - a server that takes no artifacts: no JVM functions
        log.warning("the Spark Connect server did not take %s (%s): no JVM functions", functions_jar.name, e)
        return False


def _connect_fold(spark: SparkSession, micros: Column, size: Column, timeout_micros: Column) -> Column | None:
    """The fold on a Spark Connect session through its SQL form; None when the session cannot
    hold the jar (the pandas fold runs instead)."""
    return sql_fold(spark, micros, size, timeout_micros) if _connect_artifact(spark) else None


def swa_fold(spark: SparkSession, size: int, timeout_micros: int, micros: Column) -> Column | None:
    """The SWA fold as an aggregate over `micros`, the event time in micros (`tributary.SwaFold`), to
    use over a running frame: a struct (_1: the window's ordinal within its key, _2: its start,
    _3: the tuple's position in it); None when the session has no JVM functions."""
    from pyspark.sql import functions as F

    if is_connect(spark):
        return _connect_fold(spark, micros, F.lit(size), F.lit(timeout_micros))
    jvm_class = _jvm_class(spark, "SwaFold")
    if jvm_class is None:
        return None
    name = f"tributary_swa_fold_{size}_{timeout_micros}"
    spark._jsparkSession.udf().register(name, jvm_class.function(size, timeout_micros))
    return F.call_function(name, micros)


def swa_fold_sized(spark: SparkSession, micros: Column, size: Column, timeout_micros: Column) -> Column | None:
    """`swa_fold` with the size and timeout read from each tuple (`tributary.SwaFoldSized`): for
    windows sized per key. None when the session has no JVM functions."""
    from pyspark.sql import functions as F

    if is_connect(spark):
        return _connect_fold(spark, micros, size, timeout_micros)
    jvm_class = _jvm_class(spark, "SwaFoldSized")
    if jvm_class is None:
        return None
    spark._jsparkSession.udf().register("tributary_swa_fold_sized", jvm_class.function())
    return F.call_function("tributary_swa_fold_sized", micros, size, timeout_micros)


def _function(spark: SparkSession, name: str, returns: str) -> str | None:
    """The SQL name of Tributary's JVM scalar function `name` (a class implementing one of Spark's
    UDF interfaces), registered in this session; None when the session has no JVM functions."""
    if is_connect(spark):
        if not _connect_artifact(spark):
            return None
    elif _jvm_class(spark, name) is None:
        return None
    sql_name = f"tributary_{name.lower()}"
    spark.udf.registerJavaFunction(sql_name, f"tributary.{name}", returns)  # a Connect client can too
    return sql_name


def line_number(spark: SparkSession, file: Column, split_start: Column) -> Column | None:
    """Each line's 1-based number in its file, for lines read by Spark's line reader, split by split
    (`tributary.LineNumber`, over `_metadata.file_path` and `_metadata.file_block_start`); None when
    the session has no JVM functions (framework.io.origin: how lines are numbered then)."""
    from pyspark.sql import functions as F

    if (name := _function(spark, "LineNumber", "int")) is None:
        return None
    return F.call_function(name, file, split_start, F.spark_partition_id())


def regex_groups(spark: SparkSession, value: Column, pattern: str) -> Column | None:
    """The texts of every group of the pattern's first match in `value` ("" for a group that took
    no part), null when it does not match: one match where rlike and regexp_extract take one per
    group and one more (`tributary.RegexGroups`); None when the session has no JVM functions."""
    from pyspark.sql import functions as F

    if (name := _function(spark, "RegexGroups", "array<string>")) is None:
        return None
    return F.call_function(name, value, F.lit(pattern))


def bad_records(spark: SparkSession, file: Column, line: Column, record: Column, reason: Column) -> Column | None:
    """An aggregate for an Observation: the rows whose `reason` is not null, as a JSON array of
    [file, line, record, reason], or null past 10,000 rows or 16 MB (`tributary.BadRecords`); None
    when the session has no JVM functions, or on Spark Connect (no function object to hand over)."""
    from pyspark.sql import functions as F

    jvm_class = None if is_connect(spark) else _jvm_class(spark, "BadRecords")
    if jvm_class is None:
        return None
    spark._jsparkSession.udf().register("tributary_bad_records", jvm_class.function())
    inputs = [F.when(reason.isNotNull(), c) for c in (file, line.cast("long"), record, reason)]  # a good row: nulls
    return F.call_function("tributary_bad_records", *inputs)
