"""A class-data-sharing archive of Spark's classes, so a new engine's JVM starts faster.

Why: most of a JVM's start-up with Spark is loading and verifying some 15,000 classes (the
SparkContext, then Catalyst's analyzer and code generation at the first query). Java's
application class-data sharing (AppCDS, JDK 13+) maps classes a previous JVM loaded from an
archive instead: on this machine a session and its first query started about 30 % faster with one.

How: the first engine runs with -XX:ArchiveClassesAtExit and writes the archive when its JVM
exits (an engine stopping waits for that, then moves the file into place whole); later engines
start with -XX:SharedArchiveFile. The archive is named by a digest of the Java runtime and
pyspark's jars and their folder (the class path it records), so a new JDK, Spark or venv gets a
new one; a JVM that cannot use an archive starts
without it, as before. It lives in the user's cache folder ($XDG_CACHE_HOME/tributary, about
150 MB), never in a folder other users can write (a class archive is code).
TRIBUTARY_CLASS_ARCHIVE=0 turns it off (the test suite does: an archive takes seconds to write).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

#: the JVM's messages about classes it cannot archive go nowhere (there are hundreds)
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def folder() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "tributary"


def archive_path() -> Path | None:
    """Where this Java and Spark's archive is, or None when there is none to use."""
    java = shutil.which("java")
    if java is None or os.environ.get("TRIBUTARY_CLASS_ARCHIVE", "1") == "0":
        return None
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    digest = hashlib.sha256(os.path.realpath(java).encode())
    digest.update(f"{pyspark.__version__}:{jars}".encode())  # the archive records the class path it was made with
    for jar in sorted(jars.glob("*.jar")):
        digest.update(f"{jar.name}:{jar.stat().st_size};".encode())
    return folder() / f"spark-classes-{digest.hexdigest()[:16]}.jsa"


def java_options(path: Path | None) -> tuple[str, Path | None]:
    """The JVM options for an engine, and the file its JVM writes at exit (None: it writes none)."""
    if path is None:
        return "", None
    if path.is_file():
        return f"-XX:SharedArchiveFile={path} {_QUIET}", None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return "", None
    written = path.with_name(f"{path.name}.{os.getpid()}")
    return f"-XX:ArchiveClassesAtExit={written} {_QUIET}", written


#: archives kept (each venv or Spark has its own): the newest few, so old venvs' do not pile up
KEEP = 3


def keep(written: Path | None, path: Path | None) -> None:
    """After the JVM exited: the archive it wrote takes its place (whole, or not at all), and
    archives beyond the newest KEEP are removed."""
    if written is None or path is None:
        return
    try:
        if written.is_file() and written.stat().st_size > 0:
            os.replace(written, path)
        archives = sorted(path.parent.glob("spark-classes-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in archives[KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
    finally:
        written.unlink(missing_ok=True)
