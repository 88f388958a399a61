"""Start and stop a standalone master and its workers, bound to 127.0.0.1 only.

Embedded `local[N]` runs every task inside the driver's JVM, so it cannot show what changes when
work ships elsewhere: functions pickled by value, the SWA fold's classes on the executors' class
path, Parquet staged by executors and committed on the driver, a worker lost mid-stream. pyspark
ships Spark's launcher (`bin/spark-class`), so a master and its workers start without a Spark
install. Every process gets a session of its own, so it is stopped with whatever it forked (a
worker's executors) by its process group: SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

#: The Java classes of the processes a local cluster runs (a pid is only ever stopped if its
#: command line names one of them: a recorded pid may have been reused by then)
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` different ports free on 127.0.0.1 now: each held open until all are picked, so two picks
    cannot be the same port (one closed socket's port handed out again)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def spark_environment(java_options: str = "") -> dict[str, str]:
    """The environment the launcher and a driver talking to the cluster need: pyspark's folder as
    SPARK_HOME, loopback only, and this interpreter for the executors' Python workers.
    `java_options` go to every JVM started with it (JDK_JAVA_OPTIONS, read by the java launcher)."""
    import pyspark

    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1"}
    env["PYSPARK_PYTHON"] = sys.executable
    env.pop("SPARK_MASTER", None)
    if java_options:
        env["JDK_JAVA_OPTIONS"] = " ".join(filter(None, [env.get("JDK_JAVA_OPTIONS"), java_options]))
    return env


def stop_group(pid: int, grace: float = 10.0) -> None:
    """SIGTERM process group `pid` (a launcher's JVM and its children), then SIGKILL what is left."""
    deadline = time.monotonic() + grace
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
        while time.monotonic() < deadline and _group_alive(pid):
            time.sleep(0.1)
    # the group may outlive its leader (an executor a worker forked): make sure none is left
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        os.waitpid(-pgid, os.WNOHANG)  # reap our own children (the suite's), or they stay zombies
    return True


def runs_spark_class(pid: int) -> bool:
    """True when process `pid` is alive and is a master, a worker or a Connect server of a local cluster."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(c.decode(errors="replace") in (MASTER_CLASS, WORKER_CLASS, CONNECT_CLASS) for c in command)


@dataclass
class StandaloneCluster:
    """A master and its workers; `master` is the URL a profile's `spark.master` takes, `env` the
    environment a driver against it needs (SPARK_HOME, loopback, this interpreter)."""

    master: str
    web_ui: str
    env: dict[str, str]
    folder: Path
    cores: int = 1
    memory: str = "1g"
    processes: list[subprocess.Popen] = field(default_factory=list)
    workers: list[subprocess.Popen] = field(default_factory=list)

    def spawn(self, name: str, arguments: list[str]) -> subprocess.Popen:
        launcher = Path(self.env["SPARK_HOME"]) / "bin" / "spark-class"
        with open(self.folder / f"{name}.log", "a") as log:
            process = subprocess.Popen(
                [str(launcher), *arguments],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def start_worker(self, n: int) -> None:
        """Start worker `n` (again, after kill_worker); it registers with the master on its own. Its
        web UI takes a port the system picks (port 0): nothing here reads it, and a port picked
        beforehand could be taken by the time the worker binds it."""
        worker = [WORKER_CLASS, self.master, "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                  "--webui-port", "0", "--work-dir", str(self.folder / f"work-{n}")]  # fmt: skip
        process = self.spawn(f"worker-{n}", worker)
        if n < len(self.workers):
            self.workers[n] = process
        else:
            self.workers.append(process)

    def kill_worker(self, n: int) -> None:
        """SIGKILL worker `n` and the executors it started (its process group): a machine lost."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.workers[n].pid, signal.SIGKILL)
        self.workers[n].wait()

    def alive_workers(self) -> int:
        return sum(1 for w in master_state(self.web_ui).get("workers", []) if w.get("state") == "ALIVE")

    def wait_for_workers(self, workers: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.alive_workers() >= workers:
                    return
            except OSError:
                pass  # the master's web UI is not up yet
            dead = [p for p in (self.processes[0], *self.workers) if p.poll() is not None]  # the master, the live workers
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(self.folder.glob("*.log")))
                raise RuntimeError(f"the standalone cluster did not come up ({workers} workers)\n{logs}")
            time.sleep(0.5)

    def stop(self) -> None:
        for process in reversed(self.processes):
            stop_group(process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)


def master_state(web_ui: str, timeout: float = 5) -> dict:
    """The master's own account of itself (its web UI's `/json/`): workers, cores, applications.

    Raises OSError while the master cannot say: its web UI refuses connections, or answers
    `/json/` with its HTML page. Spark's web UI serves before its pages are attached (WebUI.bind
    adds them to the running server), so a master just started can answer with the page first."""
    with urllib.request.urlopen(f"{web_ui}/json/", timeout=timeout) as answer:
        body = answer.read()
    try:
        return json.loads(body)
    except ValueError:
        raise ConnectionError(f"the master's web UI at {web_ui} is not answering with its state yet") from None


def start_cluster(
    folder: Path,
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    timeout: float = 120,
    port: int | None = None,
    ui_port: int | None = None,
    java_options: str = "",
) -> StandaloneCluster:
    """Start a master (on `port`, else a free one) and `workers` workers, and wait until all are
    registered; on any failure, stop what started. `java_options` go to every JVM started with the
    cluster's `env`: the master, the workers, their executors, and a driver started with it."""
    folder.mkdir(parents=True, exist_ok=True)
    free = free_ports(2)
    port, ui_port = port or free[0], ui_port or free[1]
    env = spark_environment(java_options)
    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}", env, folder, cores, memory)
    try:
        cluster.spawn("master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)])
        for n in range(workers):
            cluster.start_worker(n)
        cluster.wait_for_workers(workers, timeout)
        return cluster
    except BaseException:
        cluster.stop()
        raise
