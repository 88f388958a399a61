"""The example pipelines on a real Spark cluster give exactly the tables they give embedded.

Embedded `local[N]` runs every task in the driver's JVM; on a standalone cluster (framework/localcluster:
a master and two one-core workers on 127.0.0.1) the tasks run in executors of their own, so the
udfs and the SWA fold must ship, Parquet is staged by executors and committed on the driver, and
streaming checkpoints are written by other processes. Each example runs once on each side, into a
warehouse of its own, and every Delta table it writes (outputs and quarantine) is compared as a
multiset of rows.

The cluster side runs in one child process (`_CLUSTER_DRIVER`: the CLI's
`run <pipeline> --profile standalone --no-engine`, once per pipeline, on one session) so the suite
pays one driver JVM and one set of executors, not one per pipeline; the embedded side runs through
the CLI in the test process on the shared local session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import REPO, delta_rows

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

#: The examples compared; streaming ones run available-now (no --continuous).
PIPELINES = [
    "service_instances",  # batch: quality with quarantine, SWA with the JVM fold
    "access_log_streaming",  # text source (regex, _file/_line) as an available-now stream: checkpoints, SWA state
    "contact_join",  # streaming time join
    "trading_correlation",  # context join, group step, udfs
    "hit_pairs",  # streaming count-window join (per micro-batch, its own state files), written below
]
#: No example has a count-window join: this stream pairs each user's hits with their next ones.
HIT_PAIRS = """\
name: hit_pairs
mode: streaming
sources:
  hits: {format: json, path: landing/hits, schema: "user STRING, ts TIMESTAMP, ms INT", event_time: ts, watermark: 10s, max_files_per_trigger: 2}
  again: {format: json, path: landing/hits, schema: "user STRING, ts TIMESTAMP, ms INT", event_time: ts, watermark: 10s, max_files_per_trigger: 2}
steps:
  pairs:
    join: {left: hits, right: again, on: [user], last: {left: 2, right: 2}, tiebreak: [ms], partitions: 3}
outputs:
  pairs: {from: pairs, mode: append}
"""
# Not here, to keep this file within minutes on a 2-core machine (each run is ~30-100 s there):
# service_calls (batch SQL, covered by the steps above), access_log (the batch twin of
# access_log_streaming), trading_correlation_streaming (the stream twin of trading_correlation).

#: Tables of the run log that name runs, times or hosts: they differ between any two runs.
_RUN_RECORDS = {"events", "quality", "integration_quality", "staging", "checkpoints", "state"}
#: Columns that name a run or when it wrote
_RUN_COLUMNS = {"_run_id", "run_id", "_loaded_at", "_quarantined_at", "quarantined_at", "_ingested_at", "at", "ts_written"}

_CLUSTER_DRIVER = """
import json, os, sys, traceback
from typer.testing import CliRunner
import framework.engine.session as session_module
from framework.cli import app
runs = json.loads(sys.argv[1])
results = {}
runner = CliRunner()
for name, warehouse in runs:
    os.environ["TRIBUTARY_TEST_WAREHOUSE"] = warehouse
    result = runner.invoke(app, ["run", name, "--profile", "standalone", "--no-engine"], catch_exceptions=True)
    session_module.started_here = None  # keep the session (and its executors) for the next pipeline
    error = "".join(traceback.format_exception(result.exc_info[1])) if result.exc_info and result.exit_code not in (0, 2) else ""
    results[name] = [result.exit_code, (result.stdout + result.stderr)[-4000:] + error[-4000:]]
print("RESULTS" + json.dumps(results))
from pyspark.sql import SparkSession
active = SparkSession.getActiveSession()
if active is not None:
    active.stop()
"""


#: Another user of the machine: 127.0.0.1 is theirs too. A plain PySpark driver, without the
#: cluster's secret, asks the master for executors.
_INTRUDER = """
import sys
from pyspark.sql import SparkSession
try:
    spark = SparkSession.builder.master(sys.argv[1]).appName("intruder").getOrCreate()
    print("RAN", spark.range(10).count())
except Exception as e:
    print("REFUSED", type(e).__name__)
"""


def _profile(master: str) -> str:
    """configs/cluster.yaml with the fixture's master and a per-run warehouse (shuffles kept small).

    Its `delta_writer: spark` needs Delta's Spark jars on the class path (spark.jars.packages
    io.delta:delta-spark_2.13, fetched from Maven), which pyspark does not ship and this suite
    cannot download: here the executors stage Parquet and the driver commits it with delta-rs
    (`auto`), the default profile's writer."""
    text = (REPO / "configs" / "cluster.yaml").read_text()
    text = text.replace("${SPARK_MASTER:-spark://localhost:7077}", master)
    text = text.replace("${WAREHOUSE:-/data/warehouse}", "${TRIBUTARY_TEST_WAREHOUSE}")
    text = text.replace("spark.sql.shuffle.partitions: 64", "spark.sql.shuffle.partitions: 4")
    text = text.replace("delta_writer: spark", "delta_writer: auto")
    drop = ("spark.sql.extensions:", "spark.sql.catalog.spark_catalog:")
    return "".join(line for line in text.splitlines(keepends=True) if not line.strip().startswith(drop))


@pytest.fixture(scope="module")
def example_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example project with small generated inputs, a `standalone` and an embedded profile."""
    from framework.generators.access_log import generate_access_log
    from framework.generators.service_trace import generate_service_trace
    from framework.generators.ticks import generate_ticks

    root = tmp_path_factory.mktemp("cluster-project")
    for folder in ("pipelines", "sql", "data", "udfs"):
        if (REPO / folder).exists():
            shutil.copytree(REPO / folder, root / folder)
    generate_service_trace(root / "data" / "samples" / "service_trace", instances=800, seed=3, files=2, corrupt=12)
    generate_ticks(root / "data" / "samples" / "ticks", requests=2, ticks=200)
    # six files per server: the stream (four files a trigger) takes three micro-batches, so a worker
    # can be lost between two of them
    shutil.rmtree(root / "data" / "samples" / "access_log")
    generate_access_log(root / "data" / "samples" / "access_log", instances=60, files=6)
    from tests.test_stream_chain import _land, hit_files

    (root / "pipelines" / "hit_pairs.yaml").write_text(HIT_PAIRS)
    _land(root, hit_files(4, files=4, rows=25))
    (root / "configs").mkdir()
    (root / "configs" / "local.yaml").write_text(
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 2\nwarehouse: ${TRIBUTARY_TEST_WAREHOUSE}\n"
    )
    return root


@pytest.fixture(scope="module")
def runs(example_project: Path, standalone_cluster, spark) -> dict[str, dict[str, list]]:
    """Each example on both sides: the cluster's child process runs while the embedded side runs in
    this one (both mostly wait on JVMs starting and tasks scheduling), then (exit code, output) per
    pipeline and side."""
    from framework.cli import app

    (example_project / "configs" / "standalone.yaml").write_text(_profile(standalone_cluster.master))
    plan = [(name, str(example_project / "cluster" / name)) for name in PIPELINES]
    env = {**standalone_cluster.env, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0"}
    # a file, not `python -c`: pyspark takes a main module without __file__ for its doctests and
    # exits (pyspark.sql.connect.utils.check_dependencies, reached through Great Expectations)
    script = example_project / "cluster_driver.py"
    script.write_text(_CLUSTER_DRIVER)
    driver = subprocess.Popen(
        [sys.executable, str(script), json.dumps(plan)],
        cwd=example_project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    intruder_script = example_project / "intruder.py"
    intruder_script.write_text(_INTRUDER)
    intruder = subprocess.Popen(  # meanwhile: its registration is refused, and retried for about a minute
        [sys.executable, str(intruder_script), standalone_cluster.master],
        cwd=example_project, env=standalone_cluster.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    embedded = {}
    runner = CliRunner()
    here = os.getcwd()
    os.chdir(example_project)
    try:
        for name in PIPELINES:
            os.environ["TRIBUTARY_TEST_WAREHOUSE"] = str(example_project / "embedded" / name)
            result = runner.invoke(app, ["run", name, "--profile", "local"], catch_exceptions=False)
            embedded[name] = [result.exit_code, result.stdout + result.stderr]
        out, err = driver.communicate(timeout=900)
        intruded, _ = intruder.communicate(timeout=300)
    finally:
        os.chdir(here)
        os.environ.pop("TRIBUTARY_TEST_WAREHOUSE", None)
        for process in (driver, intruder):
            if process.poll() is None:
                process.kill()
                process.wait()
    marker = [line for line in out.splitlines() if line.startswith("RESULTS")]
    assert marker, f"the cluster driver failed (exit {driver.returncode}):\n{out[-3000:]}\n{err[-5000:]}"
    return {"embedded": embedded, "cluster": json.loads(marker[-1][len("RESULTS") :]), "intruder": intruded}


def _tables(warehouse: Path) -> dict[str, Counter]:
    """Every Delta table under the warehouse but the run records, as a multiset of rows (floats to
    12 significant digits: a sum's last bits depend on the order its partitions were added)."""
    tables = {}
    for log in sorted(warehouse.rglob("_delta_log")):
        table = log.parent
        name = str(table.relative_to(warehouse))
        if set(Path(name).parts) & _RUN_RECORDS:
            continue
        rows = Counter()
        for row in delta_rows(table):
            rows[tuple(sorted((k, _plain(v)) for k, v in row.items() if k not in _RUN_COLUMNS))] += 1
        tables[name] = rows
    return tables


def _plain(value):
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return tuple(sorted((k, _plain(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    return value


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_example_gives_the_same_tables_on_a_standalone_cluster(pipeline, example_project, runs):
    code, out = runs["embedded"][pipeline]
    assert code == 0, f"embedded run failed: {out}"
    code, out = runs["cluster"][pipeline]
    assert code == 0, f"cluster run failed: {out}"
    embedded = _tables(example_project / "embedded" / pipeline)
    on_cluster = _tables(example_project / "cluster" / pipeline)
    assert embedded, "the embedded run wrote no table"
    assert sorted(on_cluster) == sorted(embedded)
    for name, rows in embedded.items():
        assert sum(rows.values()) > 0 or "quarantine" in name, f"{name} is empty: the inputs are too small to compare"
        missing, extra = rows - on_cluster[name], on_cluster[name] - rows
        assert not missing and not extra, f"{name}: {sum(missing.values())} rows lost, {sum(extra.values())} extra on the cluster"


def test_a_worker_killed_mid_stream_loses_and_duplicates_nothing(example_project, runs, standalone_cluster):
    """SIGKILL one worker (and its executor) once the stream's first micro-batch has committed: Spark
    reruns the lost tasks on the other worker, or the run fails and a second run resumes from the
    checkpoint. Either way the tables equal the uninterrupted (embedded) run's: 0 lost, 0 duplicated.
    Runs last in this file: the killed worker is started again at the end."""
    import time

    name = "access_log_streaming"
    assert runs["embedded"][name][0] == 0, runs["embedded"][name][1]
    warehouse = example_project / "killed" / name
    env = {**standalone_cluster.env, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0", "TRIBUTARY_TEST_WAREHOUSE": str(warehouse)}
    command = [sys.executable, "-m", "framework", "run", name, "--profile", "standalone", "--no-engine"]
    run = subprocess.Popen(command, cwd=example_project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    commits = warehouse / "_tributary" / "checkpoints" / name
    deadline = time.monotonic() + 300
    while not any(commits.rglob("commits/0")) and run.poll() is None:
        assert time.monotonic() < deadline, "no micro-batch committed"
        time.sleep(0.2)
    killed_mid_run = run.poll() is None
    standalone_cluster.kill_worker(0)
    try:
        out = run.communicate(timeout=400)[0]
        attempts = [(run.returncode, out)]
        if run.returncode != 0:  # restarted: the checkpoint says where to go on
            again = subprocess.run(command, cwd=example_project, env=env, capture_output=True, text=True, timeout=400)
            attempts.append((again.returncode, again.stdout + again.stderr))
    finally:
        standalone_cluster.start_worker(0)
    assert killed_mid_run, "the stream ended before the kill: nothing was tested"
    assert attempts[-1][0] == 0, attempts
    embedded = _tables(example_project / "embedded" / name)
    after_kill = _tables(warehouse)
    assert sorted(after_kill) == sorted(embedded)
    for table, rows in embedded.items():
        missing, extra = rows - after_kill[table], after_kill[table] - rows
        assert not missing and not extra, f"{table}: {sum(missing.values())} rows lost, {sum(extra.values())} duplicated"


def test_a_driver_without_the_clusters_secret_runs_nothing_on_it(runs, standalone_cluster):
    """The master and workers listen on 127.0.0.1, which every user of the machine reaches, and the
    workers run an application's code as the user who started them: they take only applications
    that hold the cluster's secret (framework.cluster_auth), as the examples' driver does."""
    from framework.localcluster.launcher import master_state

    assert "RAN" not in runs["intruder"] and "REFUSED" in runs["intruder"], runs["intruder"]
    state = master_state(standalone_cluster.web_ui)
    applications = [a.get("name") for a in state.get("activeapps", []) + state.get("completedapps", [])]
    assert applications and "intruder" not in applications, applications
    assert "Expected SaslMessage" in (standalone_cluster.folder / "master.log").read_text()


def test_the_clusters_jvms_and_executors_run_the_java_options_it_was_started_with(runs, standalone_cluster):
    """start_cluster's `java_options` (the suite's SHORT_LIVED_JIT) reach the master, the workers and
    the executors they started for the runs (each JVM's launcher says so in its own log)."""
    from tests.conftest import SHORT_LIVED_JIT

    def picked_up(log: Path) -> bool:
        lines = log.read_text(errors="replace").splitlines()
        return any(line.startswith("NOTE: Picked up JDK_JAVA_OPTIONS:") and SHORT_LIVED_JIT in line for line in lines)

    daemons = sorted(standalone_cluster.folder.glob("*.log"))
    executors = sorted(standalone_cluster.folder.glob("work-*/app-*/*/stderr"))
    assert len(daemons) >= 3 and executors, (daemons, executors)
    assert [log for log in daemons + executors if not picked_up(log)] == []
