"""The example batch pipelines on Spark Connect (with the strict SQL policy) give exactly the tables
they give embedded; what a Connect profile cannot run is refused by validate, plan and run with
exit 2 and a line saying why.

A Connect client holds no JVM (framework/localcluster/connect.py starts the server, on 127.0.0.1). The Connect side
runs in one child process (`_CONNECT_DRIVER`: the CLI's `run <pipeline> --profile connect
--no-engine`, once per pipeline): PySpark switches a whole process to Connect mode once it makes a
remote session, which the shared local session of this one must not see. The embedded side runs in
this process. Every Delta table each side writes (outputs and quarantine, not the run records) is
compared as a multiset of rows (tests/test_cluster.py's comparison).

The refusal tests start no server: validate and plan import no Spark, and run refuses before it
starts a session.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import REPO, empty_generated_folders
from tests.test_cluster import _tables
from tests.test_warm_engine import SLOW

#: The batch examples compared, each run once on each side
PIPELINES = [
    "service_calls",  # batch SQL and union; overwrite and merge outputs
    "service_instances",  # quality with quarantine, integration checks, SWA with the JVM fold shipped to the server
    "trading_correlation",  # group step with Python user functions (udfs/ in the server's Python workers), SQL
    "access_log",  # a text source: each line numbered and matched by Tributary's JVM functions on the server
]

_CONNECT_DRIVER = """
import json, os, sys, time, traceback
from typer.testing import CliRunner
import framework.engine.session as session_module
from framework import jvm
from framework.cli import app
runs = json.loads(sys.argv[1])
results = {}
runner = CliRunner()
for name, warehouse in runs:
    os.environ["WAREHOUSE"] = warehouse
    began = time.perf_counter()
    result = runner.invoke(app, ["run", name, "--profile", "connect", "--no-engine"], catch_exceptions=True)
    seconds = round(time.perf_counter() - began, 1)
    session_module.started_here = None  # keep the session for the next pipeline
    error = "".join(traceback.format_exception(result.exc_info[1])) if result.exc_info and result.exit_code not in (0, 2) else ""
    output = (result.stdout + result.stderr)[-6000:] + error[-4000:]
    results[name] = {"code": result.exit_code, "output": output, "seconds": seconds, "jvm_fold": dict(jvm._connect_sessions) != {}}
print("RESULTS" + json.dumps(results, default=str))
from pyspark.sql import SparkSession
active = SparkSession.getActiveSession()
if active is not None:
    active.stop()
"""


@pytest.fixture(scope="module")
def example_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example project with small generated inputs, the repository's `connect` profile and an
    embedded one."""
    from framework.generators.service_trace import generate_service_trace
    from framework.generators.ticks import generate_ticks

    root = tmp_path_factory.mktemp("connect-project")
    for folder in ("pipelines", "sql", "data", "udfs"):
        if (REPO / folder).exists():
            shutil.copytree(REPO / folder, root / folder)
    generate_service_trace(root / "data" / "samples" / "service_trace", instances=800, seed=3, files=2, corrupt=12)
    generate_ticks(root / "data" / "samples" / "ticks", requests=2, ticks=200)
    (root / "configs").mkdir()
    # strict, as a shared server would want: the runs' re-check of each step's SQL is sqlglot's only there
    connect = (REPO / "configs" / "connect.yaml").read_text() + "sql_policy: strict\n"
    (root / "configs" / "connect.yaml").write_text(connect)
    (root / "configs" / "local.yaml").write_text(
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 2\nwarehouse: ${WAREHOUSE}\n"
    )
    return root


@pytest.fixture(scope="module")
def runs(example_project: Path, connect_server, spark) -> dict[str, dict]:
    """Each example on both sides: the Connect client's child process runs while the embedded side
    runs in this one."""
    from framework.cli import app

    plan = [(name, str(example_project / "connect" / name)) for name in PIPELINES]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0", "SPARK_REMOTE": connect_server.url}
    env.pop("TRIBUTARY_PROFILE", None)
    # a file, not `python -c`: pyspark takes a main module without __file__ for its doctests and
    # exits (pyspark.sql.connect.utils.check_dependencies, reached through Great Expectations)
    script = example_project / "connect_driver.py"
    script.write_text(_CONNECT_DRIVER)
    driver = subprocess.Popen(
        [sys.executable, str(script), json.dumps(plan)],
        cwd=example_project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    embedded = {}
    runner = CliRunner()
    here = os.getcwd()
    os.chdir(example_project)
    try:
        for name in PIPELINES:
            os.environ["WAREHOUSE"] = str(example_project / "embedded" / name)
            began = time.perf_counter()
            result = runner.invoke(app, ["run", name, "--profile", "local"], catch_exceptions=False)
            seconds = round(time.perf_counter() - began, 1)
            embedded[name] = {"code": result.exit_code, "output": result.stdout + result.stderr, "seconds": seconds}
        try:
            out, err = driver.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"the Connect driver still ran after 600 s; the server's log ends:\n{connect_server.log.read_text()[-5000:]}"
            )
    finally:
        os.chdir(here)
        os.environ.pop("WAREHOUSE", None)
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    marker = [line for line in out.splitlines() if line.startswith("RESULTS")]
    assert marker, f"the Connect driver failed (exit {driver.returncode}):\n{out[-3000:]}\n{err[-5000:]}"
    remote = json.loads(marker[-1][len("RESULTS") :])
    # seconds per run on each side (shown with -s): what a pipeline costs on Connect
    print({name: {"embedded_s": embedded[name]["seconds"], "connect_s": remote[name]["seconds"]} for name in PIPELINES})
    return {"embedded": embedded, "connect": remote}


@pytest.mark.connect
@pytest.mark.spark
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_example_gives_the_same_tables_on_spark_connect(pipeline, example_project, runs):
    embedded, remote = runs["embedded"][pipeline], runs["connect"][pipeline]
    assert embedded["code"] == 0, f"embedded run failed: {embedded['output']}"
    assert remote["code"] == 0, f"Spark Connect run failed: {remote['output']}"
    # the server fixes its static confs when it starts: the client sets none of them
    assert "CANNOT_MODIFY_STATIC_CONFIG" not in remote["output"]
    on_embedded = _tables(example_project / "embedded" / pipeline)
    on_connect = _tables(example_project / "connect" / pipeline)
    assert on_embedded, "the embedded run wrote no table"
    assert sorted(on_connect) == sorted(on_embedded)
    for name, rows in on_embedded.items():
        assert sum(rows.values()) > 0 or "quarantine" in name, f"{name} is empty: the inputs are too small to compare"
        missing, extra = rows - on_connect[name], on_connect[name] - rows
        assert not missing and not extra, f"{name}: {sum(missing.values())} rows lost, {sum(extra.values())} extra on Connect"


@pytest.mark.connect
@pytest.mark.spark
def test_the_swa_fold_runs_in_the_servers_jvm_on_spark_connect(runs, connect_server):
    """No py4j on a Connect client: the client uploads Tributary's jar as a session artifact and
    names the fold with CREATE TEMPORARY FUNCTION (framework.jvm), instead of the pandas fold."""
    swa = runs["connect"]["service_instances"]
    assert swa["code"] == 0, swa["output"]
    assert swa["jvm_fold"], "the SWA step folded in pandas: the JVM fold was not registered on the server"
    log = connect_server.log.read_text()
    assert "tributary-jvm-" in log and "/artifacts/" in log, "the server never received Tributary's jar as an artifact"


# -- what a Connect profile refuses (no server needed) -----------------------------------------------


@pytest.fixture
def connect_project(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example project with the repository's `connect` profile, pointing at a port nothing
    listens on: a refusal must come before any connection."""
    empty_generated_folders(project)
    shutil.copy(REPO / "configs" / "connect.yaml", project / "configs" / "connect.yaml")
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:9")
    monkeypatch.setenv("WAREHOUSE", str(project / "warehouse"))
    return project


STREAM_REFUSAL = (
    "pipeline 'contact_join' is a stream, and profile 'connect' runs on Spark Connect (sc://127.0.0.1:9): each "
    "output commits its micro-batches through foreachBatch in this process"
)


@pytest.mark.parametrize("command", ["validate", "plan", "run"])
def test_a_streaming_pipeline_is_refused_on_spark_connect(command, connect_project, cli):
    args = [command, "contact_join", "--profile", "connect"] + (["--no-engine"] if command == "run" else [])
    code, out, err = cli(*args)
    text = " ".join((out + err).split())
    assert code == 2, text
    assert "pipelines/contact_join.yaml:6" in text  # the `mode: streaming` line
    assert STREAM_REFUSAL in text
    assert "run streaming pipelines with a profile that sets spark.master" in text
    assert "Traceback" not in text


def test_a_batch_pipeline_validates_on_spark_connect(connect_project, cli):
    """Strict too: on Connect the run re-checks each step's SQL with sqlglot only (docs/security.md)."""
    profile = connect_project / "configs" / "connect.yaml"
    profile.write_text(profile.read_text() + "sql_policy: strict\n")
    code, out, err = cli("validate", "service_calls", "--profile", "connect")
    assert code == 0, out + err


def test_a_run_says_when_no_spark_connect_server_answers(connect_project):
    """The Connect client retries an unreachable server for minutes (its backoff) before failing:
    the run checks the server's port first and says which URL from which profile."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0"}
    command = [sys.executable, "-m", "framework", "run", "service_calls", "--profile", "connect", "--no-engine"]
    began = time.monotonic()
    try:
        done = subprocess.run(command, cwd=connect_project, env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the run still waited for the server after 120 s")
    text = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, text
    assert "no Spark Connect server answers at sc://127.0.0.1:9 (profile 'connect', spark.remote)" in text
    assert "Traceback" not in text
    assert time.monotonic() - began < 60


@pytest.fixture(params=["never answers", "hangs up"])
def not_a_connect_server(request) -> Iterator[int]:
    """A port on 127.0.0.1 that takes connections but is no Spark Connect server: one that never
    answers (a stuck program, or one speaking another protocol and waiting for more bytes), or one
    that closes each connection at once (Spark's own RPC port does this to a gRPC client)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def hang_up() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                listener.accept()[0].close()

    closer = threading.Thread(target=hang_up, daemon=True)
    if request.param == "hangs up":
        closer.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        if closer.is_alive():
            closer.join()
        listener.close()


def test_a_run_says_when_what_answers_at_the_url_is_no_spark_connect_server(connect_project, not_a_connect_server):
    """A port that takes connections is not yet a server: PySpark's client waits on a listener that
    never answers for ever, and retries one that hangs up for minutes. The run asks the server one
    cheap question with a deadline first (check_connect_server)."""
    url = f"sc://127.0.0.1:{not_a_connect_server}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0", "SPARK_REMOTE": url}
    command = [sys.executable, "-m", "framework", "run", "service_calls", "--profile", "connect", "--no-engine"]
    began = time.monotonic()
    try:
        done = subprocess.run(command, cwd=connect_project, env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the run still waited on {url} after 120 s")
    text = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, text
    assert f"what listens at {url} (profile 'connect', spark.remote) is no Spark Connect server" in text
    assert "Traceback" not in text
    assert time.monotonic() - began < 60


@pytest.mark.connect
def test_a_connect_server_whose_port_is_taken_says_so_instead_of_pointing_at_another_program(tmp_path):
    """A port picked free can be taken before the server binds it. The server then stops, while the
    port still takes connections: the other program's. Knocking on the port to see whether the
    server was up is how the suite's Connect client once waited on another program for 15 minutes;
    start_connect_server waits for the server's own line, and says why it did not come up."""
    from framework.localcluster.connect import start_connect_server
    from tests.conftest import SHORT_LIVED_JIT

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError) as refused:
            server = start_connect_server(tmp_path, REPO, port=port, java_options=SHORT_LIVED_JIT, tied=True)
            server.stop()
    said = str(refused.value)
    assert said.startswith(f"the Spark Connect server did not come up (its log: {tmp_path / 'connect-server.log'})")
    assert f"Failed to bind to address /127.0.0.1:{port}" in said


# -- who may use a Connect server Tributary started ---------------------------------------------------

_CONNECT_INTRUDER = """
import sys
from pyspark.sql import SparkSession
try:
    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    print("RAN", spark.range(10).count())
except Exception as e:
    print("REFUSED", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
"""


@pytest.mark.connect
@pytest.mark.spark
def test_a_client_without_the_servers_token_runs_nothing_on_it(connect_server, tmp_path):
    """127.0.0.1 is every local user's, and a Connect server runs what its clients send as the user
    who started it. A plain PySpark client that knows the port, but not the server's token, must be
    refused, whichever name it dials the server by and whatever token it makes up."""
    script = tmp_path / "intruder.py"  # a file: see the `runs` fixture
    script.write_text(_CONNECT_INTRUDER)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_AUTHENTICATE_TOKEN")}
    for url in (
        f"sc://127.0.0.1:{connect_server.port}",
        f"sc://localhost:{connect_server.port}",
        f"sc://localhost:{connect_server.port}/;token=guessed",
    ):
        done = subprocess.run([sys.executable, str(script), url], env=env, capture_output=True, text=True, timeout=300)
        assert "RAN" not in done.stdout and "REFUSED" in done.stdout, (url, done.stdout, done.stderr[-3000:])


@pytest.mark.connect
@pytest.mark.spark
def test_a_run_without_the_servers_token_is_told_so(connect_project, connect_server, tmp_path):
    """A run of another user (here: another private folder) gets no token, and is told so in one
    line at once instead of a gRPC traceback."""
    url = f"sc://127.0.0.1:{connect_server.port}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0", "SPARK_REMOTE": url}
    env["TRIBUTARY_RUNTIME_DIR"] = str(tmp_path / "someone-else")
    env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
    command = [sys.executable, "-m", "framework", "run", "service_calls", "--profile", "connect", "--no-engine"]
    done = subprocess.run(command, cwd=connect_project, env=env, capture_output=True, text=True, timeout=120)
    text = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, text
    assert f"the Spark Connect server at {url} (profile 'connect', spark.remote) takes only clients with its token" in text
    assert "Traceback" not in text


class FreezableProxy:
    """A TCP relay on 127.0.0.1 in front of a Spark Connect server that can stop relaying, as a
    server does that stopped answering (a frozen or stuck process, a network dropping its packets),
    without touching the suite's server."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.running = threading.Event()  # set: relaying; clear: frozen
        self.running.set()
        self.closed = False
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client = self.listener.accept()[0]
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._relay, args=(source, sink), daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.running.wait()
                data = source.recv(65536)
                if not data:
                    break
                self.running.wait()  # frozen while it read: held, like a stuck server's input
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def freeze(self) -> None:
        self.running.clear()

    def close(self) -> None:
        self.closed = True
        self.running.set()
        for s in [self.listener, *self.sockets]:
            with contextlib.suppress(OSError):
                s.close()


class RunThroughProxy:
    """`tributary run service_calls --profile connect` in a process of its own, dialling the
    suite's server through a FreezableProxy; its output lines as they come."""

    def __init__(self, project: Path, server) -> None:
        self.project = project
        self.proxy = FreezableProxy(server.port)
        url = f"sc://localhost:{self.proxy.port}/;token={server.token}"
        env = {**os.environ, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0", "SPARK_REMOTE": url}
        command = [sys.executable, "-m", "framework", "run", "service_calls", "--profile", "connect", "--no-engine"]
        self.process = subprocess.Popen(
            command, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        self.lines: list[str] = []
        reader = partial(self.lines.extend, iter(self.process.stdout.readline, ""))  # type: ignore[union-attr]
        threading.Thread(target=reader, daemon=True).start()

    def until(self, text: str, seconds: float) -> bool:
        """Whether the run printed `text` within `seconds` (it may end before)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.process.poll() is None:
            if text in self.output():
                return True
            time.sleep(0.1)
        return text in self.output()

    def output(self) -> str:
        return "".join(self.lines)

    def text(self) -> str:
        """The output on one line (a message wrapped by the terminal's width is whole again)."""
        return " ".join(self.output().split())

    def outputs_committed(self) -> list[str]:
        return [o for o in ("service_stats", "daily_head_stats") if (self.project / "warehouse" / o / "_delta_log").exists()]

    def end(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.proxy.close()


@pytest.mark.connect
@pytest.mark.spark
def test_ctrl_c_stops_a_run_whose_spark_connect_server_stopped_answering(connect_project, connect_server):
    """PySpark answers the first Ctrl-C by asking the server to interrupt the operation, and that
    call waits inside gRPC's C code, where Python runs no signal handler: every later Ctrl-C was
    lost and the run hung. Now the user is told to press Ctrl-C again, which stops the run at once
    (exit 130), before any output was committed."""
    run = RunThroughProxy(connect_project, connect_server)
    try:
        assert run.until("computing", 180), run.output()[-3000:]
        run.proxy.freeze()
        time.sleep(1)
        run.process.send_signal(signal.SIGINT)
        assert run.until("press Ctrl-C again to stop at once", 30), run.output()[-3000:]
        run.process.send_signal(signal.SIGINT)
        try:
            code = run.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the run still waited for the server 30 s after the second Ctrl-C:\n" + run.output()[-3000:])
        assert code == 130, run.text()
        assert "interrupted: stopped without waiting for Spark" in run.text()
        assert "Traceback" not in run.text()
        assert run.outputs_committed() == []
    finally:
        run.end()


@pytest.mark.connect
@pytest.mark.spark
def test_a_run_whose_spark_connect_server_stopped_answering_fails_by_itself(connect_project, connect_server):
    """A server that stops answering in the middle of a run (a frozen process, a network dropping
    its packets) held the run for ever: it waited inside gRPC until someone pressed Ctrl-C twice.
    Now the run gives up on the server once it answered nothing for the profile's
    `spark.remote_silence_s`, and fails by itself (exit 1) saying so, with no output committed."""
    profile = connect_project / "configs" / "connect.yaml"
    profile.write_text(profile.read_text().replace("  app_name: tributary\n", "  app_name: tributary\n  remote_silence_s: 6\n"))
    run = RunThroughProxy(connect_project, connect_server)
    try:
        assert run.until("computing", 180), run.output()[-3000:]
        run.proxy.freeze()
        frozen = time.monotonic()
        try:
            code = run.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the run still waited for its server 60 s after it stopped answering:\n" + run.output()[-3000:])
        assert time.monotonic() - frozen >= 5, run.text()  # not before the silence it was given
        assert code == 1, run.text()
        shown = f"sc://localhost:{run.proxy.port}/;token=…"
        said = f"the Spark Connect server at {shown} (profile 'connect', spark.remote) stopped answering: nothing for 6 s"
        assert said in run.text()
        assert "Traceback" not in run.text() and "Rendezvous" not in run.text()
        assert connect_server.token not in run.text()
        assert run.outputs_committed() == []
    finally:
        run.end()


#: the warm engine tests' slow pipeline, scheduled hourly for one interval, with a 20 s job
NAPPING_HOURLY = SLOW.replace(
    "name: slow\n",
    'name: napping\nschedule: {cron: "0 * * * *", start: 2026-11-02T08:00:00Z, end: 2026-11-02T09:00:00Z, timeout: 8s, retries: 0}\n',
).replace("cast(1500 as bigint)", "cast(20000 as bigint)")


@pytest.mark.connect
@pytest.mark.spark
@pytest.mark.parametrize("server", ["answers", "stopped answering"])
def test_a_scheduled_run_on_spark_connect_times_out_even_when_its_server_stopped_answering(
    connect_project, connect_server, server
):
    """At its `timeout:` a scheduled run on Spark Connect is interrupted on the server. A server that
    stopped answering answers neither the run nor the interrupt: the scheduler waited for ever, and
    no later run came. Now the client lets go of that server, the run is logged as timed out, and
    the scheduler goes on."""
    from framework.schedule.history import TIMED_OUT, RunLog
    from tests.conftest import delta_version, write
    from tests.test_scheduler import _log

    write(connect_project / "pipelines/napping.yaml", NAPPING_HOURLY)
    (connect_project / "pipelines/calls_per_interval.yaml").unlink()  # the one example with a schedule
    write(connect_project / "incoming/calls.json", '{"head_service": "/a.html", "response_ms": 1}\n')
    proxy = FreezableProxy(connect_server.port)
    url = f"sc://localhost:{proxy.port}/;token={connect_server.token}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0", "SPARK_REMOTE": url}
    log = connect_project / "scheduler.log"
    command = [sys.executable, "-m", "framework", "scheduler", "napping", "--profile", "connect", "--no-engine"]
    process = subprocess.Popen(
        command, cwd=connect_project, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 180
        while delta_version(connect_project / "warehouse/_tributary/events") is None and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            time.sleep(0.2)
        time.sleep(3.0)  # planning the run, or waiting for its 20 s job
        if server == "stopped answering":
            proxy.freeze()
        deadline = time.monotonic() + 90
        while "nothing more to run" not in log.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            time.sleep(0.5)
        assert "nothing more to run" in log.read_text(), "the scheduler still waited for the server:\n" + log.read_text()
        [slot] = RunLog(*_log(connect_project)).slots("napping").values()
        assert [r.outcome for r in slot.runs] == [TIMED_OUT], log.read_text()
        assert delta_version(connect_project / "warehouse/napped") is None
        text = " ".join(log.read_text().split())
        assert "timed out after 8 s (timeout: in the schedule)" in text
        let_go = "the Spark Connect server at sc://localhost:{}/;token=… answered neither the run nor its interrupt for 10 s"
        assert (let_go.format(proxy.port) in text) == (server == "stopped answering"), text
        assert "Traceback" not in text and "Rendezvous" not in text
        assert connect_server.token not in text  # the URL is shown without its token
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        proxy.close()
