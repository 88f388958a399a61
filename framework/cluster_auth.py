"""The secret a local standalone cluster shares with the drivers allowed to use it.

A standalone master takes any application that reaches its port, and its workers then run that
application's code as the user who started them. On 127.0.0.1 that is every user of the machine.
So `tributary cluster up` (framework.localcluster) starts the master and workers with Spark's
authentication (`spark.authenticate`) and a secret of their own, and turns off the master's REST
submission server, which takes no secret at all.

The secret is never on a command line (`ps` shows those to every user): it is in a properties file
of mode 0600 that the daemons and the Connect server read with `--properties-file`, and that a
driver's JVM reads the same way (PYSPARK_SUBMIT_ARGS, which PySpark hands to spark-submit).
Workers pass it to their executors in the environment. The file is kept under this user's private
folder (framework.private_folder), named after the master's URL, so a run whose profile points at
that URL finds it (`submit_args`) while that master runs; a cluster that stops removes it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
from collections.abc import Iterator
from pathlib import Path

from framework.private_folder import NotPrivate, private_folder

#: what a master, its workers and its drivers are started with besides the secret
_SETTINGS = {"spark.authenticate": "true", "spark.master.rest.enabled": "false"}
_SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"
_PID = "# master pid"


def write_secret(path: Path) -> Path:
    """A new secret in a properties file at `path`, readable by this user only."""
    lines = [*(f"{k} {v}" for k, v in _SETTINGS.items()), f"spark.authenticate.secret {secrets.token_urlsafe(32)}"]
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_private(path, "\n".join(lines) + "\n")
    return path


def register(master: str, secret: Path, pid: int) -> None:
    """Keep a copy of the cluster's secret where a driver for `master` looks for it, with the
    master's process id: a copy left by a master that died is not used for another one."""
    copy = _registered_path(master)
    if copy is not None:
        _write_private(copy, f"{_PID} {pid}\n{secret.read_text()}")


def _write_private(path: Path, text: str) -> None:
    """`text` in a file of mode 0600, also when an older file there had another mode."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        os.fchmod(out.fileno(), 0o600)  # O_CREAT keeps an existing file's mode
        out.write(text)


def unregister(master: str) -> None:
    path = _registered_path(master)
    if path is not None:
        path.unlink(missing_ok=True)


def registered(master: str) -> Path | None:
    """The secret of this user's local cluster at `master`, while its master runs."""
    path = _registered_path(master)
    try:
        first = path.read_text().split("\n", 1)[0] if path is not None else ""
    except OSError:
        return None
    pid = first.removeprefix(_PID).strip()
    return path if first.startswith(_PID) and pid.isdigit() and _is_master(int(pid)) else None


def _is_master(pid: int) -> bool:
    try:
        return b"org.apache.spark.deploy.master.Master" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc to ask (not Linux): trust the copy
    except OSError:
        return False


@contextlib.contextmanager
def submit_args(master: str | None) -> Iterator[None]:
    """While a driver's JVM starts: have spark-submit read the secret of this user's local cluster
    at `master` (nothing when `master` is no cluster of this user's)."""
    secret = registered(master) if master and master.startswith("spark://") else None
    before = os.environ.get(_SUBMIT_ARGS)
    if secret is None or (before and "--properties-file" in before):
        yield
        return
    os.environ[_SUBMIT_ARGS] = f"--properties-file {shlex.quote(str(secret))} {before or 'pyspark-shell'}"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_SUBMIT_ARGS, None)
        else:
            os.environ[_SUBMIT_ARGS] = before


def _registered_path(master: str) -> Path | None:
    try:
        folder = private_folder() / "clusters"
        folder.mkdir(mode=0o700, exist_ok=True)
    except (NotPrivate, OSError):
        return None
    return folder / (re.sub(r"[^A-Za-z0-9.]+", "_", master.removeprefix("spark://")) + ".conf")
