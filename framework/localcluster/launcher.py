"""Start and stop a standalone master and its workers, bound to 127.0.0.1 only.

Embedded `local[N]` runs every task inside the driver's JVM, so it cannot show what changes when
work ships elsewhere: functions pickled by value, the SWA fold's classes on the executors' class
path, Parquet staged by executors and committed on the driver, a worker lost mid-stream. pyspark
ships Spark's launcher (`bin/spark-class`), so a master and its workers start without a Spark
install. Every process gets a session of its own, so it is stopped with whatever it forked (a
worker's executors) by its process group: SIGTERM, then SIGKILL. The master and workers take only
drivers holding the cluster's secret (framework.cluster_auth): 127.0.0.1 is every local user's.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from framework import cluster_auth

#: The Java classes of the processes a local cluster runs (a pid is only ever stopped if its
#: command line names one of them: a recorded pid may have been reused by then)
MASTER_CLASS = cluster_auth.MASTER_CLASS
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = cluster_auth.CONNECT_CLASS
#: the cluster's secret, in its folder (framework.cluster_auth)
SECRET_FILE = "spark-auth.conf"


def free_port() -> int:
    """A port free on 127.0.0.1 now (it may be taken again before it is used)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def said_in_log(log: Path, start: int, pattern: str, process: subprocess.Popen, timeout: float, what: str) -> re.Match[str]:
    """The first match of `pattern` in what `process` wrote to `log` past byte `start`: a daemon's
    own line saying where it listens. A port that takes connections may be another program's: Spark
    moves a master whose port is taken to the next free one (spark.port.maxRetries), and a Connect
    server whose port is taken stops. Only the daemon's line says which port is its own.
    RuntimeError, naming the log and with its errors, when the process exits or `timeout` passes first."""
    deadline = time.monotonic() + timeout
    wanted = re.compile(pattern, re.MULTILINE)
    while True:
        with open(log, "rb") as written:
            written.seek(start)
            text = written.read().decode(errors="replace")
        if (found := wanted.search(text)) is not None:
            return found
        if process.poll() is not None or time.monotonic() > deadline:
            # the daemon's errors when it says any (a shutdown's lines follow them), else its log's end
            errors = [line for line in text.splitlines() if " ERROR " in line or "Exception: " in line][:8]
            raise RuntimeError("\n".join([f"{what} did not come up (its log: {log})", *(errors or [text[-3000:]])]))
        time.sleep(0.25)


def own_folder(folder: Path) -> Path:
    """`folder`, made and entered by this user only: the daemons' logs, the executors' logs and the
    files drivers ship to them (udfs, jars, Connect artifacts) are written under it."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    return folder


def log_end(log: Path) -> int:
    """Where a log appended to (a daemon started again) ends now: its next lines start there."""
    return log.stat().st_size if log.exists() else 0


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


#: Linux's prctl option: the signal a process gets when the thread that started it ends
_PR_SET_PDEATHSIG = 1


def ending_with_this_process() -> Callable[[], None] | None:
    """A `preexec_fn` for a daemon that must not outlive the process starting it, however that one
    ends (a test session SIGKILLed, a benchmark stopped): the daemon gets SIGTERM then, as
    `stop_group` would send it, and stops its executors as it does then. The setting survives the
    launcher's `exec` into the JVM. None where the kernel has no such setting (not Linux)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    except (OSError, AttributeError):
        return None
    starter = os.getpid()

    def end_with_starter() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != starter:  # the starter ended before the setting took
            os._exit(1)

    return end_with_starter


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
    #: the properties file with the secret the daemons and the drivers share (framework.cluster_auth)
    secret: Path | None = None
    #: the daemons stop when the process that started them ends (`ending_with_this_process`)
    tied: bool = False

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
                preexec_fn=ending_with_this_process() if self.tied else None,
            )
        self.processes.append(process)
        return process

    def start_worker(self, n: int) -> None:
        """Start worker `n` (again, after kill_worker); it registers with the master on its own. Its
        web UI takes a port the system picks (port 0): nothing here reads it, and a port picked
        beforehand could be taken by the time the worker binds it."""
        worker = [WORKER_CLASS, self.master, "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                  "--webui-port", "0", "--work-dir", str(self.folder / f"work-{n}"), *self.properties()]  # fmt: skip
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

    def properties(self) -> list[str]:
        """The daemon arguments that give it the cluster's secret."""
        return ["--properties-file", str(self.secret)] if self.secret is not None else []

    def stop(self) -> None:
        if self.master:
            cluster_auth.unregister(self.master)
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
    tied: bool = False,
) -> StandaloneCluster:
    """Start a master (on `port`, else one the system picks) and `workers` workers, and wait until
    all are registered; on any failure, stop what started. The master's URL and web UI are the
    ports its log says it took (said_in_log). Only drivers holding the cluster's secret may use it
    (framework.cluster_auth). `java_options` go to every JVM started with the cluster's `env`: the
    master, the workers, their executors, and a driver started with it. `tied`: the master and
    workers stop when this process ends, however it ends (a test session's or a benchmark's
    cluster; `tributary cluster up` starts one that outlives the command)."""
    own_folder(folder)
    env = spark_environment(java_options)
    secret = cluster_auth.write_secret(folder / SECRET_FILE)
    cluster = StandaloneCluster("", "", env, folder, cores, memory, secret=secret, tied=tied)
    try:
        log = folder / "master.log"
        start = log_end(log)
        arguments = [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port or 0), "--webui-port", str(ui_port or 0)]
        master = cluster.spawn("master", [*arguments, *cluster.properties()])
        cluster.master = said_in_log(
            log, start, r"Starting Spark master at (spark://\S+)", master, timeout, "the standalone master"
        )[1]
        ui = said_in_log(
            log, start, r"Successfully started service 'MasterUI' on port (\d+)", master, timeout, "the master's web UI"
        )[1]
        cluster.web_ui = f"http://127.0.0.1:{ui}"
        cluster_auth.register(cluster.master, secret, master.pid)  # where a driver for this master finds it
        for n in range(workers):
            cluster.start_worker(n)
        cluster.wait_for_workers(workers, timeout)
        return cluster
    except BaseException:
        cluster.stop()
        raise
