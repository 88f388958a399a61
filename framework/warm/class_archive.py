"""A class-data-sharing archive of Spark's classes, so a new engine's JVM starts faster.

Why: most of a JVM's start-up with Spark is loading and verifying some 15,000 classes (the
SparkContext, then Catalyst's analyzer and code generation at the first query). Java's
application class-data sharing (AppCDS, JDK 10+) maps classes from an archive instead: here the
example's first run through a new engine took 7.0–7.4 s with one against 11.3–13.1 s without.

How: the first engine's JVM only lists the classes it loads (-XX:DumpLoadedClassList, no
measurable cost). When that engine has stopped and its JVM exited, a detached, low-priority
process builds the archive from the list (java -Xshare:dump with the JVM's own class path and
module options: about 40 s of CPU while nobody waits on it) and moves it into place whole; later
engines start with -XX:SharedArchiveFile. Before, the first engine wrote a dynamic archive as it
ran (-XX:ArchiveClassesAtExit), which made the very first run on a machine 3–8 s slower than no
engine at all. The archive is named by a digest of the Java runtime and pyspark's jars and their
folder (the class path it records), so a new JDK, Spark or venv gets a new one; a JVM that cannot
use an archive starts without it, as before. It lives in the user's cache folder
($XDG_CACHE_HOME/tributary, about 190 MB), never in a folder other users can write (a class
archive is code). TRIBUTARY_CLASS_ARCHIVE=0 turns it off (the test suite does).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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


def using_options() -> str:
    """The JVM options that map this Java and Spark's archive when there is one (a JVM started by a
    command, not an engine: it uses an archive, only engines list the classes to make one)."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {_QUIET}" if path is not None and path.is_file() else ""


def java_options(path: Path | None) -> tuple[str, Path | None]:
    """The JVM options for an engine, and the class list its JVM writes (None: it lists none)."""
    if path is None:
        return "", None
    if path.is_file():
        return f"-XX:SharedArchiveFile={path} {_QUIET}", None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        for stale in _lists(path, fresh=False):  # of engines killed before they stopped
            stale.unlink(missing_ok=True)
    except OSError:
        return "", None
    return f"-XX:DumpLoadedClassList={listed(path)}", listed(path)


def listed(path: Path) -> Path:
    """The class list of this process's engine, for the archive at `path`."""
    return path.with_name(f"{path.name}.{os.getpid()}{_LIST}")


def being_written(path: Path) -> bool:
    """True while a class list waits to become the archive at `path` (a writer is at work)."""
    return any(_lists(path, fresh=True))


def _lists(path: Path, fresh: bool) -> list[Path]:
    """The class lists for `path` changed within the last hour (fresh) or before it."""
    now = time.time()
    found = []
    for class_list in path.parent.glob(f"{path.name}.*{_LIST}"):
        try:
            if (now - class_list.stat().st_mtime < _LIST_LIFE_S) == fresh:
                found.append(class_list)
        except OSError:
            continue
    return found


#: the JVM options an archive must be built with to be usable by the JVM that listed its classes
_MODULE_OPTIONS = ("--add-modules", "--add-opens", "--add-exports", "--add-reads", "--enable-native-access")
_LIST = ".classes"
_LIST_LIFE_S = 3600  # a list older than this belongs to an engine that was killed


def dump_command(jvm: Any, class_list: Path, path: Path) -> list[str]:  # py4j's JVM view
    """The command that builds the archive at `path` from `class_list`, as the running `jvm` would
    need it: its own java, class path and module options (read from the JVM, not guessed)."""
    system = jvm.java.lang.System
    arguments = [str(a) for a in jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()]
    return [
        str(Path(system.getProperty("java.home")) / "bin" / "java"),
        "-Xshare:dump",
        f"-XX:SharedClassListFile={class_list}",
        f"-XX:SharedArchiveFile={path.with_name(f'{path.name}.{os.getpid()}')}",
        "-XX:+IgnoreUnrecognizedVMOptions",
        *(a for a in arguments if a.startswith(_MODULE_OPTIONS)),
        "-Xlog:disable",
        "-cp",
        str(system.getProperty("java.class.path")),
    ]


def write_later(command: list[str]) -> None:
    """Build the archive in a detached process at the lowest priority (the engine that listed the
    classes is stopping and must not wait for it)."""
    subprocess.Popen(  # our own module, its argument is the command above as JSON
        [sys.executable, "-m", "framework.warm.class_archive", json.dumps(command)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


#: archives kept (each venv or Spark has its own): the newest few, so old venvs' do not pile up
KEEP = 3


def _write(command: list[str]) -> None:
    """Run the dump; the archive takes its place whole, or not at all; the class list goes."""
    class_list = Path(next(a for a in command if a.startswith("-XX:SharedClassListFile=")).split("=", 1)[1])
    written = Path(next(a for a in command if a.startswith("-XX:SharedArchiveFile=")).split("=", 1)[1])
    path = written.with_name(written.name.rsplit(".", 1)[0])
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=600, check=False)
        if done.returncode == 0 and written.is_file() and written.stat().st_size > 0:
            os.replace(written, path)
        archives = sorted(path.parent.glob("spark-classes-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in archives[KEEP:]:
            old.unlink(missing_ok=True)
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        written.unlink(missing_ok=True)
        class_list.unlink(missing_ok=True)


if __name__ == "__main__":
    os.nice(19)  # the lowest priority: an analyst's next run goes first
    _write(json.loads(sys.argv[1]))
