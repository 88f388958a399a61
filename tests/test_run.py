"""End-to-end runs on the shared local SparkSession, with Delta tables read back through delta-rs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, delta_rows, delta_version, write
from tests.test_warm_engine import SLOW

pytestmark = pytest.mark.spark

APPEND = """\
name: calls_log
sources:
  calls:
    format: json
    path: incoming
    schema: ts TIMESTAMP, head_service STRING, response_ms INT
steps:
  slow:
    sql: |
      select head_service, response_ms, ts
      from {{ source('calls') }}
      where response_ms >= {{ var('threshold', 0) | lit }}
outputs:
  slow:
    mode: append
"""


def _lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _calls(n: int, start: int = 0, head: str = "/a.html") -> list[dict]:
    return [
        {"ts": f"2026-11-02T08:00:{(start + i) % 60:02d}Z", "head_service": head, "response_ms": 10 * (start + i)}
        for i in range(n)
    ]


def test_example_pipeline_writes_real_delta_tables(spark, cli, project):
    code, out, err = cli("run", "service_calls")
    assert code == 0, err
    warehouse = project / "warehouse"
    assert (warehouse / "service_stats" / "_delta_log" / "00000000000000000000.json").is_file()

    raw = [json.loads(line) for f in sorted((project / "data/samples/service_calls").rglob("*.json")) for line in f.open()]
    expected = Counter((r["requested_service"], r["head_service"]) for r in raw)
    stats = delta_rows(warehouse / "service_stats")
    assert {(r["requested_service"], r["head_service"]): r["calls"] for r in stats} == dict(expected)
    some = stats[0]
    times = [
        r["response_ms"]
        for r in raw
        if (r["requested_service"], r["head_service"]) == (some["requested_service"], some["head_service"])
    ]
    assert some["avg_response_ms"] == pytest.approx(sum(times) / len(times), abs=0.06)

    from deltalake import DeltaTable

    daily = DeltaTable(str(warehouse / "daily_head_stats"))
    assert daily.metadata().partition_columns == ["day"]
    assert sum(r["invocations"] for r in delta_rows(warehouse / "daily_head_stats")) == len(raw)

    events = delta_rows(warehouse / "_tributary" / "events")
    kinds = Counter(e["event"] for e in events)
    assert kinds["run_start"] == 1 and kinds["run_end"] == 1 and kinds["output_end"] == 2
    assert [e["status"] for e in events if e["event"] == "run_end"] == ["ok"]
    assert "service_stats" in out and "written" in out


def test_rerunning_the_same_append_run_does_not_duplicate(spark, cli, project):
    write(project / "pipelines" / "calls_log.yaml", APPEND)
    write(project / "incoming" / "a.json", _lines(_calls(5)))
    table = project / "warehouse" / "slow"

    assert cli("run", "calls_log")[0] == 0
    assert len(delta_rows(table)) == 5
    code, out, _ = cli("run", "calls_log")
    assert code == 0 and "skipped" in out
    assert len(delta_rows(table)) == 5 and delta_version(table) == 0

    write(project / "incoming" / "b.json", _lines(_calls(3, start=5)))
    code, _, err = cli("run", "calls_log")
    assert code == 0
    assert len(delta_rows(table)) == 5 + 5 + 3  # a new batch run: the folder as it is now is appended
    assert "output 'slow' appends every row the sources' files hold" in err and "mode: streaming" in err, err  # said
    assert cli("run", "calls_log", "--full-refresh")[0] == 0
    assert len(delta_rows(table)) == 8


def test_an_edited_udf_is_another_run_for_the_pipelines_that_call_it(spark, cli, project):
    """The run key held the spec, the SQL, the vars and the inputs, not udfs/: a function edited
    from x * 0.1 to x * 0.5 gave 'skipped: unchanged' and kept the old results."""
    udf = "from framework.functions import udf\n\n\n@udf(returns='double')\ndef scaled(x):\n    return x * {}\n"
    write(project / "udfs" / "scale.py", udf.format("0.1"))
    write(project / "pipelines" / "calls_log.yaml", APPEND.replace("response_ms, ts", "scaled(response_ms) as scaled, ts"))
    write(project / "incoming" / "a.json", _lines(_calls(3, start=1)))
    table = project / "warehouse" / "slow"
    assert cli("run", "calls_log", "--full-refresh", "--yes")[0] == 0
    assert sorted(r["scaled"] for r in delta_rows(table)) == [1.0, 2.0, 3.0]
    assert cli("run", "service_calls")[0] == 0

    write(project / "udfs" / "scale.py", udf.format("0.5"))
    code, out, err = cli("run", "calls_log", "--full-refresh", "--yes")
    assert code == 0, out + err
    assert sorted(r["scaled"] for r in delta_rows(table)) == [5.0, 10.0, 15.0]
    code, out, _ = cli("run", "service_calls")  # calls no function of udfs/: still the same run
    assert code == 0 and "unchanged, already written by run" in out, out


def test_an_edited_module_in_a_udfs_subfolder_is_another_run_too(spark, cli, project):
    """Only udfs/*.py counted: a constant edited in udfs/lib/factor.py gave 'skipped: unchanged'
    and kept the old results."""
    write(project / "udfs" / "lib" / "__init__.py", "")
    write(project / "udfs" / "lib" / "factor.py", "FACTOR = 0.1\n")
    write(
        project / "udfs" / "scale.py",
        "from framework.functions import udf\nfrom udfs.lib.factor import FACTOR\n\n\n"
        "@udf(returns='double')\ndef scaled(x):\n    return x * FACTOR\n",
    )
    write(project / "pipelines" / "calls_log.yaml", APPEND.replace("response_ms, ts", "scaled(response_ms) as scaled, ts"))
    write(project / "incoming" / "a.json", _lines(_calls(3, start=1)))
    table = project / "warehouse" / "slow"
    assert cli("run", "calls_log", "--full-refresh", "--yes")[0] == 0
    assert sorted(r["scaled"] for r in delta_rows(table)) == [1.0, 2.0, 3.0]

    write(project / "udfs" / "lib" / "factor.py", "FACTOR = 0.5\n")
    code, out, err = cli("run", "calls_log", "--full-refresh", "--yes")
    assert code == 0, out + err
    assert sorted(r["scaled"] for r in delta_rows(table)) == [5.0, 10.0, 15.0]


def test_a_merge_output_back_to_an_earlier_definition_is_merged_again(spark, cli, project):
    """A merge run whose commit a later merge overwrote was taken as still applied: the SQL changed
    to count twice and back gave 'skipped: unchanged' and kept the doubled counts."""
    table = project / "warehouse" / "daily_head_stats"
    sql = project / "sql" / "daily_head_stats.sql"
    original = sql.read_text()

    def invocations() -> int:
        return sum(r["invocations"] for r in delta_rows(table))

    assert cli("run", "service_calls")[0] == 0
    counted = invocations()
    sql.write_text(original.replace("count(*)                        as invocations", "count(*) * 2 as invocations"))
    assert cli("run", "service_calls")[0] == 0
    assert invocations() == 2 * counted
    sql.write_text(original)
    code, out, err = cli("run", "service_calls")
    assert code == 0, out + err
    assert invocations() == counted
    code, out, err = cli("run", "service_calls")  # identical to the run just before: nothing to merge
    assert code == 0 and "unchanged, already written by run" in out, out


def test_an_identical_rerun_commits_nothing_anywhere(spark, cli, project):
    """Overwrite outputs and the quarantine too: the same inputs, spec and vars again write no
    new Delta version, and the summary names the run whose commit holds the rows."""
    from deltalake import DeltaTable

    bad = "{not json\n"
    write(project / "data/samples/service_calls/static/part-bad.json", bad * 3)
    assert cli("run", "service_calls")[0] == 0
    warehouse = project / "warehouse"
    tables = [warehouse / "service_stats", warehouse / "daily_head_stats", warehouse / "_tributary" / "quarantine"]
    versions = [delta_version(t) for t in tables]
    first = DeltaTable(str(tables[0])).history(1)[0]["tributary.run_id"]
    assert len(delta_rows(tables[2])) == 3

    code, out, err = cli("run", "service_calls")
    assert code == 0, out + err
    assert [delta_version(t) for t in tables] == versions
    assert len(delta_rows(tables[2])) == 3
    assert f"unchanged, already written by run {first}" in out

    assert cli("run", "service_calls", "--var", "min_calls=2")[0] == 0  # not identical: overwrites again
    assert delta_version(tables[0]) == versions[0] + 1
    assert cli("run", "service_calls")[0] == 0  # back to the first run's vars: the table holds the newer rows
    assert delta_version(tables[0]) == versions[0] + 2, "an old run's commit must not mask a newer table"
    assert cli("run", "service_calls")[0] == 0
    assert delta_version(tables[0]) == versions[0] + 2


def test_merge_updates_rows_in_place(spark, cli, project):
    assert cli("run", "service_calls")[0] == 0
    table = project / "warehouse" / "daily_head_stats"
    before = {r["head_service"]: r["invocations"] for r in delta_rows(table)}
    extra = [
        {
            "ts": "2026-11-02T09:00:00Z",
            "client_ip": "10.9.9.9",
            "head_service": "/news.html",
            "requested_service": "/news.html",
            "response_ms": 5,
        }
    ] * 4
    write(project / "data/samples/service_calls/static/part-999.json", _lines(extra))
    assert cli("run", "service_calls")[0] == 0
    after = {r["head_service"]: r["invocations"] for r in delta_rows(table)}
    assert len(delta_rows(table)) == len(before)
    assert after["/news.html"] == before["/news.html"] + 4
    assert {k: v for k, v in after.items() if k != "/news.html"} == {k: v for k, v in before.items() if k != "/news.html"}


def test_schema_mismatch_on_append_names_columns_and_leaves_the_table(spark, cli, project):
    write(project / "pipelines" / "calls_log.yaml", APPEND)
    write(project / "incoming" / "a.json", _lines(_calls(5)))
    assert cli("run", "calls_log")[0] == 0
    table = project / "warehouse" / "slow"
    changed = APPEND.replace(
        "select head_service, response_ms, ts", "select head_service, cast(response_ms as string) as response_ms, ts, 1 as extra"
    )
    write(project / "pipelines" / "calls_log.yaml", changed)
    code, _, err = cli("run", "calls_log")
    assert code == 2
    assert "new columns ['extra']" in err and "response_ms (int → string)" in err
    assert delta_version(table) == 0 and len(delta_rows(table)) == 5


def test_a_failing_step_leaves_every_output_at_its_previous_version(spark, cli, project):
    assert cli("run", "service_calls")[0] == 0
    warehouse = project / "warehouse"
    before = {t: (delta_version(warehouse / t), delta_rows(warehouse / t, "1")) for t in ("service_stats", "daily_head_stats")}
    write(
        project / "sql" / "daily_head_stats.sql",
        "select to_date(ts) as day, head_service, count(*) as invocations, count(distinct client_ip) as clients,\n"
        "  cast(max(if(response_ms > 0, raise_error('boom'), 0)) as int) as p95_response_ms\n"
        "from {{ ref('all_calls') }} group by 1, 2\n",
    )
    code, _, err = cli("run", "service_calls")
    assert code == 1 and "boom" in err
    after = {t: (delta_version(warehouse / t), delta_rows(warehouse / t, "1")) for t in before}
    assert after == before
    assert not any((warehouse / "_tributary" / "staging").glob("*/*")), "staging is cleaned up"
    ends = [e for e in delta_rows(warehouse / "_tributary" / "events") if e["event"] == "run_end"]
    assert sorted(e["status"] for e in ends) == ["failed", "ok"]


def test_a_failed_commit_restores_the_outputs_already_committed(spark, cli, project):
    assert cli("run", "service_calls")[0] == 0
    warehouse = project / "warehouse"
    before = delta_rows(warehouse / "service_stats", "1")
    write(warehouse / "blocker", "a file where the second table's folder should be\n")
    pipeline = project / "pipelines" / "service_calls.yaml"
    pipeline.write_text(
        pipeline.read_text()
        .replace("    mode: merge\n", "    mode: merge\n    path: warehouse/blocker/daily\n")
        .replace('since: "2026-01-01 00:00:00"', 'since: "2026-11-02 08:04:00"')
    )
    code, _, err = cli("run", "service_calls")
    assert code == 1
    assert delta_rows(warehouse / "service_stats", "1") == before


def test_malformed_records_are_quarantined_not_dropped(spark, cli, project):
    write(project / "pipelines" / "calls_log.yaml", APPEND)
    good = _calls(4)
    write(
        project / "incoming" / "a.json",
        _lines(good) + "this is not json\n" + '{"ts": "2026-11-02T08:00:00Z", "head_service": "/x", "response_ms": "slow"}\n',
    )
    code, out, err = cli("run", "calls_log")
    assert code == 0, err
    assert len(delta_rows(project / "warehouse" / "slow")) == 4
    bad = delta_rows(project / "warehouse" / "_tributary" / "quarantine", "record")
    assert len(bad) == 2 and len(bad) + 4 == 6
    assert all(r["file"].endswith("incoming/a.json") and r["source"] == "calls" and "malformed json" in r["reason"] for r in bad)
    assert "this is not json" in {r["record"] for r in bad}
    assert "quarantined" in out


def test_delta_source_reads_a_past_version(spark, cli, project):
    write(project / "pipelines" / "calls_log.yaml", APPEND)
    write(project / "incoming" / "a.json", _lines(_calls(2)))
    assert cli("run", "calls_log")[0] == 0
    write(project / "incoming" / "b.json", _lines(_calls(3, start=2)))
    assert cli("run", "calls_log")[0] == 0  # version 1: 2 + 5 rows
    write(
        project / "pipelines" / "reader.yaml",
        """\
name: reader
sources:
  first_load: {format: delta, table: slow, version: 0}
  latest: {format: delta, table: slow}
steps:
  counts:
    sql: |
      select (select count(*) from {{ source('first_load') }}) as v0,
             (select count(*) from {{ source('latest') }}) as now
outputs:
  counts: {}
""",
    )
    code, _, err = cli("run", "reader")
    assert code == 0, err
    assert delta_rows(project / "warehouse" / "counts") == [{"v0": 2, "now": 7}]

    reader = project / "pipelines" / "reader.yaml"  # a version not written yet: said in Tributary's words
    reader.write_text(reader.read_text().replace("version: 0", "version: 5"))
    code, _, err = cli("run", "reader")
    assert code == 2 and "version 5 of" in err and "does not exist: its latest is 1" in err, err


def test_a_pinned_delta_version_whose_files_were_vacuumed_is_bad_input(spark, cli, project):
    """VACUUM removes the files of versions older than its retention: a source pinned to one
    failed the run with Spark's PATH_NOT_FOUND (exit 1, retried for ever by a schedule)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    table = project / "warehouse" / "prices"
    write_deltalake(str(table), pa.table({"v": [1, 2]}))
    write_deltalake(str(table), pa.table({"v": [3]}), mode="overwrite")
    DeltaTable(str(table)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    write(
        project / "pipelines" / "reader.yaml",
        """\
name: reader
sources:
  first: {format: delta, table: prices, version: 0}
steps:
  counts:
    sql: select count(*) as n from {{ source('first') }}
outputs:
  counts: {}
""",
    )
    code, out, err = cli("run", "reader")
    assert code == 2, out + err
    assert "version 0 of" in err and "VACUUM" in err and "Traceback" not in err, err


def test_an_unknown_column_is_reported_at_the_template(spark, cli, project):
    write(
        project / "sql" / "service_stats.sql",
        "select requested_service,\n  count(*) as calls,\n  avg(respons_ms) as a\nfrom {{ ref('all_calls') }}\ngroup by 1\n",
    )
    code, _, err = cli("run", "service_calls")
    assert code == 2
    assert "sql/service_stats.sql:3" in err and "respons_ms" in err
    assert not (project / "warehouse" / "service_stats").exists()


def test_a_decimal_spark_cannot_hold_is_reported_at_the_template(spark, cli, project):
    """DECIMAL(40, 2) is refused while Spark plans the query, as an ArithmeticException: the run
    failed with exit 1 and no step or line."""
    write(
        project / "sql" / "service_stats.sql",
        "select requested_service,\n  cast(count(*) as decimal(40, 2)) as calls\nfrom {{ ref('all_calls') }}\ngroup by 1\n",
    )
    code, _, err = cli("run", "service_calls")
    said = " ".join(err.split())
    assert code == 2, said
    assert (
        "step 'service_stats'" in said and "sql/service_stats.sql" in said and "DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION" in said
    )
    assert not (project / "warehouse" / "service_stats").exists()


def test_union_type_conflict_names_both_inputs(spark, cli, project):
    pipeline = project / "pipelines" / "service_calls.yaml"
    text = pipeline.read_text()
    pipeline.write_text(
        text.replace(
            "requested_service STRING, response_ms INT\n  image_calls",
            "requested_service STRING, response_ms INT\n  image_calls",
            1,
        ).replace(
            "head_service STRING, requested_service STRING, response_ms INT\n\nsteps",
            "head_service STRING, requested_service STRING, response_ms STRING\n\nsteps",
        )
    )
    code, _, err = cli("run", "service_calls")
    assert code == 2
    assert "'response_ms' is int in 'static_calls' but string in 'image_calls'" in err


def test_select_writes_only_the_chosen_outputs(spark, cli, project):
    code, _, err = cli("run", "service_calls", "--select", "daily_head_stats")
    assert code == 0, err
    assert (project / "warehouse" / "daily_head_stats").exists()
    assert not (project / "warehouse" / "service_stats").exists()


def test_runs_lists_recent_runs(spark, cli, project):
    assert cli("run", "service_calls")[0] == 0
    code, out, _ = cli("runs")
    assert code == 0 and "service_calls" in out and "ok" in out


def test_union_adds_the_source_name(spark, project):
    from framework.project_context import ProjectContext

    pipeline = project / "pipelines" / "service_calls.yaml"
    pipeline.write_text(pipeline.read_text() + "  all_calls: {}\n")
    result = ProjectContext.load("service_calls", start=project).run(spark=spark)
    assert result.status == "ok"
    rows = delta_rows(project / "warehouse" / "all_calls")
    by_source = Counter(r["_source"] for r in rows)
    raw_static = sum(1 for f in (project / "data/samples/service_calls/static").glob("*.json") for _ in f.open())
    assert by_source["static_calls"] == raw_static and set(by_source) == {"static_calls", "image_calls"}


def test_a_project_in_a_folder_named_with_a_space_runs(project, tmp_path):
    """A clone of the repo in such a folder, run in its own process so Spark starts there: the
    JVM's options (the log configuration's path) and the staged files' paths carry the folder's
    name, and neither may read the space as a separator or '#' as URI syntax."""
    spaced = tmp_path / "my projects" / "calls #1"
    shutil.copytree(project, spaced, ignore=shutil.ignore_patterns("my projects"))
    # `python -m framework` imports the package from the working folder, so this copy runs
    shutil.copytree(REPO / "framework", spaced / "framework", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("TRIBUTARY_PROFILE", None)
    done = subprocess.run(
        [sys.executable, "-m", "framework", "run", "service_calls"], cwd=spaced, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sum(r["calls"] for r in delta_rows(spaced / "warehouse" / "service_stats")) > 0


def test_ctrl_c_stops_a_run_without_an_engine_in_one_line_without_a_traceback(project):
    """PySpark's own Ctrl-C handler cancels the jobs by calling the JVM from inside the JVM call it
    interrupts: py4j then printed two tracebacks (a reentrant call on its connection, and the
    KeyboardInterrupt) above the run's own line."""
    write(project / "pipelines/slow.yaml", SLOW)  # one task, 1.5 s per row
    write(project / "incoming/calls.json", "".join(f'{{"head_service": "/{i}.html", "response_ms": {i}}}\n' for i in range(4)))
    computing = lambda lines: any("computing" in line for line in lines)  # noqa: E731 - read where it is used
    code, text = _interrupted(project, "slow", computing, 1.5)  # inside the napping job (6 s)
    assert code == 130, text[-3000:]
    assert "interrupted; outputs stay at their previous version" in text
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]
    assert delta_version(project / "warehouse" / "napped") is None


def _interrupted(project: Path, pipeline: str, ready: Callable[[list[str]], bool], after: float) -> tuple[int, str]:
    """`tributary run <pipeline> --no-engine` in its own process, sent SIGINT `after` seconds once
    `ready(its output lines so far)`; its exit code and output."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "TRIBUTARY_ENGINE": "0"}
    env.pop("TRIBUTARY_PROFILE", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "framework", "run", pipeline, "--no-engine"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while not ready(lines) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(after)
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=120)
        reader.join(timeout=10)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return code, "".join(lines)


#: One file a micro-batch; the second file's rows nap 1 s each, so Ctrl-C comes inside its micro-batch.
NAPPING_STREAM = """\
name: napping_stream
mode: streaming
sources:
  calls: {format: json, path: landing/calls, schema: "n INT", max_files_per_trigger: 1}
steps:
  napped:
    sql: select n, reflect('java.lang.Thread', 'sleep', cast(if(n >= 10, 1000, 0) as bigint)) as napped from {{ source('calls') }}
outputs:
  napped: {mode: append}
"""


def test_ctrl_c_in_a_stream_says_which_micro_batches_stay_committed_and_the_next_run_goes_on(cli, project):
    """A stream commits each micro-batch exactly once as it goes, so Ctrl-C after a commit leaves
    that micro-batch in its table: the last line said "outputs stay at their previous version",
    which is not so, and the run log had the output as not committed."""
    write(project / "pipelines/napping_stream.yaml", NAPPING_STREAM)
    write(project / "landing/calls/a.json", "".join(f'{{"n": {i}}}\n' for i in range(5)))
    write(project / "landing/calls/b.json", "".join(f'{{"n": {i}}}\n' for i in range(10, 16)))
    table = project / "warehouse" / "napped"
    # inside the second micro-batch (6 rows of 1 s on 2 cores)
    code, text = _interrupted(project, "napping_stream", lambda _: delta_version(table) is not None, 1.0)
    assert code == 130, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert "outputs stay at their previous version" not in text, text[-3000:]
    assert "output 'napped' keeps the 1 micro-batch it committed (5 rows" in text, text[-3000:]
    assert "the next run goes on after it" in text, text[-3000:]
    assert sorted(r["n"] for r in delta_rows(table)) == list(range(5))
    logged = [r for r in delta_rows(project / "warehouse" / "_tributary" / "events") if r["event"] == "output_end"]
    assert [(r["name"], r["status"], r["rows"]) for r in logged] == [("napped", "written", 5)], logged

    code, _, err = cli("run", "napping_stream")  # goes on after the committed micro-batch
    assert code == 0, err
    assert sorted(r["n"] for r in delta_rows(table)) == [*range(5), *range(10, 16)]


def test_a_udf_returning_another_type_than_it_declares_says_the_value_and_the_type(spark, cli, project):
    """pyspark said: Failed to convert the value of the column '_0' with type 'object' to Arrow type
    'int32', and pointed at an Arrow setting."""
    write(
        project / "udfs" / "label.py",
        "import pandas as pd\nfrom framework.functions import udf\n\n\n@udf(returns='int')\n"
        "def label(x):\n    return pd.Series(['slow'] * len(x))\n",
    )
    write(project / "pipelines" / "calls_log.yaml", APPEND.replace("response_ms, ts", "label(response_ms) as label, ts"))
    write(project / "incoming" / "a.json", _lines(_calls(3, start=1)))
    code, out, err = cli("run", "calls_log")
    assert code == 1, out + err
    assert "a user function (@udf) returned 'slow' (str), which does not fit the type it declares (INT)" in err, err
    assert "'_0'" not in err and "convertToArrowArraySafely" not in err


def test_a_changed_partition_by_rewrites_an_overwrite_and_is_refused_where_rows_stay(spark, cli, project):
    """partition_by changed on an existing table: the commit kept the table's old partition columns,
    so the new one read as null in every row (exit 0), and a second change left the table unreadable."""
    from deltalake import DeltaTable

    pipeline = project / "pipelines" / "calls_log.yaml"
    write(project / "incoming" / "a.json", _lines(_calls(3) + _calls(2, head="/b.html")))
    table = project / "warehouse" / "slow"

    def heads() -> list[str | None]:
        return sorted(r["head_service"] for r in delta_rows(table))

    for partition_by in ("", "\n    partition_by: [head_service]", "\n    partition_by: [response_ms]", ""):
        write(pipeline, APPEND.replace("    mode: append\n", f"    mode: overwrite{partition_by}\n"))
        code, out, err = cli("run", "calls_log")
        assert code == 0, out + err
        assert heads() == ["/a.html"] * 3 + ["/b.html"] * 2, partition_by
        assert DeltaTable(str(table)).metadata().partition_columns == (
            ["response_ms"] if "response_ms" in partition_by else ["head_service"] if partition_by else []
        )

    write(pipeline, APPEND.replace("    mode: append\n", "    mode: append\n    partition_by: [head_service]\n"))
    before = delta_version(table)
    code, out, err = cli("run", "calls_log")
    assert code == 2, out + err
    assert "calls_log.yaml:16:" in err and "its table is partitioned by [], and partition_by says ['head_service']" in err, err
    assert delta_version(table) == before
    code, out, err = cli("run", "calls_log", "--full-refresh", "--yes")
    assert code == 0, out + err
    assert heads() == ["/a.html"] * 3 + ["/b.html"] * 2
    assert DeltaTable(str(table)).metadata().partition_columns == ["head_service"]


def test_an_overwrite_that_adds_a_timestamp_ntz_column_keeps_the_table_readable(spark, cli, project):
    """A table written without TIMESTAMP_NTZ columns, then overwritten with one: delta-rs committed
    the new schema without the table feature it needs, the run failed after its commit, and the
    table could not be read again, even by --full-refresh."""
    pipeline = project / "pipelines" / "calls_log.yaml"
    write(project / "incoming" / "a.json", _lines(_calls(3)))
    write(pipeline, APPEND.replace("    mode: append\n", "    mode: overwrite\n"))
    assert cli("run", "calls_log")[0] == 0
    write(
        pipeline,
        APPEND.replace("response_ms, ts\n", "response_ms, ts, cast(ts as timestamp_ntz) as local_ts\n").replace(
            "    mode: append\n", "    mode: overwrite\n"
        ),
    )
    code, out, err = cli("run", "calls_log")
    assert code == 0, out + err
    rows = delta_rows(project / "warehouse" / "slow")
    assert len(rows) == 3 and all(r["local_ts"] is not None for r in rows)
    code, out, err = cli("show", "slow")
    assert code == 0, out + err


@pytest.mark.parametrize(
    ("setting", "line"),
    [("    mode: overwrite\n    partition_by: [Head_Service]\n", 16), ("    mode: merge\n    keys: [HEAD_SERVICE, ts]\n", 16)],
)
def test_a_key_or_partition_column_in_other_letter_case_is_exit_2(spark, cli, project, setting, line):
    """Spark finds 'Head_Service' as head_service, Delta does not: a partitioned table's first commit
    could not be read again (and --full-refresh did not help), and a merge failed from its second
    run on, in delta-rs' words. Now validate and run say the column's spelling, at the line."""
    write(project / "incoming" / "a.json", _lines(_calls(3)))
    write(project / "pipelines" / "calls_log.yaml", APPEND.replace("    mode: append\n", setting))
    for command in ("validate", "run"):
        code, out, err = cli(command, "calls_log")
        assert code == 2, out + err
        said = " ".join(err.split())
        assert f"calls_log.yaml:{line}:" in said and "is spelled 'head_service'" in said and "write 'head_service'" in said, said
    assert not (project / "warehouse" / "slow").exists()


def test_a_timestamp_partition_column_in_a_zone_other_than_utc_is_exit_2(spark, cli, project):
    """With spark.sql.session.timeZone America/New_York, partition_by a TIMESTAMP wrote each
    partition's value as local time, which Delta readers take for UTC: `show` gave 03:00 for 08:00Z
    (exit 0). Now the run says so, before it writes anything."""
    write(project / "incoming" / "a.json", _lines(_calls(3)))
    write(
        project / "pipelines" / "calls_log.yaml",
        APPEND.replace("    mode: append\n", "    mode: overwrite\n    partition_by: [ts]\n"),
    )
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")  # what a profile's spark.conf sets
    try:
        code, out, err = cli("run", "calls_log")
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")  # the tests' one session
    said = " ".join(err.split())
    assert code == 2, out + err
    assert "calls_log.yaml:16:" in said and "partition_by column 'ts' is a TIMESTAMP" in said and "America/New_York" in said, said
    assert not (project / "warehouse" / "slow").exists()


@pytest.mark.parametrize(
    ("column", "said"),
    [
        ("parse_json('{\"a\": 1}') as doc", "column 'doc' is variant"),
        ("ts - ts as waited", "column 'waited' is interval day to second"),
        ("interval '1' year as span", "column 'span' is interval year"),
        ("named_struct('w', ts - ts) as nested", "column 'nested' is struct<w:interval day to second>"),
    ],
)
def test_a_column_type_a_delta_table_cannot_hold_is_exit_2(spark, cli, project, column, said):
    """VARIANT: the run said "written" and the table could not be read again (its schema and its
    files disagreed); intervals: the run failed in Arrow's or delta-rs' words, naming no column."""
    write(project / "incoming" / "a.json", _lines(_calls(3)))
    write(project / "pipelines" / "calls_log.yaml", APPEND.replace("response_ms, ts\n", f"response_ms, ts, {column}\n"))
    code, out, err = cli("run", "calls_log")
    text = " ".join(err.split())
    assert code == 2, out + err
    assert "calls_log.yaml:14:" in text and said in text and "which a Delta table cannot hold" in text, text
    assert not (project / "warehouse" / "slow").exists()


def test_a_udf_that_raises_is_named_with_its_file_and_line(spark, cli, project):
    """A @udf's error said 'Python code in a task failed: ValueError: boom', naming neither the
    function nor where it is."""
    write(
        project / "udfs" / "scale.py",
        "from framework.functions import udf\n\n\n@udf(returns='double')\ndef scaled(x):\n    raise ValueError('boom')\n",
    )
    write(project / "pipelines" / "calls_log.yaml", APPEND.replace("response_ms, ts", "scaled(response_ms) as scaled, ts"))
    write(project / "incoming" / "a.json", _lines(_calls(3, start=1)))
    code, out, err = cli("run", "calls_log")
    assert code == 1, out + err
    assert "ValueError: boom" in err and "udfs/scale.py:6 in scaled" in err, err
