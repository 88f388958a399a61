"""Shared fixtures: one local SparkSession for the whole test session, a fresh project per test."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from framework.engine.jit import FIRST_TIER_ONLY

REPO = Path(__file__).resolve().parents[1]
# Tests run Spark in the test session (or in their own `tributary run` processes, which they may
# kill): never through a warm engine, unless a test asks for one (tests/test_warm_engine.py).
os.environ["TRIBUTARY_ENGINE"] = "0"
#: The JIT's first tier only, for the cluster's and the Connect server's JVMs: they live a few
#: minutes on inputs of a few thousand rows, where the optimising tier (C2) costs more CPU than it
#: gives back, with up to six JVMs on two cores. tests/test_cluster.py took 195 s instead of 285 s,
#: tests/test_connect.py 63 s instead of 72 s (2026-11-28). The tests' own session keeps both tiers:
#: it runs the whole suite, and the first tier alone made the suite slower (CONTRIBUTING.md).
SHORT_LIVED_JIT = FIRST_TIER_ONLY


#: Test workers (pytest-xdist, `-n auto --dist loadfile` in setup.cfg): one per core, at most this
#: many, each with its own SparkSession (`local[2]`) and the JVMs its tests start. A file's tests
#: run on one worker, in order: its module fixtures (a warm engine its tests share) are made once.
MOST_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker per core, at most MOST_WORKERS."""
    return max(1, min(MOST_WORKERS, os.cpu_count() or 1))


@pytest.fixture(scope="session")
def spark():
    from framework.engine.session import spark_session
    from framework.profiles import Profile, SparkSettings

    profile = Profile(
        spark=SparkSettings(master="local[2]", app_name="tributary-tests", conf={"spark.sql.shuffle.partitions": 2})
    )
    session = spark_session(profile)
    import framework.engine.session as session_module

    session_module.started_here = None  # owned by the tests: `tributary run` in-process must not stop it
    yield session
    session.stop()


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory):
    """One Spark standalone master and two one-core workers for the whole session (framework/localcluster).

    Its JVMs (and a driver started with `cluster.env`) run the JIT's first tier only (SHORT_LIVED_JIT).
    Tied to this process: a test session SIGKILLed leaves no master or worker running."""
    from framework.localcluster.launcher import start_cluster

    folder = tmp_path_factory.mktemp("standalone")
    cluster = start_cluster(folder, workers=2, cores=1, memory="1g", java_options=SHORT_LIVED_JIT, tied=True)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory):
    """One Spark Connect server on 127.0.0.1 for the whole session (framework/localcluster/connect.py),
    on the JIT's first tier only (SHORT_LIVED_JIT)."""
    from framework.localcluster.connect import start_connect_server

    server = start_connect_server(tmp_path_factory.mktemp("connect"), REPO, java_options=SHORT_LIVED_JIT, tied=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the repo's example project (pipelines, sql, data) with its own warehouse."""
    for folder in ("pipelines", "sql", "data", "udfs"):
        if (REPO / folder).exists():
            shutil.copytree(REPO / folder, tmp_path / folder)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "local.yaml").write_text(
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 2\nwarehouse: ./warehouse\n"
    )
    return tmp_path


@pytest.fixture
def cli(project: Path, monkeypatch: pytest.MonkeyPatch):
    """Invoke the CLI in-process from the project folder; returns (exit code, stdout, stderr)."""
    from framework.cli import app

    monkeypatch.chdir(project)
    monkeypatch.delenv("TRIBUTARY_PROFILE", raising=False)
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return invoke


#: example data that `tributary generate` makes (not in the repository): validate refuses a missing source path
GENERATED = ("data/samples/service_trace/static", "data/samples/service_trace/images") + tuple(
    f"data/samples/ticks/{s}" for s in ("MCD", "BKC", "WEN", "YUM", "SBX")
)


def empty_generated_folders(project: Path) -> None:
    """The folders of the generated example data, empty where missing (enough to validate the examples)."""
    for folder in GENERATED:
        (project / folder).mkdir(parents=True, exist_ok=True)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def delta_rows(table: Path, order_by: str | None = None) -> list[dict]:
    """Read a Delta table back with delta-rs (not Spark), as plain dicts."""
    from framework.io.delta.delta_rs import DeltaRsStore

    sql = "SELECT * FROM t" + (f" ORDER BY {order_by}" if order_by else "")
    return DeltaRsStore().query(str(table), sql).to_pylist()


def log_scheduled_runs(project: Path, pipeline: str, intervals: list) -> None:
    """Each interval run ok by the scheduler, logged as the scheduler logs it (the run's
    `run_start` and `run_end`, the attempt's `schedule` event) into the project's run log, in one
    commit (framework.schedule.history reads them back as done)."""
    import pyarrow as pa

    from framework.engine.events import EVENT_SCHEMA, EventLog
    from framework.engine.results import RunStatus
    from framework.io.delta.delta_rs import DeltaRsStore

    store, table = DeltaRsStore(), str(project / "warehouse/_tributary/events")
    rows: list[dict] = []
    for n, interval in enumerate(intervals):
        events = EventLog(store, table, f"run-{n}", pipeline)
        events.record("run_start", status=RunStatus.RUNNING, details={"interval": interval.as_dict(), "tables": {}})
        events.record("run_end", status=RunStatus.OK, duration_s=1.0, details={"exit_code": 0})
        fire = interval.end.isoformat()
        attempt = {"trigger": "schedule", "interval": interval.as_dict(), "fire": fire, "attempt": 1, "exit_code": 0}
        events.record("schedule", status="ok", duration_s=1.0, details={**attempt, "started_at": fire, "finished_at": fire})
        rows += events.pending
    store.append_rows(table, pa.Table.from_pylist(rows, schema=EVENT_SCHEMA))


def delta_version(table: Path) -> int | None:
    from framework.io.delta.delta_rs import DeltaRsStore

    return DeltaRsStore().version(str(table))


def kill_while_committing(
    project: Path, pipeline: str, table: Path, rng, kills: int, attempts: int, commits: int = 2, linger: float = 0.8
) -> int:  # a random.Random
    """Start `tributary run` up to `attempts` times; SIGKILL each start (process group) once `table`
    has 1 to `commits` more versions, plus up to `linger` seconds, until `kills` kills landed.
    Returns the kills that landed (a run that ended first was not killed)."""
    landed = 0
    for _ in range(attempts):
        if landed == kills:
            break
        process = start_run(project, pipeline)
        target = (delta_version(table) or -1) + rng.randint(1, commits)
        # a bound, not a wait: at a load average of 25 a JVM's start and first commit took over 120 s
        deadline = time.time() + 300
        while time.time() < deadline and process.poll() is None and (delta_version(table) or -1) < target:
            time.sleep(0.02)
        time.sleep(rng.uniform(0, linger))
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            landed += 1
        process.wait()
    return landed


def start_run(project: Path, pipeline: str) -> subprocess.Popen:
    """`tributary run` in its own process group, so a test can SIGKILL it and everything it started."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.Popen(
        [sys.executable, "-m", "framework", "run", pipeline],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
