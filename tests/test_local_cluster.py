"""`tributary cluster up|status|down` starts, reports and stops a real standalone cluster, and a
profile asking for Spark's Delta writer without Delta's jars says so in one line.

The cluster test starts real JVMs (a master and one worker) through the CLI, so the processes
must outlive the command that started them and be found again from the record by another one.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from framework import cluster_auth
from framework.localcluster.launcher import runs_spark_class, stop_group
from tests.conftest import write

pytestmark = [pytest.mark.cluster]


def _gone(pid: int, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not runs_spark_class(pid):
            return True
        time.sleep(0.2)
    return False


def test_cluster_up_status_down_start_report_and_stop_a_real_master_worker_and_connect_server(cli, project: Path) -> None:
    from framework.localcluster.launcher import free_port

    port = free_port()
    code, out, err = cli("cluster", "up", "--workers", "1", "--memory", "512m", "--port", str(port), "--connect")
    record = json.loads((project / ".tributary" / "cluster" / "cluster.json").read_text())
    try:
        assert code == 0, out + err
        assert f"spark://127.0.0.1:{port}" in out + err
        assert f"SPARK_MASTER=spark://127.0.0.1:{port} tributary run <pipeline> --profile local-cluster" in out
        assert "Spark Connect at sc://localhost:" in out and "--profile connect" in out
        assert set(record["pids"]) == {"master", "worker-0", "connect"}
        assert all(runs_spark_class(pid) for pid in record["pids"].values())
        # only drivers with the cluster's secret may use it, and no command line shows the secret
        secret_file = project / ".tributary" / "cluster" / "spark-auth.conf"
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
        # the executors' logs and the files the drivers ship (udfs, jars) are the user's alone
        assert stat.S_IMODE(secret_file.parent.stat().st_mode) == 0o700
        secret = next(line.split()[1] for line in secret_file.read_text().splitlines() if "authenticate.secret" in line)
        for pid in record["pids"].values():
            assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert cluster_auth.registered(f"spark://127.0.0.1:{port}") is not None
        # and only clients with the Connect server's token may use that: its own, in no command line either
        connect_port = int(record["connect"].rsplit(":", 1)[1])
        token = cluster_auth.registered_token(connect_port)
        assert token and len(token) >= 40
        token_file = cluster_auth.private_folder() / "connect" / f"{connect_port}.token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        for pid in record["pids"].values():
            assert token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert cluster_auth.connect_url(f"sc://127.0.0.1:{connect_port}") == f"sc://localhost:{connect_port}/;token={token}"

        code, out, err = cli("cluster", "up", "--port", str(free_port()))
        assert code == 2 and "already running" in err and "tributary cluster down" in err

        code, out, _ = cli("cluster", "status", "--json")
        status = json.loads(out)
        assert code == 0 and status["master"] == f"spark://127.0.0.1:{port}"
        assert status["alive"] == {"master": True, "worker-0": True, "connect": True}
        assert status["connect"] == record["connect"] and record["connect"].startswith("sc://localhost:")
        # the Connect server's driver is an application of the cluster
        assert [a["name"] for a in status["applications"]] == ["tributary-connect"]
        assert [w["state"] for w in status["registered_workers"]] == ["ALIVE"]
        assert status["registered_workers"][0]["memory_mb"] == 512

        # every user of the machine reaches the master's web UI on 127.0.0.1: it may neither kill
        # an application nor decommission the workers (Spark allows both to local callers)
        for path in (f"/app/kill/?id={status['applications'][0]['id']}&terminate=true", "/workers/kill/?host=127.0.0.1"):
            request = urllib.request.Request(record["web_ui"] + path, data=b"", method="POST")
            with contextlib.suppress(urllib.error.HTTPError), urllib.request.urlopen(request, timeout=10):
                pass
        time.sleep(3)
        after = json.loads(cli("cluster", "status", "--json")[1])
        assert [(a["id"], a["name"]) for a in after["applications"]] == [(status["applications"][0]["id"], "tributary-connect")]
        assert [w["state"] for w in after["registered_workers"]] == ["ALIVE"], (status, after)

        code, out, _ = cli("cluster", "status")
        assert code == 0 and "worker-0 alive" in out and "ALIVE, 1 core(s), 512 MB" in out
    finally:
        code, out, err = cli("cluster", "down")
        for pid in record["pids"].values():  # whatever the assertions said: leave no JVM behind
            if not _gone(pid, timeout=1):
                stop_group(pid)
    assert code == 0 and "stopped connect, worker-0, master" in out + err
    assert all(_gone(pid) for pid in record["pids"].values())
    assert cluster_auth.registered(f"spark://127.0.0.1:{port}") is None
    assert not token_file.exists()
    code, out, _ = cli("cluster", "status")
    assert "no local cluster for this project" in out
    code, out, err = cli("cluster", "down")
    assert code == 0 and "no local cluster running" in out + err


def test_cluster_down_never_signals_a_recorded_pid_that_is_no_longer_a_spark_process(cli, project: Path) -> None:
    """A record left from before a reboot names pids that may now be anything: this test process's."""
    write(
        project / ".tributary" / "cluster" / "cluster.json",
        json.dumps(
            {
                "master": "spark://127.0.0.1:1",
                "web_ui": "http://127.0.0.1:1",
                "folder": str(project / ".tributary" / "cluster"),
                "workers": 1,
                "cores": 1,
                "memory": "1g",
                "started": 0.0,
                "pids": {"master": os.getpid()},
            }
        ),  # fmt: skip
    )
    code, out, err = cli("cluster", "status")
    assert code == 0 and "master gone" in out
    code, out, err = cli("cluster", "down")
    assert code == 0 and "no local cluster running" in out + err  # and this process is still here to say so


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--workers", "0"), "--workers must be 1-16"),
        (("--memory", "lots"), "--memory 'lots': give megabytes or gigabytes"),
        (("--memory", "0g"), "a worker needs at least 256m"),
        (("--port", "99999"), "--port 99999: give a port from 1024 to 65535"),
    ],
)
def test_cluster_up_refuses_bad_sizes_before_starting_anything(cli, project: Path, args, words) -> None:
    code, out, err = cli("cluster", "up", *args)
    assert code == 2 and words in err
    assert not (project / ".tributary" / "cluster" / "cluster.json").exists()


@pytest.mark.spark
def test_delta_writer_spark_without_delta_jars_is_one_line_naming_the_missing_jars(cli, project: Path) -> None:
    """pyspark ships no Delta jars: before, the run failed with `Py4JJavaError ... o76.save`."""
    write(
        project / "configs" / "nojars.yaml",
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 2\nwarehouse: ./warehouse\ndelta_writer: spark\n",
    )
    code, out, err = cli("run", "service_calls", "--profile", "nojars", "--no-engine")
    assert code == 2, out + err
    assert "delta_writer: spark" in err and "io.delta:delta-spark_2.13" in err and "delta_writer: auto" in err
    assert "Py4J" not in out + err and "Traceback" not in out + err
    assert not (project / "warehouse" / "service_calls").exists() or not any((project / "warehouse").rglob("*.parquet"))


def test_a_master_still_attaching_its_pages_is_waited_for_not_a_crash(tmp_path: Path) -> None:
    """Spark's web UI starts serving before its pages are attached (WebUI.bind adds them to a
    running server), so `/json/` can first answer with the master's HTML page. The wait for the
    workers must take that as "not up yet", as it takes a refused connection (CI hit it once)."""
    import subprocess
    import sys
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from framework.localcluster.launcher import StandaloneCluster

    answers = [b"<!DOCTYPE html><html><body>Spark Master</body></html>"]
    state = json.dumps({"workers": [{"state": "ALIVE"}, {"state": "ALIVE"}]}).encode()

    class StartingMaster(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answers.pop(0) if answers else state
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if body.startswith(b"<") else "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), StartingMaster)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    master = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # stands for the master's JVM
    try:
        cluster = StandaloneCluster("spark://127.0.0.1:1", f"http://127.0.0.1:{server.server_port}", {}, tmp_path)
        cluster.processes.append(master)
        cluster.wait_for_workers(2, timeout=10)
        assert not answers  # the page was answered, and the wait went on to the state
    finally:
        master.kill()
        server.shutdown()


def test_a_clusters_secret_is_private_and_a_dead_masters_copy_is_not_used(tmp_path: Path, monkeypatch) -> None:
    """The secret file is the user's alone even when an older one was readable; a run finds the
    copy for a master URL only while that master runs (a copy a killed cluster left behind would
    make a run fail its handshake with the next master on that port); the driver's spark-submit
    gets it as a properties file, and the environment is as it was afterwards."""
    monkeypatch.setenv("TRIBUTARY_RUNTIME_DIR", str(tmp_path / "private"))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    secret = tmp_path / "cluster" / "spark-auth.conf"
    write(secret, "old\n")
    secret.chmod(0o644)
    assert cluster_auth.write_secret(secret) == secret
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert "spark.authenticate true" in secret.read_text() and "spark.master.rest.enabled false" in secret.read_text()

    dead = subprocess.Popen(["true"])
    dead.wait()
    cluster_auth.register("spark://127.0.0.1:7077", secret, dead.pid)
    copy = tmp_path / "private" / "clusters" / "127.0.0.1_7077.conf"
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600 and secret.read_text() in copy.read_text()
    assert cluster_auth.registered("spark://127.0.0.1:7077") is None  # its master is gone
    with cluster_auth.submit_args("spark://127.0.0.1:7077"):
        assert "PYSPARK_SUBMIT_ARGS" not in os.environ

    master = subprocess.Popen(  # a stand-in whose command line names the master's class
        [sys.executable, "-c", "import time; time.sleep(60)", "org.apache.spark.deploy.master.Master"]
    )
    try:
        deadline = time.monotonic() + 10  # Popen may return before the child has exec'd
        while b"Master" not in Path(f"/proc/{master.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster_auth.register("spark://127.0.0.1:7077", secret, master.pid)
        assert cluster_auth.registered("spark://127.0.0.1:7077") == copy
        assert cluster_auth.registered("spark://127.0.0.1:7078") is None
        with cluster_auth.submit_args("spark://127.0.0.1:7077"):
            assert os.environ["PYSPARK_SUBMIT_ARGS"] == f"--properties-file {copy} pyspark-shell"
        assert "PYSPARK_SUBMIT_ARGS" not in os.environ
        cluster_auth.unregister("spark://127.0.0.1:7077")
        assert not copy.exists()
    finally:
        master.kill()
        master.wait()


def test_a_connect_servers_token_goes_only_to_that_server_while_it_runs(tmp_path: Path, monkeypatch) -> None:
    """A run finds the token of this user's Connect server by the port its URL names on this
    machine, dials it as localhost (PySpark's client sends a token without TLS to no other host),
    keeps what the URL says besides, and sends nothing to a server that is gone or elsewhere."""
    monkeypatch.setenv("TRIBUTARY_RUNTIME_DIR", str(tmp_path / "private"))
    monkeypatch.delenv(cluster_auth.TOKEN_ENV, raising=False)
    dead = subprocess.Popen(["true"])
    dead.wait()
    cluster_auth.register_connect(15002, "old-token", dead.pid)
    token_file = tmp_path / "private" / "connect" / "15002.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert cluster_auth.connect_url("sc://127.0.0.1:15002") == "sc://127.0.0.1:15002"  # its server is gone

    server = subprocess.Popen(  # a stand-in whose command line names the Connect server's class
        [sys.executable, "-c", "import time; time.sleep(60)", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    )
    try:
        deadline = time.monotonic() + 10  # Popen may return before the child has exec'd
        while b"SparkConnectServer" not in Path(f"/proc/{server.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster_auth.register_connect(15002, "t0ken", server.pid)
        assert cluster_auth.connect_url("sc://127.0.0.1:15002") == "sc://localhost:15002/;token=t0ken"
        assert cluster_auth.connect_url("sc://localhost") == "sc://localhost:15002/;token=t0ken"  # the default port
        assert cluster_auth.connect_url("sc://[::1]:15002/;user_id=ann") == "sc://localhost:15002/;user_id=ann;token=t0ken"
        assert cluster_auth.connect_url("sc://localhost:15002/;token=mine") == "sc://localhost:15002/;token=mine"
        # messages and logs show a URL without its token
        assert (
            cluster_auth.shown_url("sc://localhost:15002/;token=t0ken;user_id=ann") == "sc://localhost:15002/;token=…;user_id=ann"
        )
        for elsewhere in ("sc://127.0.0.1:15003", "sc://spark-connect:15002", "sc://10.0.0.7:15002"):
            assert cluster_auth.connect_url(elsewhere) == elsewhere
        # a token from the environment, for a server started by hand: dialled as localhost too
        monkeypatch.setenv(cluster_auth.TOKEN_ENV, "by-hand")
        assert cluster_auth.connect_url("sc://127.0.0.1:15003") == "sc://localhost:15003"
        assert cluster_auth.connect_url("sc://127.0.0.1:15002") == "sc://localhost:15002/;token=t0ken"  # ours first
        cluster_auth.unregister_connect(15002)
        assert not token_file.exists()
    finally:
        server.kill()
        server.wait()


#: In a child process: a master and a worker tied to it (the test session's cluster is started
#: so), their pids on one line, then waiting to be killed.
_TIED_CLUSTER = """
import json, sys, time
from pathlib import Path
from framework.localcluster.launcher import start_cluster
cluster = start_cluster(Path(sys.argv[1]), workers=1, cores=1, memory="512m", java_options=sys.argv[2], tied=True)
print("PIDS" + json.dumps([p.pid for p in cluster.processes]), flush=True)
time.sleep(600)
"""


def test_a_tied_clusters_daemons_stop_when_the_process_that_started_them_is_killed(tmp_path: Path) -> None:
    """The suite's cluster and Connect server are started `tied`: a test session SIGKILLed (a CI
    time limit) leaves no master or worker running, holding ports, memory and the cores of the
    next run on this machine."""
    from tests.conftest import SHORT_LIVED_JIT

    starter = subprocess.Popen(
        [sys.executable, "-c", _TIED_CLUSTER, str(tmp_path / "cluster"), SHORT_LIVED_JIT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pids: list[int] = []
    try:
        assert starter.stdout is not None
        line = starter.stdout.readline()
        assert line.startswith("PIDS"), line + starter.communicate(timeout=30)[1][-3000:]
        pids = json.loads(line[4:])
        assert len(pids) == 2 and all(runs_spark_class(pid) for pid in pids)
        starter.kill()  # SIGKILL: no handler, no fixture teardown runs
        starter.wait()
        assert all(_gone(pid, timeout=60) for pid in pids), "a daemon outlived the process that started it"
    finally:
        starter.kill()
        for pid in pids:
            if runs_spark_class(pid):
                stop_group(pid)
