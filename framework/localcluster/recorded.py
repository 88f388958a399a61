"""The local cluster `tributary cluster up` leaves running: recorded in a file, so `status` and
`down` find it from another command line.

The processes outlive the command that started them (each in a session of its own), so the
record keeps their ids, and a stop checks that an id still belongs to a Spark master or worker
before it signals it: a pid recorded yesterday may belong to anything today. The cluster's folder
(record, logs, the workers' scratch space) is `.tributary/cluster/` in the project, beside the
scratch warehouse, so two projects on one machine each have their own.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from framework import cluster_auth
from framework.errors import BadInput
from framework.localcluster.launcher import master_state, port_is_free, runs_spark_class, start_cluster, stop_group

CLUSTER_DIR = ".tributary/cluster"
RECORD = "cluster.json"
#: The master port `configs/local-cluster.yaml` points at when SPARK_MASTER is not set
DEFAULT_PORT = 7077
DEFAULT_UI_PORT = 8080
#: The Spark Connect port `configs/connect.yaml` points at when SPARK_REMOTE is not set
DEFAULT_CONNECT_PORT = 15002


@dataclass
class ClusterRecord:
    master: str
    web_ui: str
    folder: str
    workers: int
    cores: int
    memory: str
    started: float
    pids: dict[str, int]  # "master", "worker-0", ..., "connect" -> process id (and process group id)
    connect: str | None = None  # the Spark Connect server's URL, when `up --connect` started one

    def alive(self) -> dict[str, bool]:
        return {name: runs_spark_class(pid) for name, pid in self.pids.items()}


def cluster_folder(project_root: Path) -> Path:
    return project_root / CLUSTER_DIR


def recorded(project_root: Path) -> ClusterRecord | None:
    path = cluster_folder(project_root) / RECORD
    try:
        return ClusterRecord(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def cluster_up(
    project_root: Path, workers: int = 2, cores: int = 1, memory: str = "1g", port: int | None = None, connect: bool = False
) -> ClusterRecord:
    """Start a master and `workers` workers and record them. The master takes port 7077 (the local
    profile's default) when it is free and no port is asked for, else a free port. `connect`: also
    a Spark Connect server whose driver uses the cluster (port 15002 when free)."""
    if not 1 <= workers <= 16 or not 1 <= cores <= (os.cpu_count() or 1) * 4:
        raise BadInput(f"--workers must be 1-16 and --cores 1-{(os.cpu_count() or 1) * 4}")
    if not memory[:-1].isdigit() or memory[-1:].lower() not in ("m", "g"):
        raise BadInput(f"--memory {memory!r}: give megabytes or gigabytes, e.g. 512m or 1g")
    if int(memory[:-1]) * (1024 if memory[-1].lower() == "g" else 1) < 256:
        raise BadInput(f"--memory {memory!r}: a worker needs at least 256m to run an executor")
    if port is not None and not 1024 <= port <= 65535:
        raise BadInput(f"--port {port}: give a port from 1024 to 65535, or leave it out for 7077 (or a free one)")
    running = recorded(project_root)
    if running is not None and any(running.alive().values()):
        raise BadInput(
            f"a local cluster is already running for this project ({running.master}); "
            "`tributary cluster status` shows it, `tributary cluster down` stops it"
        )
    if port is not None and not port_is_free(port):
        raise BadInput(f"port {port} is taken on 127.0.0.1: choose another with --port, or leave it out for 7077/a free one")
    chosen = port or (DEFAULT_PORT if port_is_free(DEFAULT_PORT) else None)
    ui_port = DEFAULT_UI_PORT if chosen == DEFAULT_PORT and port_is_free(DEFAULT_UI_PORT) else None
    folder = cluster_folder(project_root)
    cluster = start_cluster(folder, workers=workers, cores=cores, memory=memory, port=chosen, ui_port=ui_port)
    pids = {"master": cluster.processes[0].pid, **{f"worker-{n}": p.pid for n, p in enumerate(cluster.workers)}}
    record = ClusterRecord(cluster.master, cluster.web_ui, str(folder), workers, cores, memory, time.time(), pids)
    if connect:
        from framework.localcluster.connect import start_connect_server

        try:
            server = start_connect_server(
                folder,
                master=cluster.master,
                port=DEFAULT_CONNECT_PORT if port_is_free(DEFAULT_CONNECT_PORT) else None,
                secret=cluster.secret,
            )
        except BaseException:
            cluster.stop()
            raise
        record.pids["connect"] = server.process.pid
        record.connect = server.url
    (folder / RECORD).write_text(json.dumps(asdict(record), indent=2))
    return record


def cluster_status(project_root: Path) -> dict | None:
    """The recorded cluster, which of its processes are alive, and the master's own account of its
    workers and applications (None when nothing is recorded)."""
    record = recorded(project_root)
    if record is None:
        return None
    status = {**asdict(record), "alive": record.alive(), "registered_workers": [], "applications": []}
    try:
        state = master_state(record.web_ui, timeout=3)
    except OSError:
        return status
    status["registered_workers"] = [
        {"id": w.get("id"), "state": w.get("state"), "cores": w.get("cores"), "memory_mb": w.get("memory")}
        for w in state.get("workers", [])
    ]
    status["applications"] = [
        {"id": a.get("id"), "name": a.get("name"), "cores": a.get("cores"), "state": a.get("state")}
        for a in state.get("activeapps", [])
    ]
    return status


def cluster_down(project_root: Path) -> list[str]:
    """Stop the recorded cluster's processes (workers first, with their executors) and forget it.
    Returns the names of the processes that were stopped."""
    record = recorded(project_root)
    if record is None:
        return []
    stopped = []
    order = {"connect": 0, "master": 2}  # the Connect server's driver first, the workers, then the master
    for name, pid in sorted(record.pids.items(), key=lambda item: order.get(item[0], 1)):
        if runs_spark_class(pid):
            stop_group(pid)
            stopped.append(name)
    cluster_auth.unregister(record.master)
    if record.connect:
        cluster_auth.unregister_connect(int(record.connect.rsplit(":", 1)[1]))
    (Path(record.folder) / RECORD).unlink(missing_ok=True)
    return stopped
