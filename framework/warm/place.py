"""Where a warm engine lives and which engine a profile may use.

An engine is keyed by a hash of everything that shapes its SparkSession or the code it runs: the
profile's Spark settings (master, confs, app name), the Python interpreter, the environment
variables Spark and the JVM read, Tributary's version and a digest of its own source files (an
edited or upgraded framework gets a new engine; the old one stops when idle). The warehouse is
not part of the key: it is chosen per run, so one engine serves every project with the same
Spark settings.

Its files (socket, lock, status, log) live in a per-user folder with mode 0700:
$TRIBUTARY_RUNTIME_DIR, else $XDG_RUNTIME_DIR/tributary, else <tmp>/tributary-<uid>.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import framework
from framework.engine.jit import FIRST_TIER_ONLY
from framework.private_folder import NotPrivate, private_folder
from framework.profiles import Profile

#: environment variables that change the session an engine starts (its JVM, its Python workers)
SESSION_ENVIRONMENT = (
    "JAVA_HOME",
    "SPARK_HOME",
    "SPARK_CONF_DIR",
    "SPARK_LOCAL_IP",
    "HADOOP_CONF_DIR",
    "PYSPARK_PYTHON",
    "PYSPARK_DRIVER_PYTHON",
    "PYSPARK_SUBMIT_ARGS",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "PYTHONPATH",
    "TZ",
    "TRIBUTARY_JVM",
    "TRIBUTARY_ENGINE_JAVA_OPTIONS",
)
#: The engine's JVM compiles with C1 only. Measured here (2 cores, busy): a session started in
#: 7.8-10.0 s instead of 14.8-17.1 s and the example's first run took 10.6-11.7 s instead of
#: 18.6-18.9 s (the C2 compiler's threads compete for the two cores while it warms up), and its
#: reruns 2.2-3.0 s instead of 2.9-6.3 s; the price is on long runs: the SWA example on 171k
#: tuples reran in 31-34 s instead of 27-28 s. The edit-run loop is short runs;
#: TRIBUTARY_ENGINE_JAVA_OPTIONS replaces this ("" for the full JIT).
DEFAULT_JAVA_OPTIONS = FIRST_TIER_ONLY  # with a code cache that does not fill (framework.engine.jit)
DEFAULT_IDLE_MINUTES = 15.0
#: a Unix socket's path is limited to 108 bytes on Linux
_SOCKET_PATH_LIMIT = 100


class EngineUnavailable(Exception):
    """The warm engine cannot be used here; the message says why (the command runs embedded)."""


def mode(profile: Profile, no_engine: bool = False) -> str | None:
    """Why this command runs without the warm engine, or None when it may use one. "" means
    silently (the user asked for it, or the profile is not local)."""
    if no_engine:
        return ""
    setting = os.environ.get("TRIBUTARY_ENGINE", "").strip().lower()
    if setting in ("0", "off", "no", "false", "embedded"):
        return ""
    if profile.engine == "embedded":
        return ""
    if profile.spark.remote or not (profile.spark.master or "").startswith("local"):
        return ""  # a cluster or Spark Connect: the session is remote already
    if not hasattr(os, "fork") or not hasattr(__import__("socket"), "AF_UNIX"):
        return "this platform has no Unix domain sockets"
    return None


def idle_minutes(profile: Profile) -> float:
    """How long an engine waits for work before it stops: $TRIBUTARY_ENGINE_IDLE (minutes) or the
    profile's engine_idle_minutes."""
    text = os.environ.get("TRIBUTARY_ENGINE_IDLE")
    if text:
        try:
            value = float(text)
        except ValueError:
            raise EngineUnavailable(f"TRIBUTARY_ENGINE_IDLE={text!r} is not a number of minutes") from None
        if value > 0:
            return value
        raise EngineUnavailable(f"TRIBUTARY_ENGINE_IDLE={text!r}: give a positive number of minutes")
    return profile.engine_idle_minutes


def java_options() -> str:
    """The engine JVM's own options (its JIT), besides the class archive's."""
    return os.environ.get("TRIBUTARY_ENGINE_JAVA_OPTIONS", DEFAULT_JAVA_OPTIONS)


def settings_of(profile: Profile) -> dict[str, object]:
    """What the engine's session is made from: the profile's Spark section (env already expanded)."""
    return profile.spark.model_dump(mode="json")


def engine_key(profile: Profile) -> str:
    """16 hex digits naming the engine that may run this profile's commands."""
    shaping = {
        "spark": settings_of(profile),
        "python": sys.executable,
        "java": shutil.which("java"),
        "javac": shutil.which("javac"),
        "environment": {name: os.environ.get(name) for name in SESSION_ENVIRONMENT},
        "tributary": framework.__version__,
        "source": source_digest(),
    }
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]


def source_digest() -> str:
    """A digest of the framework's files (path, size, modification time): an edit restarts engines."""
    root = Path(framework.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".java", ".properties", ".json", ".txt") and "build" not in path.parts:
            info = path.stat()
            digest.update(f"{path.relative_to(root)}:{info.st_size}:{info.st_mtime_ns};".encode())
    return digest.hexdigest()


def runtime_dir() -> Path:
    """The per-user folder of engines (framework.private_folder)."""
    try:
        return private_folder()
    except NotPrivate as e:
        raise EngineUnavailable(str(e)) from None


@dataclass(frozen=True)
class EnginePlace:
    """The files of one engine."""

    folder: Path
    key: str

    @classmethod
    def of(cls, key: str, folder: Path | None = None) -> EnginePlace:
        place = cls(folder or runtime_dir(), key)
        if len(str(place.socket).encode()) > _SOCKET_PATH_LIMIT:
            raise EngineUnavailable(f"the socket path {place.socket} is too long for a Unix socket (set TRIBUTARY_RUNTIME_DIR)")
        return place

    @property
    def socket(self) -> Path:
        return self.folder / f"engine-{self.key}.sock"

    @property
    def lock(self) -> Path:
        """Held by the engine for its whole life: one engine per key."""
        return self.folder / f"engine-{self.key}.lock"

    @property
    def starting(self) -> Path:
        """Held by a client while it looks for the engine and starts it: one start at a time."""
        return self.folder / f"engine-{self.key}.start"

    @property
    def info(self) -> Path:
        """What the engine is (pid, settings, log): JSON, for `tributary engine status`."""
        return self.folder / f"engine-{self.key}.json"

    @property
    def log(self) -> Path:
        """The engine process's own output (Python and the JVM's console)."""
        return self.folder / f"engine-{self.key}.log"

    @property
    def spark_log(self) -> Path:
        """Spark's log (log4j), as framework.engine.session routes it."""
        return self.folder / f"engine-{self.key}.spark.log"


def known_places(folder: Path | None = None) -> list[EnginePlace]:
    """Every engine that has files in the runtime folder (running or not)."""
    folder = folder or runtime_dir()
    keys = {p.name.removeprefix("engine-").split(".")[0] for p in folder.glob("engine-*")}
    return [EnginePlace(folder, key) for key in sorted(keys)]
