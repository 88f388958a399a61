"""A Spark Connect server on this machine, bound to 127.0.0.1, for a `remote:` profile.

A Connect client holds no JVM: its plans go to the server over gRPC, and what it cannot say as a
plan (a py4j call into the driver) it cannot do at all. pyspark ships the server's jar
(jars/spark-connect_2.13-*.jar) and the launcher (bin/spark-class), but not
sbin/start-connect-server.sh: the server starts as that script would start it, through SparkSubmit
with the server's main class, on `local[cores]` or a standalone master's URL.

Nothing of the project is put on the server's class path: the client ships Tributary's jar as a
session artifact (framework.jvm), as it would to a server it did not start. The server's Python
workers (group steps, udfs, the pandas fold) run this interpreter, so they import the `framework`
this one imports (`python_path` adds a checkout's folder when it is not installed).

The server takes only clients holding its token (framework.cluster_auth): 127.0.0.1 is every
local user's, and the server runs what its clients send as the user who started it.
"""

from __future__ import annotations

import contextlib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from framework import cluster_auth
from framework.engine.session import CODEGEN_CACHE, DEFAULT_CONF
from framework.localcluster.launcher import CONNECT_CLASS as SERVER_CLASS
from framework.localcluster.launcher import (
    ending_with_this_process,
    log_end,
    own_folder,
    said_in_log,
    spark_environment,
    stop_group,
)


@dataclass
class ConnectServer:
    """`url` is what a profile's `spark.remote` takes; `log` the server's own log; `token` what a
    client must send (this user's runs find it themselves: cluster_auth.connect_url)."""

    url: str
    port: int
    process: subprocess.Popen
    log: Path
    token: str = field(repr=False, default="")

    def stop(self) -> None:
        cluster_auth.unregister_connect(self.port)
        stop_group(self.process.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


def start_connect_server(
    folder: Path,
    python_path: Path | None = None,
    cores: int = 2,
    master: str | None = None,
    port: int | None = None,
    timeout: float = 120,
    java_options: str = "",
    secret: Path | None = None,
    tied: bool = False,
) -> ConnectServer:
    """A Spark Connect server on 127.0.0.1 (`master`, else local[cores]), up and taking connections
    on `port`, else on one the system picks (port 0). Its URL names the port the server's log says
    it took: a `port` taken by then makes the server stop (a BindException; RuntimeError here), and
    knocking on `port` would reach whatever holds it. `java_options` go to its JVM (JDK_JAVA_OPTIONS);
    `secret`: the properties file of a local cluster's secret, for a server whose `master` is one.
    The server takes only clients with its new token, registered for this user's runs. `tied`: it
    stops when this process ends, however it ends (launcher.ending_with_this_process)."""
    own_folder(folder)
    env = spark_environment(java_options)
    if python_path is not None:
        env["PYTHONPATH"] = str(python_path)
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(name, None)
    token = cluster_auth.new_token()
    env[cluster_auth.TOKEN_ENV] = token  # the server's environment: never on a command line
    command = [
        str(Path(env["SPARK_HOME"]) / "bin" / "spark-class"), "org.apache.spark.deploy.SparkSubmit", "--class", SERVER_CLASS,
        "--master", master or f"local[{cores}]", "--name", "tributary-connect",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", f"spark.connect.grpc.binding.port={port or 0}",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", f"{CODEGEN_CACHE}={DEFAULT_CONF[CODEGEN_CACHE]}",
        *(["--properties-file", str(secret)] if secret is not None else []),
    ]  # fmt: skip
    log = folder / "connect-server.log"
    start = log_end(log)
    with open(log, "a") as out:
        process = subprocess.Popen(
            command,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=ending_with_this_process() if tied else None,
        )
    try:
        said = said_in_log(
            log, start, r"Spark Connect server started at: \S*:(\d+)", process, timeout, "the Spark Connect server"
        )
    except BaseException:
        stop_group(process.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        raise
    port = int(said[1])
    cluster_auth.register_connect(port, token, process.pid)
    return ConnectServer(f"sc://localhost:{port}", port, process, log, token)
