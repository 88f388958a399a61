"""A Spark Connect server on this machine, for the tests that run pipelines through a `remote:` profile.

A Connect client holds no JVM: its plans go to the server over gRPC, and what it cannot say as a
plan (a py4j call into the driver) it cannot do at all. Only a real server shows which of the
framework's calls still reach for the driver's JVM. pyspark ships the server's jar
(jars/spark-connect_2.13-*.jar) and the launcher (bin/spark-class), but not sbin/start-connect-server.sh:
the server starts as that script would start it, through SparkSubmit with the server's main class.
It binds to 127.0.0.1 on a free port and stops by process id (tests/cluster.py's way).

Nothing of the project is put on the server's class path: the client ships Tributary's jar as a
session artifact (framework.jvm), as it would to a server it did not start. The server's Python
workers (group steps, udfs, the pandas fold) import `framework` from this checkout (PYTHONPATH),
as a server with the project installed would.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.cluster import _stop as stop_process_group
from tests.cluster import free_port

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass
class ConnectServer:
    """`url` is what a profile's `spark.remote` takes; `log` the server's own log."""

    url: str
    port: int
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        stop_process_group(self.process)


def start_connect_server(folder: Path, repo: Path, cores: int = 2, timeout: float = 120) -> ConnectServer:
    """A Spark Connect server on 127.0.0.1 (local[cores]), up and taking connections."""
    import pyspark

    home = Path(pyspark.__file__).parent
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": str(repo),
    }
    for name in ("SPARK_MASTER", "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(name, None)
    command = [
        str(home / "bin" / "spark-class"), "org.apache.spark.deploy.SparkSubmit", "--class", SERVER_CLASS,
        "--master", f"local[{cores}]", "--name", "tributary-tests-connect",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
    ]  # fmt: skip
    log = folder / "connect-server.log"
    with open(log, "a") as out:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = ConnectServer(f"sc://127.0.0.1:{port}", port, process, log)
    try:
        _wait_for_port(server, timeout)
        return server
    except BaseException:
        server.stop()
        raise


def _wait_for_port(server: ConnectServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex(("127.0.0.1", server.port)) == 0:
                return
        if server.process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the Spark Connect server did not come up\n{server.log.read_text()[-3000:]}")
        time.sleep(0.5)
