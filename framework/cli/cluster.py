"""`tributary cluster up|status|down`: a Spark standalone cluster on this machine, to try a run with
executors in JVMs of their own (framework/localcluster) before a real cluster."""

from __future__ import annotations

import json
import time
from typing import Annotated, Optional

import typer

from framework.cli.common import DebugOpt, context, guard, say, term

app = typer.Typer(
    name="cluster",
    help="A local Spark standalone cluster (a master and workers on 127.0.0.1) to try the cluster profile.",
    no_args_is_help=True,
)

_HOW_TO_USE = "run on it: {env}tributary run <pipeline> --profile local-cluster"


@app.command("up")
def cluster_up_cmd(
    workers: Annotated[int, typer.Option("--workers", help="Worker processes.")] = 2,
    cores: Annotated[int, typer.Option("--cores", help="Cores each worker offers.")] = 1,
    memory: Annotated[str, typer.Option("--memory", help="Memory each worker offers (512m, 1g, ...).")] = "1g",
    port: Annotated[Optional[int], typer.Option("--port", help="The master's port (default 7077 when free).")] = None,
    connect: Annotated[
        bool, typer.Option("--connect", help="Also a Spark Connect server on the cluster (port 15002 when free).")
    ] = False,
    debug: DebugOpt = False,
) -> None:
    """Start a master and workers for this project; they run until `tributary cluster down`."""

    def body() -> None:
        from framework.localcluster.recorded import DEFAULT_CONNECT_PORT, DEFAULT_PORT, cluster_up

        root = context().project.root
        with_connect = " and a Spark Connect server" if connect else ""
        say(f"starting a master, {workers} worker(s){with_connect} on 127.0.0.1 …")
        record = cluster_up(root, workers=workers, cores=cores, memory=memory, port=port, connect=connect)
        say(f"cluster up: master {record.master}, web UI {record.web_ui}, logs in {record.folder}")
        env = "" if record.master.endswith(f":{DEFAULT_PORT}") else f"SPARK_MASTER={record.master} "
        term.out.print(_HOW_TO_USE.format(env=env), markup=False)
        if record.connect:
            remote = "" if record.connect.endswith(f":{DEFAULT_CONNECT_PORT}") else f"SPARK_REMOTE={record.connect} "
            term.out.print(
                f"Spark Connect at {record.connect}: {remote}tributary run <batch pipeline> --profile connect", markup=False
            )

    guard(debug, body)


@app.command("status")
def cluster_status_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False, debug: DebugOpt = False
) -> None:
    """The local cluster of this project: its processes, the workers the master sees, applications."""

    def body() -> None:
        from framework.localcluster.recorded import cluster_status

        status = cluster_status(context().project.root)
        if as_json:
            term.out.print_json(json.dumps(status))
            return
        if status is None:
            term.out.print("no local cluster for this project (`tributary cluster up` starts one)")
            return
        up = time.time() - status["started"]
        alive = ", ".join(f"{name} {'alive' if ok else 'gone'}" for name, ok in status["alive"].items())
        term.out.print(f"master {status['master']} (web UI {status['web_ui']}), up {up / 60:.0f} min: {alive}", markup=False)
        if status.get("connect"):
            term.out.print(f"  Spark Connect server at {status['connect']}", markup=False)
        for w in status["registered_workers"]:
            term.out.print(f"  worker {w['id']}: {w['state']}, {w['cores']} core(s), {w['memory_mb']} MB", markup=False)
        for a in status["applications"]:
            term.out.print(f"  application {a['name']} ({a['id']}): {a['state']}, {a['cores']} core(s)", markup=False)

    guard(debug, body)


@app.command("down")
def cluster_down_cmd(debug: DebugOpt = False) -> None:
    """Stop this project's local cluster (workers and their executors first, then the master)."""

    def body() -> None:
        from framework.localcluster.recorded import cluster_down

        stopped = cluster_down(context().project.root)
        say(f"stopped {', '.join(stopped)}" if stopped else "no local cluster running for this project")

    guard(debug, body)
