"""The secrets Tributary's local Spark daemons share with the clients allowed to use them.

A standalone master takes any application that reaches its port, and its workers then run that
application's code as the user who started them. On 127.0.0.1 that is every user of the machine.
So `tributary cluster up` (framework.localcluster) starts the master and workers with Spark's
authentication (`spark.authenticate`) and a secret of their own, and turns off what takes no
secret at all: the master's REST submission server, and its web UI's buttons that kill an
application or decommission the workers (Spark allows them to any caller on this machine).

The secret is never on a command line (`ps` shows those to every user): it is in a properties file
of mode 0600 that the daemons and the Connect server read with `--properties-file`, and that a
driver's JVM reads the same way (PYSPARK_SUBMIT_ARGS, which PySpark hands to spark-submit).
Workers pass it to their executors in the environment. The file is kept under this user's private
folder (framework.private_folder), named after the master's URL, so a run whose profile points at
that URL finds it (`submit_args`) while that master runs; a cluster that stops removes it.

A Spark Connect server Tributary starts (`cluster up --connect`, framework.localcluster.connect)
runs whatever its clients send, as its owner, so it gets a token of its own
(`spark.connect.authenticate.token`, which the server reads from its environment: private to the
user, unlike a command line). The token is registered the same way, under the server's port, and
`connect_url` hands it to a client that dials that port on this machine. PySpark's client sends a
token without TLS only to a host named `localhost` (over gRPC's local credentials, which check that
the connection stays on this machine), so such a URL is dialled as `sc://localhost:<port>`.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from framework.private_folder import NotPrivate, private_folder

#: what a master, its workers and its drivers are started with besides the secret: the REST
#: submission server and the web UI's kill and decommission buttons take requests from any local
#: caller with no secret (the web UI stays, read-only: `tributary cluster status` reads it)
_SETTINGS = {
    "spark.authenticate": "true",
    "spark.master.rest.enabled": "false",
    "spark.ui.killEnabled": "false",
    "spark.master.ui.decommission.allow.mode": "DENY",
}
_SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"
_PID = "# master pid"
#: the Java classes of the daemons whose secrets are kept here (framework.localcluster starts them)
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: where a Connect server and PySpark's client both look for the token (besides their confs)
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


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
    return path if first.startswith(_PID) and pid.isdigit() and _runs(int(pid), MASTER_CLASS) else None


def _runs(pid: int, main_class: str) -> bool:
    """True when process `pid` is a JVM started for `main_class` (a pid can be reused by anything)."""
    try:
        return main_class.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
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
    folder = _private("clusters")
    return folder / (re.sub(r"[^A-Za-z0-9.]+", "_", master.removeprefix("spark://")) + ".conf") if folder else None


def _private(name: str) -> Path | None:
    try:
        folder = private_folder() / name
        folder.mkdir(mode=0o700, exist_ok=True)
    except (NotPrivate, OSError):
        return None
    return folder


# -- a Spark Connect server's token --------------------------------------------------------------


def new_token() -> str:
    return secrets.token_urlsafe(32)


def register_connect(port: int, token: str, pid: int) -> None:
    """Keep the token of the Connect server `pid` listening on `port` of this machine where this
    user's clients look for it (`connect_url`)."""
    folder = _private("connect")
    if folder is not None:
        _write_private(folder / f"{port}.token", f"# connect server pid {pid}\n{token}\n")


def unregister_connect(port: int) -> None:
    folder = _private("connect")
    if folder is not None:
        (folder / f"{port}.token").unlink(missing_ok=True)


def registered_token(port: int) -> str | None:
    """The token of this user's Connect server on `port`, while that server runs."""
    folder = _private("connect")
    try:
        head, token = (folder / f"{port}.token").read_text().split("\n")[:2] if folder else ("", "")
    except (OSError, ValueError):
        return None
    pid = head.rsplit(" ", 1)[-1]
    if not (pid.isdigit() and _runs(int(pid), CONNECT_CLASS)):
        return None  # a copy left by a server that is gone
    return token.strip() or None


def connect_address(remote: str) -> tuple[str, int]:
    """The host and port a Spark Connect URL (sc://host:port/;params) names, with PySpark's
    defaults (localhost, 15002). Raises ValueError for a port that is no number."""
    parts = urlsplit(remote.partition(";")[0].replace("sc://", "http://", 1))
    return parts.hostname or "localhost", parts.port or 15002


def shown_url(remote: str) -> str:
    """A Spark Connect URL as messages and logs show it: a token it carries is left out."""
    return re.sub(r"(?i)(;token=)[^;]*", r"\1…", remote)


def connect_url(remote: str) -> str:
    """The URL a client dials `remote` by. A URL that names a port of this machine where this user's
    Connect server runs gets that server's token, unless it names a token itself; a URL with a
    token for this machine (its own, the registered one, or $SPARK_CONNECT_AUTHENTICATE_TOKEN) is
    dialled as `localhost`, the only host PySpark's client sends a token to without TLS. Any other
    URL is left as it is."""
    params = remote.partition(";")[2]
    try:
        host, port = connect_address(remote)
    except ValueError:
        return remote  # malformed: PySpark's own check says how
    if host not in _LOOPBACK or "use_ssl=true" in params.lower():
        return remote
    rest = [p for p in params.split(";") if p]
    if any(p.partition("=")[0].strip().lower() == "token" for p in rest):
        token = None  # the URL's own
    elif (token := registered_token(port)) is None and not os.environ.get(TOKEN_ENV):
        return remote  # no token to send (PySpark's client reads the environment's itself)
    rest += [f"token={token}"] if token else []
    return f"sc://localhost:{port}" + ("/;" + ";".join(rest) if rest else "")
