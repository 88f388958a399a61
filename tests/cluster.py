"""A Spark standalone cluster on this machine, for the tests that need executors in JVMs of their own.

Embedded `local[N]` runs every task inside the driver's JVM, so it cannot show what breaks when work
ships elsewhere: functions pickled by value, the SWA fold's classes on the executors' class path,
Parquet staged by executors and committed on the driver, a worker lost mid-stream. The launcher
ships with pyspark (`bin/spark-class`), so a master and its workers start here without a Spark
install; everything binds to 127.0.0.1 and stops by process id (SIGTERM, then SIGKILL).
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process's group (the launcher's JVM and its children), then SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # the group may outlive its leader (an executor a worker forked): make sure none is left
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@dataclass
class StandaloneCluster:
    """A master and its workers; `master` is the URL a profile's `spark.master` takes, `env` the
    environment a `tributary run` against it needs (SPARK_HOME, loopback, this interpreter)."""

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
                [str(launcher), *arguments], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes.append(process)
        return process

    def start_worker(self, n: int) -> None:
        """Start worker `n` (again, after kill_worker); it registers with the master on its own."""
        worker = ["org.apache.spark.deploy.worker.Worker", self.master, "--host", "127.0.0.1", "--cores", str(self.cores),
                  "--memory", self.memory, "--webui-port", str(free_port()), "--work-dir", str(self.folder / f"work-{n}")]  # fmt: skip
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
        with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=5) as answer:
            state = json.load(answer)
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

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
            _stop(process)


def start_cluster(folder: Path, workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 120) -> StandaloneCluster:
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    env.pop("SPARK_MASTER", None)
    folder.mkdir(parents=True, exist_ok=True)
    port, ui_port = free_port(), free_port()
    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}", env, folder, cores, memory)
    try:
        cluster.spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                                 "--webui-port", str(ui_port)])  # fmt: skip
        for n in range(workers):
            cluster.start_worker(n)
        cluster.wait_for_workers(workers, timeout)
        return cluster
    except BaseException:
        cluster.stop()
        raise
