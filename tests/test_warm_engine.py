"""The warm engine with real processes: `tributary` commands hand their runs to one long-lived
engine process (its own JVM) over a Unix socket, in a runtime folder of the test's own.

One engine serves the whole module (a JVM start is the cost these tests are about); it is stopped
at the end with `tributary engine stop`, which the last check verifies.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, delta_rows, delta_version, write

pytestmark = pytest.mark.spark

SLOW = """\
name: slow
vars: {label: first}
sources:
  calls:
    format: json
    path: incoming
    schema: head_service STRING, response_ms INT
steps:
  napped:
    sql: |
      select head_service, response_ms, {{ var('label') | lit }} as label,
             reflect('java.lang.Thread', 'sleep', cast(1500 as bigint)) as napped
      from {{ source('calls') }}
outputs:
  napped: {mode: overwrite}
"""


class Warm:
    """`tributary` in subprocesses of a project, with the warm engine on and a runtime folder of its own."""

    def __init__(self, project: Path, runtime: Path):
        self.project, self.runtime = project, runtime
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUTARY_")}
        self.env.update({"TRIBUTARY_RUNTIME_DIR": str(runtime), "TRIBUTARY_CLASS_ARCHIVE": "0", "PYSPARK_PYTHON": sys.executable})

    def __call__(self, *args: str, cwd: Path | None = None, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "framework", *args],
            cwd=cwd or self.project,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "framework", *args],
            cwd=self.project,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def engines(self) -> list[dict]:
        done = self("engine", "status", "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def wait_until(self, check, timeout: float = 120.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            engines = self.engines()
            if check(engines):
                return engines
            time.sleep(0.3)
        raise AssertionError(f"engines never got there: {self.engines()}")


def _copy_project(target: Path) -> Path:
    for folder in ("pipelines", "sql", "data", "udfs"):
        shutil.copytree(REPO / folder, target / folder)
    write(
        target / "configs/local.yaml",
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 2\nwarehouse: ./warehouse\n",
    )
    return target


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    runtime = Path(tempfile.mkdtemp(prefix="trw-"))  # short: a socket path has at most 108 bytes
    helper = Warm(_copy_project(tmp_path_factory.mktemp("warm")), runtime)
    yield helper
    stopped = helper("engine", "stop")
    pids = [int(pid) for pid in re.findall(r"\(pid (\d+)", stopped.stdout)]  # "(pid N)", "(pid N, interrupting …)"
    assert pids, stopped.stdout
    for pid in pids:  # stop waits until each engine lets go of its lock, which it holds until it exits
        assert not _running(pid)
    assert helper.engines() == []
    shutil.rmtree(runtime, ignore_errors=True)


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (an engine's parent, the client that started it, is gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def _table(project: Path, name: str, key: str) -> list[dict]:
    return delta_rows(project / "warehouse" / name, order_by=key)


def test_runs_go_through_one_engine_and_write_what_the_embedded_run_writes(warm, spark, cli, project):
    code, _, err = cli("run", "service_calls")  # embedded, in the test session
    assert code == 0, err

    first = warm("run", "service_calls")
    assert first.returncode == 0, first.stderr
    assert "starting a warm Spark engine" in first.stderr
    assert "service_calls · profile local" in first.stdout and "written" in first.stdout
    [engine] = warm.engines()
    assert engine["runs"] == 1 and engine["busy"] is None and engine["master"] == "local[2]"
    assert Path(engine["socket"]).is_socket() and (os.stat(warm.runtime).st_mode & 0o777) == 0o700

    for name, key in (("service_stats", "requested_service, head_service"), ("daily_head_stats", "day, head_service")):
        assert _table(warm.project, name, key) == _table(project, name, key)

    again = warm("run", "service_calls", "--show", "2")
    assert again.returncode == 0, again.stderr
    assert "starting" not in again.stderr and "service_stats (first 2 rows)" in again.stdout
    [same] = warm.engines()
    assert same["pid"] == engine["pid"] and same["runs"] == 2


def test_bad_input_through_the_engine_is_exit_2_with_the_embedded_message(warm, spark, cli, project):
    broken = (
        "name: broken\nsources:\n  s: {format: json, path: data, schema: 'a INT'}\n"
        "steps:\n  t: {sql: \"select {{ var('nope') }} from {{ source('s') }}\"}\noutputs:\n  t: {mode: overwrite}\n"
    )
    write(project / "pipelines/broken.yaml", broken)
    write(warm.project / "pipelines/broken.yaml", broken)
    code, _, embedded_err = cli("run", "broken")
    runs = warm.engines()[0]["runs"]

    through = warm("run", "broken")
    assert through.returncode == code == 2
    assert through.stderr == embedded_err and "var('nope') is not defined" in through.stderr
    assert warm.engines()[0]["runs"] == runs + 1  # the engine checked it (it takes runs at once when it is up)


def test_interrupting_the_client_cancels_the_run_and_leaves_the_tables(warm):
    write(warm.project / "pipelines/slow.yaml", SLOW)
    write(
        warm.project / "incoming/calls.json", "".join(f'{{"head_service": "/{i}.html", "response_ms": {i}}}\n' for i in range(4))
    )
    done = warm("run", "slow")
    assert done.returncode == 0, done.stderr
    table = warm.project / "warehouse/napped"
    before = delta_rows(table, order_by="head_service")
    assert delta_version(table) == 0 and {r["label"] for r in before} == {"first"}
    pid = warm.engines()[0]["pid"]

    for signum, code in ((signal.SIGINT, 130), (signal.SIGKILL, -signal.SIGKILL)):
        client = warm.start("run", "slow", "--var", "label=second")
        warm.wait_until(lambda engines: engines and engines[0]["busy"] == "run slow")
        time.sleep(1.0)  # inside the napping stage
        os.killpg(client.pid, signum)
        _, err = client.communicate(timeout=120)
        assert client.returncode == code, err
        if signum == signal.SIGINT:
            assert "interrupted; outputs stay at their previous version" in err
        [engine] = warm.wait_until(lambda engines: engines and engines[0]["busy"] is None)
        assert engine["pid"] == pid
        assert delta_version(table) == 0 and delta_rows(table, order_by="head_service") == before

    done = warm("run", "slow", "--var", "label=third")  # the engine goes on after both
    assert done.returncode == 0, done.stderr
    assert delta_version(table) == 1 and {r["label"] for r in delta_rows(table)} == {"third"}


def test_other_spark_settings_get_their_own_engine_which_stops_when_idle(warm, tmp_path):
    """The engine a checked pipeline's run starts imports Great Expectations while its JVM starts
    (framework.engine.preload), and says so in its log."""
    other = _copy_project(tmp_path / "other")
    write(
        other / "configs/local.yaml",
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 3\nwarehouse: ./warehouse\n",
    )
    checked = other / "pipelines/service_calls.yaml"
    step = "    union: [static_calls, image_calls]\n"
    assert step in checked.read_text()
    checks = "    expectations:\n      - expect_column_values_to_not_be_null: {column: head_service}\n        severity: warn\n"
    checked.write_text(checked.read_text().replace(step, step + checks))
    first = warm.engines()[0]
    done = warm("run", "service_calls", cwd=other, TRIBUTARY_ENGINE_IDLE="0.1")
    assert done.returncode == 0, done.stderr
    assert "starting a warm Spark engine" in done.stderr and "stops after 0.1 min idle" in done.stderr
    engines = warm.engines()
    assert len(engines) == 2
    second = next(e for e in engines if e["key"] != first["key"])
    assert second["pid"] != first["pid"] and second["spark"]["conf"] == {"spark.sql.shuffle.partitions": 3}
    ready = next(line for line in Path(second["log"]).read_text().splitlines() if ": ready in " in line)
    assert f"(imported Great Expectations meanwhile, for {checked.resolve()})" in ready, ready

    left = warm.wait_until(lambda engines: len(engines) == 1, timeout=90)  # idle for 6 s: it stops
    assert left[0]["pid"] == first["pid"]
    assert not Path(second["socket"]).exists()


def test_engine_start_warms_the_engine_up_until_a_command_comes(warm, tmp_path):
    """An engine `tributary engine start` starts runs tests of its own while it waits (framework.warm.
    warm_up); a command that comes stops them at once, is not told to wait, and runs; the warm-up's
    folder is gone after."""
    other = _copy_project(tmp_path / "other")
    write(
        other / "configs/local.yaml",
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 5\nwarehouse: ./warehouse\n",
    )
    started = warm("engine", "start", cwd=other, TRIBUTARY_ENGINE_IDLE="0.1")
    assert started.returncode == 0, started.stderr
    assert "warming up" in started.stdout
    [engine] = [e for e in warm.engines() if e["spark"]["conf"] == {"spark.sql.shuffle.partitions": 5}]
    assert engine["warming_up"] is True and engine["busy"] is None and engine["runs"] == 0
    time.sleep(3.0)  # inside the warm-up's tests (they take tens of seconds)
    assert list(warm.runtime.glob("warm-up-*")), "the warm-up's copy of its project is where it runs"

    done = warm("test", "service_calls", "--select", "both_streams_are_stacked", cwd=other)
    assert done.returncode == 0, done.stderr
    assert "1 passed, 0 failed" in done.stdout and "waiting" not in done.stderr
    log = Path(engine["log"]).read_text()
    assert "warm-up: stopped: a command came" in log and "test service_calls: exit 0" in log
    assert not list(warm.runtime.glob("warm-up-*"))
    [after] = [e for e in warm.engines() if e["pid"] == engine["pid"]]
    assert after["warming_up"] is False and after["runs"] == 1
    warm.wait_until(lambda engines: all(e["pid"] != engine["pid"] for e in engines), timeout=90)  # idle: it stops


def test_an_engine_that_will_warm_up_says_so_before_its_main_thread_begins(spark, tmp_path):
    """`engine start` asks for the status as soon as the engine listens, which can be before the
    engine's main thread has begun its warm-up (CI met this race): the engine is warming up from
    the start, until the warm-up is over or a command that came first skipped it."""
    from framework.warm.place import EnginePlace
    from framework.warm.server import Engine

    def engine(warm_up: bool) -> Engine:
        return Engine(EnginePlace(tmp_path, "k"), spark, 60.0, lambda *_: 0, {}, warm_up=warm_up)

    waiting = engine(warm_up=True)
    assert waiting.status()["warming_up"] is True and waiting.status()["busy"] is None
    waiting.waiting.put(object())  # a command came first
    assert waiting._warm_up(waiting.warm_up) is None
    assert waiting.status()["warming_up"] is False
    assert engine(warm_up=False).status()["warming_up"] is False


def test_the_warm_up_passes_its_own_tests_and_leaves_nothing(spark, tmp_path):
    """The warm-up project (framework/warm/warm-up-project) stays a valid project whose tests pass:
    a warm-up that failed would warm nothing, and say so only in the engine's log. The folder of a
    warm-up whose engine was killed is removed by the next one."""
    from framework.warm.warm_up import warm_up

    killed = tmp_path / "warm-up-999999999-x1y2" / "project"  # an engine killed during its warm-up
    killed.mkdir(parents=True)
    what = warm_up(tmp_path)
    assert what.startswith("3 tests in") and "failed" not in what, what
    assert list(tmp_path.iterdir()) == []


def test_which_commands_use_the_engine_and_what_they_send_it(monkeypatch):
    from typer.main import get_command

    from framework.cli import app
    from framework.profiles import Profile, SparkSettings
    from framework.warm.client import argv_of
    from framework.warm.place import engine_key, mode

    monkeypatch.delenv("TRIBUTARY_ENGINE", raising=False)
    local = Profile()
    assert mode(local) is None
    assert mode(local, no_engine=True) == ""
    assert mode(Profile(engine="embedded")) == ""
    assert mode(Profile(spark=SparkSettings(master="spark://host:7077"))) == ""
    assert mode(Profile(spark=SparkSettings(remote="sc://host:15002"))) == ""
    monkeypatch.setenv("TRIBUTARY_ENGINE", "0")
    assert mode(local) == ""
    other = Profile(spark=SparkSettings(conf={"spark.sql.shuffle.partitions": 3}))
    assert engine_key(local) == engine_key(Profile()) != engine_key(other)
    monkeypatch.setenv("JAVA_HOME", "/elsewhere")
    assert engine_key(local) != engine_key(other) and len(engine_key(local)) == 16

    command = get_command(app)
    argv = ["run", "-p", "local", "--var", "a=1", "--var", "b=x y", "--show", "3", "--no-engine", "--", "-odd.yaml"]
    with command.make_context("tributary", list(argv)) as ctx:
        sub = command.get_command(ctx, "run")
        with sub.make_context("run", argv[1:], parent=ctx) as run_ctx:
            assert argv_of(run_ctx, {"yes": True}) == [
                "run",
                "--profile",
                "local",
                "--var",
                "a=1",
                "--var",
                "b=x y",
                "--show",
                "3",
                "--yes",
                "--",
                "-odd.yaml",
            ]


# -- isolation between runs, and cancellation that stops the work (issue 32) -------------------
#
# One engine of their own (another Spark setting, so another key) serves these tests, in a
# runtime folder of their own. Client A starts it with secrets in its environment; project B
# has no udfs/. The stuck-regex test goes last: it may end that engine.

A_UDFS = """\
import os

from pyspark.sql import SparkSession

from framework.functions import udf


@udf(returns="string")
def project_a_secret(id):
    return id.astype(str) + "-A-secret"


@udf(returns="string")
def env_of(name):
    return name.map(lambda n: os.environ.get(n, "-"))


_spark = SparkSession.getActiveSession()  # what an analyst's module may do with the session at import
if _spark is not None:  # (the client checks udfs/ before any session exists)
    _spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    _spark.sql("create or replace temporary view a_view as select 'A-view' as v")
    _spark.sql("create or replace global temporary view a_global as select 'A-global' as v")
    _spark.sql("create or replace temporary function a_sqlfn() returns string return 'A-sqlfn'")
    _spark.sql("create database if not exists a_db")
    _spark.sql("use a_db")
"""

A_PIPELINE = """\
name: a
sources:
  x: {format: json, path: in, schema: "id INT"}
steps:
  a_out:
    sql: |
      select id, project_a_secret(id) as secret, current_database() as db,
             current_timezone() as tz, env_of('ENGINE_STARTER_SECRET') as worker_env,
             reflect('java.lang.System', 'getenv', 'ENGINE_STARTER_SECRET') as jvm_env
      from {{ source('x') }}
outputs:
  a_out: {mode: overwrite}
"""


def _b_pipeline(name: str, select: str, source: str = "{{ source('x') }}") -> str:
    return (
        f'name: {name}\nsources:\n  x: {{format: json, path: in, schema: "id INT"}}\n'
        f"steps:\n  {name}_out:\n    sql: select {select} from {source}\n"
        f"outputs:\n  {name}_out: {{mode: overwrite}}\n"
    )


STUCK = """\
name: stuck
sources:
  one: {format: json, path: lines/one, schema: "line STRING"}
  two: {format: json, path: lines/two, schema: "line STRING"}
steps:
  matched:
    sql: |
      select line rlike '^(.*a){12}$' as m from {{ source('one') }}
      union all select line rlike '^(.*a){12}$' as m from {{ source('two') }}
outputs:
  matched: {mode: overwrite}
"""


def _small_project(root: Path, udfs: str | None = None) -> Path:
    write(
        root / "configs/local.yaml",
        "spark:\n  master: local[2]\n  conf:\n    spark.sql.shuffle.partitions: 1\nwarehouse: ./warehouse\n",
    )
    write(root / "in/x.json", '{"id": 1}\n{"id": 2}\n')
    if udfs is not None:
        write(root / "udfs/secret.py", udfs)
    return root


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Projects A and B on one engine of their own, started by client A with secrets in its environment."""
    runtime = Path(tempfile.mkdtemp(prefix="tri-"))
    root = tmp_path_factory.mktemp("isolation")
    a = _small_project(root / "a", A_UDFS)
    write(a / "pipelines/a.yaml", A_PIPELINE)
    b = _small_project(root / "b")
    helper = Warm(b, runtime)
    started = helper("run", "a", cwd=a, ENGINE_STARTER_SECRET="starter-secret", CLIENT_A_SECRET="a-secret")
    assert started.returncode == 0, started.stderr
    assert "starting a warm Spark engine" in started.stderr
    helper.a = a  # type: ignore[attr-defined]
    yield helper
    helper("engine", "stop")
    shutil.rmtree(runtime, ignore_errors=True)


def test_a_project_cannot_see_another_projects_functions_views_or_settings(shared):
    b = shared.project
    [a_row, _] = _table(shared.a, "a_out", "id")
    # A sees its own udf, and the database and time zone its udfs/ module set
    assert (a_row["secret"], a_row["db"], a_row["tz"]) == ("1-A-secret", "a_db", "Asia/Tokyo")

    write(b / "pipelines/b_udf.yaml", _b_pipeline("b_udf", "id, system.session.project_a_secret(id) as s"))
    leaked = shared("run", "b_udf")
    assert leaked.returncode != 0, leaked.stdout
    assert "project_a_secret" in leaked.stderr
    assert not (b / "warehouse/b_udf_out").exists()

    for name, source in (("b_view", "a_view"), ("b_global", "global_temp.a_global")):
        write(b / f"pipelines/{name}.yaml", _b_pipeline(name, "v", source))
        refused = shared("run", name)
        # refused by validate before Spark (a bare name it does not know), or by Spark: never read
        unseen = (
            "TABLE_OR_VIEW_NOT_FOUND" in refused.stderr or f"'{source}' is neither a step, a source nor a table" in refused.stderr
        )
        assert refused.returncode != 0 and unseen, (name, refused.stdout, refused.stderr)

    write(b / "pipelines/b_fn.yaml", _b_pipeline("b_fn", "id, system.session.a_sqlfn() as s"))
    assert shared("run", "b_fn").returncode != 0

    write(b / "pipelines/b_settings.yaml", _b_pipeline("b_settings", "id, current_database() as db, current_timezone() as tz"))
    done = shared("run", "b_settings")
    assert done.returncode == 0, done.stderr
    assert {(r["db"], r["tz"]) for r in _table(b, "b_settings_out", "id")} == {("default", "UTC")}

    again = shared("run", "a", "--full-refresh", cwd=shared.a)  # A again on the same engine: all of it is there again
    assert again.returncode == 0, again.stderr
    assert _table(shared.a, "a_out", "id")[0]["secret"] == "1-A-secret"


def test_no_clients_environment_reaches_another_clients_run(shared):
    b = shared.project
    # client A started the engine with these in its environment
    reads = ", ".join(
        f"reflect('java.lang.System', 'getenv', '{name}') as {name.lower()}"
        for name in ("ENGINE_STARTER_SECRET", "CLIENT_A_SECRET")
    )
    write(b / "pipelines/b_env.yaml", _b_pipeline("b_env", f"id, {reads}"))
    done = shared("run", "b_env", B_ONLY="b")
    assert done.returncode == 0, done.stderr
    # (reflect() gives a Java null as the string 'null')
    assert {(r["engine_starter_secret"], r["client_a_secret"]) for r in _table(b, "b_env_out", "id")} == {("null", "null")}

    # A's own later run, from a client without the secret: its Python workers do not have it either
    again = shared("run", "a", "--full-refresh", cwd=shared.a)
    assert again.returncode == 0, again.stderr
    assert {(r["worker_env"], r["jvm_env"]) for r in _table(shared.a, "a_out", "id")} == {("-", "null")}


def test_a_cancelled_run_stuck_in_a_regex_frees_the_engine_for_the_next_run(shared):
    b = shared.project
    write(b / "pipelines/stuck.yaml", STUCK)
    for part in ("one", "two"):  # a task each: both cores
        write(b / f"lines/{part}/l.json", f'{{"line": "{"a" * 40}b"}}\n')
    write(b / "pipelines/quick.yaml", _b_pipeline("quick", "id, id * 2 as twice"))
    [engine] = shared.engines()

    client = shared.start("run", "stuck")
    shared.wait_until(lambda engines: engines and engines[0]["busy"] == "run stuck")
    time.sleep(3.0)  # both tasks are in the regex
    os.killpg(client.pid, signal.SIGINT)
    _, err = client.communicate(timeout=60)
    assert client.returncode == 130, err

    [status] = shared.engines()  # the JVM still runs the cancelled tasks: not idle
    assert status["pid"] == engine["pid"] and status["busy"] is not None, status

    began = time.monotonic()
    quick = shared("run", "quick", timeout=120)
    assert quick.returncode == 0, quick.stderr
    assert time.monotonic() - began < 120
    assert _table(b, "quick_out", "id") == [{"id": 1, "twice": 2}, {"id": 2, "twice": 4}]
    assert not _running(engine["pid"])  # its JVM (and the regex) went with it


MEDDLER_UDFS = """\
import signal

from pyspark.sql import SparkSession

from framework.functions import udf

signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C off, for the run and every later one
_spark = SparkSession.getActiveSession()
if _spark is not None:
    _spark.sparkContext._jsc.hadoopConfiguration().set("tributary.test.left", "meddler")
    _spark._jvm.java.lang.System.setProperty("tributary.test.left", "meddler")
    _spark.sparkContext.setLocalProperty("tributary.test.left", "meddler")


@udf(returns="int")
def same(id):
    import json

    json.tributary_left = "meddler"  # in the Python worker
    return id
"""

LOOKER_UDFS = """\
from pyspark.sql import SparkSession

from framework.functions import udf

_spark = SparkSession.getActiveSession()
HADOOP = "-" if _spark is None else str(_spark.sparkContext._jsc.hadoopConfiguration().get("tributary.test.left"))


@udf(returns="string")
def left_here(id):
    from pyspark import TaskContext

    import json

    job = TaskContext.get().getLocalProperty("tributary.test.left")
    return id.map(lambda _: f"{HADOOP}|{job}|{getattr(json, 'tributary_left', None)}")
"""


def test_a_run_leaves_the_engines_process_as_it_found_it_or_the_engine_ends(shared):
    """Module code of one project changed what every later run shares: Ctrl-C ignored (the
    interrupted run committed), Hadoop settings, system and job properties."""
    root = shared.project.parent
    meddler = _small_project(root / "meddler", MEDDLER_UDFS)
    write(meddler / "pipelines/meddle.yaml", _b_pipeline("meddle", "same(id) as id"))
    done = shared("run", "meddle", cwd=meddler)
    assert done.returncode == 0, done.stderr
    [engine] = shared.engines()

    looker = _small_project(root / "looker")
    write(looker / "udfs/looker.py", LOOKER_UDFS)
    select = (
        "id, left_here(id) as left_behind, reflect('java.lang.System', 'getProperty', 'tributary.test.left') as prop, "
        "{{ var('label') | lit }} as label, reflect('java.lang.Thread', 'sleep', cast(1500 as bigint)) as napped"
    )
    write(looker / "pipelines/look.yaml", "vars: {label: first}\n" + _b_pipeline("look", select))
    done = shared("run", "look", cwd=looker)
    assert done.returncode == 0, done.stderr
    before = _table(looker, "look_out", "id")
    assert {(r["left_behind"], r["prop"]) for r in before} == {("None|None|None", "null")}

    client = subprocess.Popen(
        [sys.executable, "-m", "framework", "run", "look", "--var", "label=second"],
        cwd=looker,
        env=shared.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    shared.wait_until(lambda engines: engines and engines[0]["busy"] == "run look")
    time.sleep(1.0)  # napping
    os.killpg(client.pid, signal.SIGINT)
    _, err = client.communicate(timeout=120)
    assert client.returncode == 130, err
    assert _table(looker, "look_out", "id") == before
    assert shared.engines()[0]["pid"] == engine["pid"]

    # a file shipped to the executors cannot be taken back: the engine ends after that run
    write(
        meddler / "udfs/shipper.py",
        "from pyspark.sql import SparkSession\n\n_spark = SparkSession.getActiveSession()\n"
        "if _spark is not None:\n    _spark.sparkContext.addFile(__file__)\n",
    )
    done = shared("run", "meddle", "--full-refresh", cwd=meddler)
    assert done.returncode == 0, done.stderr
    shared.wait_until(lambda engines: engines == [], timeout=60)
    deadline = time.monotonic() + 60
    while _running(engine["pid"]) and time.monotonic() < deadline:  # Spark stopping
        time.sleep(0.5)
    assert not _running(engine["pid"])
    again = shared("run", "look", "--var", "label=third", cwd=looker)
    assert again.returncode == 0 and "starting a warm Spark engine" in again.stderr, again.stderr
    assert {r["label"] for r in _table(looker, "look_out", "id")} == {"third"}


def test_a_client_that_says_nothing_does_not_hold_the_engine_up(shared):
    """The engine greeted one connection at a time, each with 10 s to speak: a silent one made
    `engine status` say no engine ran and held every run back."""
    import socket

    [engine] = shared.engines()
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.connect(engine["socket"])
    try:
        began = time.monotonic()
        [status] = shared.engines()
        assert status["pid"] == engine["pid"] and time.monotonic() - began < 3
    finally:
        silent.close()


SLOW_DAILY = """\
name: slow_daily
schedule: {cron: "0 0 * * *", timezone: UTC}
sources:
  calls:
    format: json
    path: incoming_daily
    schema: head_service STRING, response_ms INT
steps:
  napped_daily:
    sql: |
      select head_service, response_ms, {{ interval_start }} as day,
             reflect('java.lang.Thread', 'sleep', cast(1500 as bigint)) as napped
      from {{ source('calls') }}
outputs:
  napped_daily: {mode: append}
"""


def test_backfill_and_scheduler_once_run_in_the_warm_engine_and_ctrl_c_abandons_cleanly(warm):
    """Issue 35: the first interval of a backfill started a JVM of its own while an engine ran."""
    warm("engine", "start")
    [engine] = warm.engines()
    runs = engine["runs"]
    done = warm("backfill", "calls_per_interval", "--from", "2026-11-02T08:00", "--to", "2026-11-02T08:08")
    assert done.returncode == 0, done.stderr
    assert "4 interval(s) ok, 0 failed" in done.stdout and "starting" not in done.stderr
    [same] = warm.engines()
    assert same["pid"] == engine["pid"] and same["runs"] == runs + 1  # the engine ran it: no JVM of its own

    once = warm("scheduler", "--once", "calls_per_interval")
    assert once.returncode == 0, once.stderr
    assert warm.engines()[0]["runs"] == runs + 2

    write(warm.project / "pipelines/slow_daily.yaml", SLOW_DAILY)
    write(
        warm.project / "incoming_daily/calls.json", "".join(f'{{"head_service": "/{i}", "response_ms": {i}}}\n' for i in range(4))
    )
    client = warm.start("backfill", "slow_daily", "--from", "2026-11-01", "--to", "2026-11-03")
    warm.wait_until(lambda engines: engines and (engines[0]["busy"] or "").startswith("backfill"))
    time.sleep(2.0)  # inside the first interval's napping stage
    os.killpg(client.pid, signal.SIGINT)
    out, err = client.communicate(timeout=180)
    assert client.returncode == 130, out + err
    assert "abandoned" in out and "stopped" in err
    [after] = warm.wait_until(lambda engines: engines and engines[0]["busy"] is None)
    assert after["pid"] == engine["pid"]  # the engine goes on
    assert delta_version(warm.project / "warehouse/napped_daily") is None  # nothing committed
    again = warm("backfill", "slow_daily", "--from", "2026-11-01", "--to", "2026-11-03")
    assert again.returncode == 0, again.stderr
    assert "2 interval(s) ok" in again.stdout
    assert len(delta_rows(warm.project / "warehouse/napped_daily")) == 8
