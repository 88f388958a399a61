"""Streaming pipelines: exactly-once across crashes, same result as batch, one run at a time."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from framework.cli import app
from framework.engine.lock import RunLock
from tests.conftest import delta_rows, delta_version, kill_while_committing, write

pytestmark = pytest.mark.spark

STREAM = """\
name: clicks
mode: {mode}
sources:
  web:
    format: json
    path: landing/web
    schema: user STRING, ts TIMESTAMP, page STRING, ms INT
    event_time: ts
    watermark: 1h
    max_files_per_trigger: {per_trigger}
  app:
    format: json
    path: landing/app
    schema: user STRING, ts TIMESTAMP, page STRING, ms INT
    event_time: ts
    watermark: 1h
steps:
  both:
    union: [web, app]
  slow_pages:
    sql: |
      select user, ts, page, ms, _source
      from {{{{ ref('both') }}}}
      where ms >= {{{{ var('min_ms', 10) | lit }}}}
outputs:
  slow_pages:
    mode: append
"""


def _file(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _batch_files(seed: int, files: int, rows: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for f in range(files):
        stream = "web" if f % 3 else "app"
        data = [
            {
                "user": f"u{rng.randrange(5)}",
                "ts": f"2026-11-02T08:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z",
                "page": rng.choice(["/a", "/b", "/c"]),
                "ms": rng.randrange(40),
            }
            for _ in range(rows)
        ]
        out.append((f"landing/{stream}/part-{f:03d}.json", _file(data)))
    return out


def _as_multiset(rows: list[dict]) -> Counter:
    return Counter(tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows)


def _pipeline(project: Path, mode: str = "streaming", per_trigger: int = 1) -> None:
    write(project / "pipelines" / "clicks.yaml", STREAM.format(mode=mode, per_trigger=per_trigger))


def _streamed_once(cli, project: Path) -> tuple[Path, list[str], int]:
    """The clicks stream run once over two files: its output table, the table's rows and version."""
    for path, text in _batch_files(4, files=2, rows=5):
        write(project / path, text)
    _pipeline(project)
    assert cli("run", "clicks")[0] == 0
    table = project / "warehouse" / "slow_pages"
    return table, sorted(map(str, delta_rows(table))), delta_version(table)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), deliveries=st.integers(1, 3), per_trigger=st.integers(1, 3))
def test_streaming_equals_batch_for_any_split(spark, cli, project, seed, deliveries, per_trigger):
    shutil.rmtree(project / "warehouse", ignore_errors=True)
    shutil.rmtree(project / "landing", ignore_errors=True)
    files = _batch_files(seed, files=6, rows=15)
    cuts = sorted(random.Random(seed).sample(range(1, len(files)), deliveries - 1)) if deliveries > 1 else []
    _pipeline(project, "streaming", per_trigger)
    for folder in ("web", "app"):  # the landing folders exist before any file arrives
        (project / "landing" / folder).mkdir(parents=True, exist_ok=True)
    start = 0
    for end in [*cuts, len(files)]:
        for path, text in files[start:end]:
            write(project / path, text)
        code, _, err = cli("run", "clicks")
        assert code == 0, err
        start = end
    streamed = delta_rows(project / "warehouse" / "slow_pages")

    shutil.rmtree(project / "warehouse")
    _pipeline(project, "batch")
    assert cli("run", "clicks")[0] == 0
    assert _as_multiset(streamed) == _as_multiset(delta_rows(project / "warehouse" / "slow_pages"))


def test_sigkill_mid_stream_loses_and_duplicates_nothing(spark, cli, project, tmp_path):
    files = _batch_files(7, files=16, rows=40)  # enough micro-batches that three kills land before the input ends
    for path, text in files:
        write(project / path, text)
    # the reference is the batch run of the same files (test_streaming_equals_batch_for_any_split
    # checks that an uninterrupted stream writes exactly that), run once in a copy of the project
    reference_project = tmp_path / "reference"
    shutil.copytree(project, reference_project)
    _pipeline(reference_project, "batch")
    os.chdir(reference_project)
    assert cli("run", "clicks")[0] == 0
    reference = _as_multiset(delta_rows(reference_project / "warehouse" / "slow_pages"))
    os.chdir(project)
    _pipeline(project, "streaming", per_trigger=1)

    rng = random.Random(int(os.environ.get("CRASH_SEED", "3")))
    table = project / "warehouse" / "slow_pages"
    kills = kill_while_committing(project, "clicks", table, rng, kills=3, attempts=6)
    assert kills == 3, "the kills should land while the stream is running"
    code, _, err = cli("run", "clicks")
    assert code == 0, err
    assert _as_multiset(delta_rows(table)) == reference


def test_a_second_run_at_the_same_time_refuses(spark, cli, project):
    files = _batch_files(1, files=2, rows=5)
    for path, text in files:
        write(project / path, text)
    _pipeline(project)
    lock = RunLock(project / "warehouse" / "_tributary" / "locks" / "clicks.lock", "someone-else")
    with lock:
        code, _, err = cli("run", "clicks")
    assert code == 1 and "already running" in err and "someone-else" in err
    assert not (project / "warehouse" / "slow_pages").exists()
    assert cli("run", "clicks")[0] == 0  # released


SLOW_STREAM = """\
name: slow_stream
mode: streaming
sources:
  calls: {format: json, path: landing/calls, schema: "n INT"}
steps:
  napped:
    sql: select n, reflect('java.lang.Thread', 'sleep', cast(100 as bigint)) as napped from {{ source('calls') }}
outputs:
  napped: {mode: append}
"""


def test_a_long_micro_batch_shows_its_tasks_as_it_runs(spark, cli, project):
    """A first run over a backlog is one long micro-batch: its output's line shows the stages'
    tasks moving while it runs (after 2 s), as staging a batch output does, not only the commit."""
    write(project / "pipelines/slow_stream.yaml", SLOW_STREAM)
    for i in range(4):  # 4 files of 15 rows, 100 ms a row: about 3 s a task on 2 cores
        write(project / f"landing/calls/part-{i}.json", _file([{"n": i * 15 + j} for j in range(15)]))
    code, out, err = cli("run", "slow_stream")
    assert code == 0, err
    moving = [line for line in out.splitlines() if "output napped" in line and "streaming" in line and " tasks" in line]
    assert moving, out
    assert all(re.search(r"stage \d+: \d+/\d+ tasks", line) for line in moving), moving
    assert len(delta_rows(project / "warehouse/napped")) == 60


def test_a_crashed_runs_lock_does_not_block(project):
    path = project / "warehouse" / "_tributary" / "locks" / "clicks.lock"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    write(path, json.dumps({"run_id": "crashed", "pid": dead.pid, "host": os.uname().nodename, "started": "earlier"}))
    with RunLock(path, "next") as lock:
        assert json.loads(path.read_text())["run_id"] == "next"
    assert not path.exists() and lock


def test_a_step_spark_cannot_stream_is_named_before_anything_starts(spark, cli, project):
    for path, text in _batch_files(2, files=2, rows=5):
        write(project / path, text)
    _pipeline(project)
    pipeline = project / "pipelines" / "clicks.yaml"
    pipeline.write_text(
        pipeline.read_text()
        .replace("select user, ts, page, ms, _source", "select user, count(*) as n")
        .replace("where ms >=", "where ms >=")
        .replace("| lit }}\n", "| lit }}\n      group by user\n")
    )
    code, _, err = cli("run", "clicks")
    assert code == 2
    assert "step 'slow_pages' cannot run in streaming" in err and "watermark" in err
    assert not (project / "warehouse" / "slow_pages").exists()


def test_an_order_by_on_a_stream_is_refused_with_what_to_do_instead(spark, cli, project):
    """Spark cannot sort a stream (it has no end); the run said so with a hint about aggregating
    over event-time windows, which does not help a query that only sorts."""
    for path, text in _batch_files(2, files=2, rows=5):
        write(project / path, text)
    _pipeline(project)
    pipeline = project / "pipelines" / "clicks.yaml"
    pipeline.write_text(pipeline.read_text().replace("| lit }}\n", "| lit }}\n      order by ts\n"))
    code, _, err = cli("run", "clicks")
    assert code == 2
    assert "step 'slow_pages' cannot run in streaming: Sorting is not supported" in err, err
    assert "drop the ORDER BY" in err and "event-time windows" not in err, err
    assert not (project / "warehouse" / "slow_pages").exists()


def test_full_refresh_starts_the_stream_over_and_keeps_the_history(spark, cli, project, monkeypatch):
    from deltalake import DeltaTable

    for path, text in _batch_files(3, files=3, rows=5):
        write(project / path, text)
    _pipeline(project)
    assert cli("run", "clicks")[0] == 0
    table = project / "warehouse" / "slow_pages"
    before = sorted(map(str, delta_rows(table)))
    first_version = delta_version(table)
    assert cli("run", "clicks")[0] == 0  # nothing new
    assert sorted(map(str, delta_rows(table))) == before
    code, _, err = cli("run", "clicks", "--full-refresh")
    assert code == 2 and "--yes" in err
    monkeypatch.setattr("framework.cli.run.interactive", lambda: True)
    result = CliRunner().invoke(app, ["run", "clicks", "--full-refresh"], input="n\n")
    assert result.exit_code == 2 and "--full-refresh declined: nothing was changed" in result.stderr
    assert delta_version(table) == first_version

    assert cli("run", "clicks", "--full-refresh", "--yes")[0] == 0
    assert sorted(map(str, delta_rows(table))) == before  # rebuilt, not appended to
    assert delta_version(table) > first_version  # a new version: the history stays
    assert sorted(map(str, DeltaTable(str(table), version=first_version).to_pyarrow_table().to_pylist())) == before


def test_a_renamed_stream_is_refused_before_it_appends_every_row_again(spark, cli, project):
    """A stream's checkpoint is kept under its pipeline's and output's names: renamed, the stream
    started over and appended every row of its sources again into the same table (exit 0)."""
    table, before, version = _streamed_once(cli, project)
    renamed_output = STREAM.format(mode="streaming", per_trigger=1).replace(
        "  slow_pages:\n    mode: append", "  slow:\n    from: slow_pages\n    name: slow_pages\n    mode: append"
    )
    for text in (renamed_output, STREAM.format(mode="streaming", per_trigger=1).replace("name: clicks", "name: taps")):
        write(project / "pipelines" / "clicks.yaml", text)
        code, out, err = cli("run", "clicks")
        assert code == 2, out + err
        assert "already holds rows (last written by pipeline 'clicks', output 'slow_pages')" in err, err
        assert "--full-refresh" in err and "pipelines/clicks.yaml:" in err, err
        assert delta_version(table) == version
    code, out, err = cli("run", "clicks", "--full-refresh", "--yes")
    assert code == 0, out + err
    assert sorted(map(str, delta_rows(table))) == before  # rebuilt once, under the new name


def test_a_changed_stateful_query_or_source_is_refused_until_the_stream_starts_over(spark, cli, project):
    """Spark carries a stream's state on under whatever query resumes it: a window aggregation
    widened from 10 to 20 minutes went on from the 10-minute windows' state (exit 0). A stateless
    step may change (its query applies from then on); a stateful one, or an output's sources, not."""
    for path, text in _batch_files(5, files=2, rows=5):
        write(project / path, text)
    stream = STREAM.format(mode="streaming", per_trigger=1)
    windows = stream.replace(
        "outputs:\n",
        "  per_page:\n    sql: |\n      select page, window(ts, '10 minutes') as w, count(*) as n\n"
        "      from {{ ref('both') }} group by page, window(ts, '10 minutes')\n"
        "outputs:\n  per_page:\n    mode: append\n",
    )
    pipeline = project / "pipelines" / "clicks.yaml"
    write(pipeline, windows)
    code, out, err = cli("run", "clicks")
    assert code == 0, out + err
    code, out, err = cli("run", "clicks", "--var", "min_ms=20")  # a stateless step's change applies from now on
    assert code == 0, out + err

    write(pipeline, windows.replace("10 minutes", "20 minutes"))
    code, out, err = cli("run", "clicks")
    assert code == 2, out + err
    assert "step 'per_page' keeps state in this stream" in err and "--full-refresh" in err, err
    write(pipeline, windows.replace("union: [web, app]", "union: [web]"))
    code, out, err = cli("run", "clicks")
    assert code == 2 and "output 'per_page' reads the sources ['web'] now, and ['app', 'web']" in err, err
    code, out, err = cli("run", "clicks", "--full-refresh", "--yes")
    assert code == 0, out + err


def test_a_stateless_step_made_stateful_is_refused_until_the_stream_starts_over(spark, cli, project):
    """A step that kept no state when the stream started, made an aggregation: no pin to compare,
    so the run went on to Spark's STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY (exit 1)."""
    for path, text in _batch_files(5, files=2, rows=5):
        write(project / path, text)
    pipeline = project / "pipelines" / "clicks.yaml"
    stream = STREAM.format(mode="streaming", per_trigger=1)
    write(pipeline, stream)
    assert cli("run", "clicks")[0] == 0
    write(project / "landing/web/late.json", _file([{"user": "u", "ts": "2026-11-02T10:00:00Z", "page": "/p", "ms": 50}]))
    aggregating = stream.replace(
        "      select user, ts, page, ms, _source\n      from {{ ref('both') }}\n      where ms >= {{ var('min_ms', 10) | lit }}\n",
        "      select user, max(ts) as ts, max(page) as page, max(ms) as ms, max(_source) as _source\n"
        "      from {{ ref('both') }} group by user, window(ts, '10 minutes')\n",  # the table's columns
    )
    assert aggregating != stream
    write(pipeline, aggregating)
    code, out, err = cli("run", "clicks")
    assert code == 2, out + err
    assert "step 'slow_pages' keeps state in this stream now" in err and "--full-refresh" in err, err
    assert "pipelines/clicks.yaml:" in err and "MISSING_STATE_DIRECTORY" in err


def _swa_stream() -> str:
    """The clicks stream with an SWA step (`sessions`, size 3) written by an append output."""
    return STREAM.format(mode="streaming", per_trigger=1).replace(
        "outputs:\n",
        "  sessions:\n    swa:\n      input: both\n      key: [user]\n      event_time: ts\n      size: 3\n"
        "      timeout: 10m\n      aggregates: {total_ms: sum(ms)}\noutputs:\n  sessions:\n    mode: append\n",
    )


def test_a_changed_window_step_is_refused_until_the_stream_starts_over(spark, cli, project):
    """SWA holds each key's tuples of the windows still open between micro-batches: with `size`
    changed from 3 to 4 the held tuples went on into size-4 windows after size-3 ones were
    emitted (exit 0), windows no run of either size makes. `partitions:` may change (rescale)."""
    for path, text in _batch_files(5, files=2, rows=5):
        write(project / path, text)
    swa = _swa_stream()
    pipeline = project / "pipelines" / "clicks.yaml"
    write(pipeline, swa)
    code, out, err = cli("run", "clicks")
    assert code == 0, out + err
    write(pipeline, swa.replace("      size: 3\n", "      size: 3\n      partitions: 3\n"))
    code, out, err = cli("run", "clicks")
    assert code == 0, out + err

    write(pipeline, swa.replace("size: 3", "size: 4"))
    code, out, err = cli("run", "clicks")
    assert code == 2, out + err
    assert "step 'sessions' holds rows in this stream" in err and "size: 3 → 4" in err and "--full-refresh" in err, err
    code, out, err = cli("run", "clicks", "--full-refresh", "--yes")
    assert code == 0, out + err


def test_a_run_after_a_stream_uses_the_processs_session_not_the_streams(spark, cli, project):
    """A micro-batch that makes a DataFrame (an SWA stream's first state) made the stream's own
    session PySpark's active one in every thread, so the next run in the same process (in-process
    runs one after another, `tributary test`) ran on the stream's session: the `partitions:` it had
    set and none of the confs set on the process's session since (a run with a TIMESTAMP
    partition in another time zone was not refused after one)."""
    from framework.engine.session import spark_session
    from framework.profiles import Profile

    for path, text in _batch_files(5, files=2, rows=5):
        write(project / path, text)
    write(project / "pipelines" / "clicks.yaml", _swa_stream().replace("      size: 3\n", "      size: 3\n      partitions: 3\n"))
    code, out, err = cli("run", "clicks")
    assert code == 0, out + err
    after = spark_session(Profile())
    assert after._jsparkSession.equals(spark._jsparkSession)
    assert after.conf.get("spark.sql.shuffle.partitions") == spark.conf.get("spark.sql.shuffle.partitions") == "2"


def test_a_file_copied_in_with_an_old_time_is_read_by_the_stream(spark, cli, project):
    """Spark's file source skips a file more than a week older than the newest it has read: one
    copied in with its old time (cp -p, rsync -t) was never read, with nothing said."""
    (project / "landing/app").mkdir(parents=True)
    now = time.time()
    for n in range(2):
        path = write(
            project / f"landing/web/part-00{n}.json",
            _file([{"user": f"u{n}", "ts": "2026-11-02T08:00:00Z", "page": "/a", "ms": 20}]),
        )
        os.utime(path, (now - 60 + n, now - 60 + n))
    write(project / "pipelines" / "clicks.yaml", STREAM.format(mode="streaming", per_trigger=1))
    assert cli("run", "clicks")[0] == 0
    old = write(project / "landing/web/old.json", _file([{"user": "old", "ts": "2026-11-02T08:00:30Z", "page": "/a", "ms": 20}]))
    os.utime(old, (now - 30 * 86400, now - 30 * 86400))
    code, out, err = cli("run", "clicks")
    assert code == 0, out + err
    assert sorted(r["user"] for r in delta_rows(project / "warehouse" / "slow_pages")) == ["old", "u0", "u1"]


def test_a_stream_of_a_table_that_gets_overwritten_says_what_to_do_and_can_do_it(spark, cli, project):
    """The stream failed for good ('Set option ignore_changes=true', a key no source had, after
    the name of an internal class), and --full-refresh failed the same way."""
    write(project / "feed/a.json", '{"id": 1}\n')
    writer = "name: writer\nsources:\n  f: {format: json, path: feed, schema: 'id INT'}\n"
    writer += "steps:\n  ids: {sql: 'select id from {{ source(\"f\") }}'}\noutputs:\n  ids: {mode: overwrite}\n"
    write(project / "pipelines/writer.yaml", writer)
    reader = "name: reader\nmode: streaming\nsources:\n  t: {format: delta, table: ids}\n"
    reader += "steps:\n  copied: {sql: 'select id from {{ source(\"t\") }}'}\noutputs:\n  copied: {mode: append}\n"
    write(project / "pipelines/reader.yaml", reader)
    assert cli("run", "writer")[0] == 0 and cli("run", "reader")[0] == 0
    write(project / "feed/b.json", '{"id": 2}\n')
    assert cli("run", "writer")[0] == 0  # an overwrite: it removes rows the stream passed on
    code, out, err = cli("run", "reader")
    assert code == 1 and "ignore_changes: true" in err and "DeltaStreamError" not in err, out + err
    write(project / "pipelines/reader.yaml", reader.replace("table: ids}", "table: ids, ignore_changes: true}"))
    code, out, err = cli("run", "reader")
    assert code == 0, out + err
    assert sorted(r["id"] for r in delta_rows(project / "warehouse/copied")) == [1, 1, 2]  # the rewritten row again


def test_a_failed_stream_says_which_micro_batches_it_committed(spark, cli, project):
    """A micro-batch committed before a later one failed stays (exactly once, the next run goes on
    after it), but the summary and the run log said its output was not committed, 0 rows."""
    write(project / "landing/web/part-000.json", _file([{"user": "u", "ts": "2026-11-02T08:00:00Z", "page": "/a", "ms": 20}]))
    write(project / "landing/web/part-001.json", _file([{"user": "u", "ts": "2026-11-02T08:01:00Z", "page": "/a", "ms": 5000}]))
    os.utime(project / "landing/web/part-000.json", (time.time() - 60, time.time() - 60))
    (project / "landing/app").mkdir(parents=True)
    write(
        project / "pipelines" / "clicks.yaml",
        STREAM.format(mode="streaming", per_trigger=1).replace(
            "where ms >= ", "where assert_true(ms < 1000, 'too slow') is null and ms >= "
        ),
    )
    code, out, err = cli("run", "clicks")
    assert code == 1, out + err
    assert "run failed: output 'slow_pages': streaming query failed" not in err or "too slow" in err, err
    assert "[USER_RAISED_EXCEPTION] too slow" in err and "Project [" not in err, err  # Spark's error, not a plan line
    assert len(delta_rows(project / "warehouse" / "slow_pages")) == 1
    summary = out[out.index("slow_pages", out.index("rows written")) :].split("\n")[0]
    assert "written" in summary and "not committed" not in summary, out
    events = delta_rows(project / "warehouse" / "_tributary" / "events")
    assert [(e["name"], e["status"], e["rows"]) for e in events if e["event"] == "output_end"] == [("slow_pages", "written", 1)]


def test_a_refresh_cut_short_is_finished_by_the_next_run(spark, cli, project):
    """A marker left by a refresh that died between emptying the tables and deleting the
    checkpoints: the next run finishes the refresh instead of resuming over emptied tables."""
    for path, text in _batch_files(3, files=3, rows=5):
        write(project / path, text)
    _pipeline(project)
    assert cli("run", "clicks")[0] == 0
    table = project / "warehouse" / "slow_pages"
    before = sorted(map(str, delta_rows(table)))
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(str(table), DeltaTable(str(table)).to_pyarrow_table().slice(0, 0), mode="overwrite")  # emptied ...
    write(project / "warehouse" / "_tributary" / "checkpoints" / "clicks.refreshing", "r0")  # ... checkpoints not yet gone
    assert cli("run", "clicks")[0] == 0
    assert sorted(map(str, delta_rows(table))) == before
    assert not (project / "warehouse" / "_tributary" / "checkpoints" / "clicks.refreshing").exists()


COUNT_JOIN = """\
name: pairs
mode: streaming
sources:
  phones:
    format: json
    path: landing/phones
    schema: name STRING, ts TIMESTAMP, phone STRING
    event_time: ts
    watermark: 5s
    max_files_per_trigger: 1
  emails:
    format: json
    path: landing/emails
    schema: name STRING, ts TIMESTAMP, email STRING
    event_time: ts
    watermark: 5s
    max_files_per_trigger: 1
steps:
  contacts:
    join:
      left: phones
      right: emails
      on: [name]
      type: {kind}
      last: {{left: {wa}, right: {wb}}}
outputs:
  contacts:
    mode: append
"""


def _count_join_oracle(a_rows: list[dict], b_rows: list[dict], wa: int, wb: int, left: bool) -> Counter:
    """Algorithm 1 over the merged event-time order; for `left`, A rows that left A's window unmatched."""
    from collections import deque

    sequence = sorted(
        [(r["ts"], 0, r["phone"], r) for r in a_rows] + [(r["ts"], 1, r["email"], r) for r in b_rows], key=lambda x: x[:3]
    )
    window_a, window_b, out, matched = deque(), deque(), Counter(), {}
    for _, side, _, row in sequence:
        if side == 0:
            for b in window_b:
                if b["name"] == row["name"]:
                    out[(row["name"], row["ts"], row["phone"], b["ts"], b["email"])] += 1
                    matched[id(row)] = True
            window_a.append(row)
            if len(window_a) > wa:
                gone = window_a.popleft()
                if left and not matched.get(id(gone)):
                    out[(gone["name"], gone["ts"], gone["phone"], None, None)] += 1
        else:
            for a in window_a:
                if a["name"] == row["name"]:
                    out[(a["name"], a["ts"], a["phone"], row["ts"], row["email"])] += 1
                    matched[id(a)] = True
            window_b.append(row)
            if len(window_b) > wb:
                window_b.popleft()
    return out


def _contacts(rng: random.Random, seconds: int, names: int, share: float) -> tuple[list[dict], list[dict]]:
    """A rows (phones) and B rows (emails), one second apart, each second kept with chance `share`."""
    a_rows, b_rows = [], []
    for i in range(seconds):
        t = f"2026-11-02T08:{i // 60:02d}:{i % 60:02d}Z"
        if rng.random() < share:
            a_rows.append({"name": f"p{rng.randrange(names)}", "ts": t, "phone": f"ph{i}"})
        if rng.random() < share:
            b_rows.append({"name": f"p{rng.randrange(names)}", "ts": t, "email": f"e{i}"})
    return a_rows, b_rows


def _land_contacts(project: Path, a_rows: list[dict], b_rows: list[dict], parts: range, of: int) -> None:
    """Parts `parts` of each side's rows cut into `of` files in time order: a file per micro-batch
    and side (file streams take files in modification-time order)."""
    landed = time.time() - 100
    for name, rows in (("phones", a_rows), ("emails", b_rows)):
        size = -(-len(rows) // of)
        for part in parts:
            path = write(project / f"landing/{name}/part-{part}.json", _file(rows[part * size : (part + 1) * size]))
            os.utime(path, (landed + part, landed + part))


def _land_far_future(project: Path) -> None:
    """A far-future row per input: it moves the watermark past every real row, which makes them final."""
    write(project / "landing/phones/part-9.json", _file([{"name": "zz_a", "ts": "2026-11-03T00:00:00Z", "phone": "x"}]))
    write(project / "landing/emails/part-9.json", _file([{"name": "zz_b", "ts": "2026-11-03T00:00:00Z", "email": "x"}]))


def _contact_pairs(table: Path) -> Counter:
    """The joined rows of a count-join output as (name, A's time, phone, B's time, email)."""
    rows = delta_rows(table)
    return Counter((r["name"], _iso(r["phones_ts"]), r["phone"], _iso(r["emails_ts"]), r["email"]) for r in rows)


def _final_pairs(a_rows: list[dict], b_rows: list[dict], wa: int, wb: int, left: bool) -> Counter:
    """Algorithm 1's rows once the far-future rows have passed: zz_a is still in A's window, so not final."""
    expected = _count_join_oracle(a_rows, b_rows, wa, wb, left)
    return Counter({k: v for k, v in expected.items() if k[0] != "zz_a"})


@pytest.mark.parametrize("kind", ["inner", "left"])
def test_streaming_count_window_join_equals_algorithm_1(spark, cli, project, kind):
    a_rows, b_rows = _contacts(random.Random(11), seconds=120, names=6, share=0.8)
    _land_contacts(project, a_rows, b_rows, range(4), of=4)
    _land_far_future(project)
    write(project / "pipelines" / "pairs.yaml", COUNT_JOIN.format(kind=kind, wa=5, wb=4))
    code, _, err = cli("run", "pairs")
    assert code == 0, err
    assert _contact_pairs(project / "warehouse" / "contacts") == _final_pairs(a_rows, b_rows, 5, 4, kind == "left")


def test_a_count_join_killed_while_committing_resumes_to_algorithm_1s_left_join(spark, cli, project):
    """SIGKILLed while its micro-batches commit (each writes its output, then its own state files:
    the kept rows of each side and which kept A rows matched), a left count-window join resumed
    to the end holds exactly Algorithm 1's pairs and unmatched rows: none lost, none twice, no
    A row emitted unmatched that had matched. One kill: each costs a JVM start."""
    rng = random.Random(5)
    a_rows, b_rows = _contacts(rng, seconds=170, names=4, share=0.7)
    _land_contacts(project, a_rows, b_rows, range(6), of=6)
    _land_far_future(project)
    write(project / "pipelines" / "pairs.yaml", COUNT_JOIN.format(kind="left", wa=3, wb=2))
    expected = _final_pairs(a_rows, b_rows, 3, 2, True)
    table = project / "warehouse" / "contacts"

    kills = kill_while_committing(project, "pairs", table, rng, kills=1, attempts=3, commits=3, linger=0.3)
    assert kills == 1, "the kill should land while the stream is running"

    assert (delta_version(table) or -1) >= 0 and sum(_contact_pairs(table).values()) < sum(expected.values())
    code, out, err = cli("run", "pairs")
    assert code == 0, out + err
    got = _contact_pairs(table)
    assert sum(1 for k in got if k[3] is None) > 5, "too few unmatched rows to tell"
    assert got == expected


def test_a_count_join_batch_replayed_after_a_crash_before_its_commit_is_computed_from_the_state_before_it(spark, cli, project):
    """A crash after a micro-batch saved its state and before the output's and the query's commits:
    Spark replays that batch, which must start from the state before it (not the one it saved),
    write the same pairs once, and leave the next micro-batches Algorithm 1's left join. The
    crash is made exact: the output's newest Delta commit and the query's last commit removed."""
    a_rows, b_rows = _contacts(random.Random(8), seconds=120, names=3, share=0.7)
    _land_contacts(project, a_rows, b_rows, range(4), of=6)
    write(project / "pipelines" / "pairs.yaml", COUNT_JOIN.format(kind="left", wa=3, wb=2))
    assert cli("run", "pairs")[0] == 0
    log = project / "warehouse" / "contacts" / "_delta_log"
    newest = max(log.glob("*.json"))
    newest.unlink()
    (log / f"{newest.stem}.crc").unlink(missing_ok=True)
    [commits] = (project / "warehouse" / "_tributary" / "checkpoints" / "pairs").rglob("commits")
    last = max((p for p in commits.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last.unlink()
    (commits / f".{last.name}.crc").unlink(missing_ok=True)

    _land_contacts(project, a_rows, b_rows, range(4, 6), of=6)
    _land_far_future(project)
    code, out, err = cli("run", "pairs")
    assert code == 0, out + err
    assert _contact_pairs(project / "warehouse" / "contacts") == _final_pairs(a_rows, b_rows, 3, 2, True)


def test_a_count_join_turned_from_inner_to_left_on_a_running_stream_is_refused_until_it_starts_over(spark, cli, project):
    """Only a left join's state records which kept A rows matched: going on as a left join from an
    inner join's state would emit rows that matched as unmatched, so the run stops first (exit 2,
    at the join's `type:`, with what to do), and starting over gives Algorithm 1's left join."""
    a_rows, b_rows = [], []
    landed = time.time() - 100
    for part in range(3):
        a = [{"name": f"p{i % 2}", "ts": f"2026-11-02T08:0{part}:{i:02d}Z", "phone": f"ph{part}{i}"} for i in range(4)]
        b = [{"name": f"p{i % 3}", "ts": f"2026-11-02T08:0{part}:{i:02d}Z", "email": f"e{part}{i}"} for i in range(1, 4)]
        a_rows, b_rows = a_rows + a, b_rows + b
        for name, placed in (("phones", a), ("emails", b)):
            path = write(project / f"landing/{name}/part-{part}.json", _file(placed))
            os.utime(path, (landed + part, landed + part))
    _land_far_future(project)
    pipeline = project / "pipelines" / "pairs.yaml"
    pipeline.write_text(COUNT_JOIN.format(kind="inner", wa=2, wb=2))
    assert cli("run", "pairs")[0] == 0
    pipeline.write_text(COUNT_JOIN.format(kind="left", wa=2, wb=2))
    code, out, err = cli("run", "pairs")
    assert code == 2, out + err
    assert 'type: "inner" → "left"' in out + err and "--full-refresh" in out + err, out + err
    assert "pipelines/pairs.yaml:24" in out + err, out + err  # the join's `type:`
    code, out, err = cli("run", "pairs", "--full-refresh", "--yes")
    assert code == 0, out + err
    assert _contact_pairs(project / "warehouse" / "contacts") == _final_pairs(a_rows, b_rows, 2, 2, True)


def _iso(value) -> str | None:
    return None if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_late_rows_are_recorded_and_malformed_records_quarantined(spark, cli, project):
    """A windowed count drops a row behind the watermark: the row is kept in late_rows."""
    _pipeline(project, per_trigger=1)
    pipeline = project / "pipelines" / "clicks.yaml"
    text = pipeline.read_text().replace("watermark: 1h", "watermark: 10s")
    text = text.replace(
        "      select user, ts, page, ms, _source\n      from {{ ref('both') }}\n      where ms >= {{ var('min_ms', 10) | lit }}\n",
        "      select window(ts, '1 minute') as minute, count(*) as clicks\n      from {{ ref('both') }}\n      group by window(ts, '1 minute')\n",
    )
    pipeline.write_text(text)
    write(project / "landing/web/part-1.json", _file([{"user": "u1", "ts": "2026-11-02T08:10:00Z", "page": "/a", "ms": 20}]))
    write(project / "landing/app/part-1.json", _file([{"user": "u1", "ts": "2026-11-02T08:10:00Z", "page": "/a", "ms": 20}]))
    code, _, err = cli("run", "clicks")
    assert code == 0, err
    write(
        project / "landing/web/part-2.json",
        _file(
            [
                {"user": "u2", "ts": "2026-11-02T08:08:00Z", "page": "/b", "ms": 30},
                {"user": "u3", "ts": "2026-11-02T08:10:05Z", "page": "/c", "ms": 30},
            ]
        )
        + "not json at all\n",
    )
    code, out, err = cli("run", "clicks")
    assert code == 0, err
    late = delta_rows(project / "warehouse" / "_tributary" / "late_rows")
    assert [(r["source"], json.loads(r["record"])["user"]) for r in late] == [("web", "u2")]
    assert "older than the watermark" in late[0]["reason"] and late[0]["steps"] == "both"
    bad = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    assert [r["record"] for r in bad] == ["not json at all"] and bad[0]["source"] == "web"
    assert "late rows: 1 from web" in out and "quarantined 1 from web" in out


CHECKED_STREAM = """\
name: checked
mode: streaming
sources:
  raw: {format: json, path: landing/raw, schema: "id BIGINT, ts TIMESTAMP, v INT", event_time: ts, watermark: 1 minute}
steps:
  a:
    sql: select * from {{ source('raw') }}
    expectations:
      - expect_column_values_to_be_between: {column: v, min_value: 0}
        severity: drop
outputs:
  checked_out: {from: a, mode: append}
"""


def test_a_row_behind_the_watermark_that_a_stateless_step_passes_on_is_not_also_late(spark, cli, project):
    """A step that keeps no state passes every row on: rows behind the watermark were written to
    the output (or quarantined) and recorded in late_rows too: 3 rows in, 5 rows out."""
    write(project / "pipelines/checked.yaml", CHECKED_STREAM)
    write(project / "landing/raw/a.json", '{"id": 1, "ts": "2026-01-01 00:10:00", "v": 1}\n')
    assert cli("run", "checked")[0] == 0
    write(
        project / "landing/raw/b.json",
        '{"id": 4, "ts": "2026-01-01 01:00:00", "v": 4}\n{"id": 5, "ts": "2026-01-01 00:00:00", "v": 5}\n'
        '{"id": 6, "ts": "2026-01-01 00:00:01", "v": -1}\n',
    )
    code, out, err = cli("run", "checked")
    assert code == 0, out + err
    assert sorted(r["id"] for r in delta_rows(project / "warehouse" / "checked_out")) == [1, 4, 5]
    late = project / "warehouse" / "_tributary" / "late_rows"
    assert not late.exists() or delta_rows(late) == [], delta_rows(late)


def test_continuous_mode_picks_up_new_files_and_stops_cleanly_on_sigterm(spark, project):
    _pipeline(project, per_trigger=5)
    pipeline = project / "pipelines" / "clicks.yaml"
    pipeline.write_text(pipeline.read_text() + "trigger: {processing_time: 1s}\n")
    for path, text in _batch_files(4, files=2, rows=5):
        write(project / path, text)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    process = subprocess.Popen(
        [sys.executable, "-m", "framework", "run", "clicks", "--continuous"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    table = project / "warehouse" / "slow_pages"
    deadline = time.time() + 120
    while time.time() < deadline and delta_version(table) is None:
        time.sleep(0.2)
    first = len(delta_rows(table))
    write(
        project / "landing/web/late-arrival.json", _file([{"user": "new", "ts": "2026-11-02T08:59:00Z", "page": "/z", "ms": 39}])
    )
    while time.time() < deadline and len(delta_rows(table)) == first:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert len(delta_rows(table)) == first + 1 and "ok" in out
    assert "first micro-batch after" in out  # the start-up is accounted for
    started = [r for r in delta_rows(project / "warehouse" / "_tributary" / "events") if r["event"] == "run_end"]
    assert json.loads(started[-1]["details"])["startup_s"] > 0


def test_contact_join_example_streams_the_same_pairs_as_batch(spark, cli, project):
    code, _, err = cli("run", "contact_join")
    assert code == 0, err
    streamed = _as_multiset(delta_rows(project / "warehouse" / "contacts"))
    assert sum(streamed.values()) > 100
    from deltalake import DeltaTable

    run_id = DeltaTable(str(project / "warehouse" / "contacts")).history(1)[0].get("tributary.run_id")
    assert run_id, "a micro-batch's commit names the run that made it, as a batch run's does"
    assert run_id in cli("runs", "--pipeline", "contact_join")[1]
    pipeline = project / "pipelines" / "contact_join.yaml"
    original = pipeline.read_text()
    pipeline.write_text(original.replace("within: {before: 30s, after: 30s}", "within: {before: 60s, after: 60s}"))
    code, _, err = cli("run", "contact_join")  # resumed, the join's state would hold 30 s of rows for a 60 s window
    assert code == 2 and "step 'contacts' keeps state in this stream" in err, err
    pipeline.write_text(original)
    pipeline.write_text(
        pipeline.read_text()
        .replace("mode: streaming", "mode: batch")
        .replace("  contacts:\n    mode: append", "  contacts_batch:\n    from: contacts\n    mode: append")
    )
    assert cli("run", "contact_join")[0] == 0
    assert _as_multiset(delta_rows(project / "warehouse" / "contacts_batch")) == streamed


def test_capacity_predicts_nodes_next_to_the_last_run(spark, cli, project):
    assert cli("run", "contact_join")[0] == 0
    code, out, err = cli("capacity", "contact_join")
    assert code == 0, err
    assert "n = max(K)·Δt·2·max(N)" in out and "executor slots used" in out and "peak in the last run" in out
    peak = [line for line in out.splitlines() if "peak in the last run" in line][0]
    assert int(peak.split("│")[-2].split()[0]) > 0


def test_a_merge_stream_refuses_a_micro_batch_holding_a_key_twice(spark, cli, project):
    """A new key twice in one micro-batch: both rows were committed, and the merge table held the key
    twice for good (exit 0); an existing key twice failed with delta-rs' words, and the micro-batch's
    other rows were never written."""
    write(
        project / "pipelines/upserts.yaml",
        "name: upserts\nmode: streaming\nsources:\n  rows: {format: json, path: landing/rows, schema: 'id INT, v STRING'}\n"
        "steps:\n  latest:\n    sql: select id, v from {{ source('rows') }}\noutputs:\n  latest: {mode: merge, keys: [id]}\n",
    )
    write(project / "landing/rows/a.json", _file([{"id": 1, "v": "a"}, {"id": 2, "v": "a"}]))
    assert cli("run", "upserts")[0] == 0
    table = project / "warehouse/latest"
    before = delta_version(table)
    write(project / "landing/rows/b.json", _file([{"id": 5, "v": "x"}, {"id": 5, "v": "y"}, {"id": 6, "v": "z"}]))
    code, out, err = cli("run", "upserts")
    assert code == 1, out + err
    assert "merge keys ['id'] are not unique in micro-batch 1's rows (e.g. {'id': 5})" in err, err
    assert delta_version(table) == before and sorted(r["id"] for r in delta_rows(table)) == [1, 2]


def test_a_stream_of_a_moved_project_is_refused_at_the_source_path(spark, cli, project, tmp_path_factory, monkeypatch):
    """A project copied with its warehouse: Spark's checkpoint names the files it read by absolute
    path, and every run of the copy failed with "Wrong basePath ... for the root path" (exit 1)."""
    import shutil

    for path, text in _batch_files(5, files=2, rows=5):
        write(project / path, text)
    _pipeline(project)
    assert cli("run", "clicks")[0] == 0
    moved = tmp_path_factory.mktemp("elsewhere") / "project"
    shutil.copytree(project, moved)
    monkeypatch.chdir(moved)
    write(moved / "landing/web/new.json", _file([{"user": "u", "ts": "2026-11-02T09:00:00Z", "page": "/p", "ms": 50}]))
    code, out, err = cli("run", "clicks")
    assert code == 2, out + err
    assert "source 'web': this stream read its files in" in err and "Wrong basePath" not in err, err
    assert "pipelines/clicks.yaml:6:" in err and "--full-refresh" in err, err
    code, out, err = cli("run", "clicks", "--full-refresh", "--yes")
    assert code == 0, out + err
    assert "u" in {r["user"] for r in delta_rows(moved / "warehouse/slow_pages")}


def test_a_full_refresh_that_fails_leaves_the_outputs_as_they_were_and_the_next_run_refreshes(spark, cli, project):
    """The refresh emptied the outputs and the run failed after: the tables were left empty (402
    rows to 0), though a failed run leaves every output at its previous version."""
    table, before, version = _streamed_once(cli, project)
    pipeline = project / "pipelines" / "clicks.yaml"
    good = pipeline.read_text()
    write(pipeline, good.replace("select user, ts, page, ms, _source", "select user, ts, page, cast(page as int) as ms, _source"))
    code, out, err = cli("run", "clicks", "--full-refresh", "--yes")
    assert code == 1, out + err
    assert "run failed: step 'slow_pages': [CAST_INVALID_INPUT]" in err, err  # named as a batch run names it
    assert sorted(map(str, delta_rows(table))) == before and "rolled back" in out, out
    write(pipeline, good)
    code, out, err = cli("run", "clicks")  # finishes the refresh the failed run began: rebuilt once, not appended to
    assert code == 0, out + err
    assert sorted(map(str, delta_rows(table))) == before and delta_version(table) > version


def test_a_failed_refresh_whose_restore_fails_too_says_so_and_the_next_run_refreshes(spark, cli, project):
    """The refresh emptied the output, the run failed, and putting the output back failed too (the
    same outage): the output was reported 'rolled back' while it was empty. Now it says it was not,
    and the next run finishes the refresh."""
    table, before, version = _streamed_once(cli, project)
    pipeline = project / "pipelines" / "clicks.yaml"
    good = pipeline.read_text()
    write(pipeline, good.replace("select user, ts, page, ms, _source", "select user, ts, page, cast(page as int) as ms, _source"))
    blocked = table / "_delta_log" / f"{version + 2:020d}.json"  # the refresh empties (+1), the restore (+2) cannot commit
    blocked.mkdir()
    code, out, err = cli("run", "clicks", "--full-refresh", "--yes")
    assert code == 1, out + err
    said = " ".join(out.split())
    assert "not rolled back" in said and "the next run starts the refresh over" in said, out
    assert "rolled back" not in said.replace("not rolled back", ""), out
    assert delta_rows(table) == []  # emptied by the refresh, as the line says
    blocked.rmdir()
    write(pipeline, good)
    code, out, err = cli("run", "clicks")  # finishes the refresh the failed run began
    assert code == 0, out + err
    assert sorted(map(str, delta_rows(table))) == before


TWO_OUTPUTS = """\
name: spend
mode: streaming
sources:
  ev: {format: json, path: landing/ev, schema: "id INT, amount INT"}
steps:
  clean:
    sql: select id, amount from {{ source('ev') }}
outputs:
  a: {from: clean, mode: append}
  b: {from: clean, mode: append}
"""
DROP = """    expectations:
      - expect_column_values_to_be_between: {column: amount, min_value: 0, max_value: 80}
        severity: drop
"""


def test_a_drop_expectation_added_to_a_running_stream_judges_only_new_files(spark, cli, project):
    """A step read by two outputs has a quarantine query of its own; new to the stream, it started
    with no checkpoint and judged every file the outputs had read: their rows were in the outputs
    and in the quarantine (in != out + quarantined)."""
    pipeline = project / "pipelines/spend.yaml"
    write(pipeline, TWO_OUTPUTS)
    write(project / "landing/ev/1.json", _file([{"id": i, "amount": 50 + 20 * (i % 3)} for i in range(6)]))  # 2 over 80
    assert cli("run", "spend")[0] == 0
    write(pipeline, TWO_OUTPUTS.replace("{{ source('ev') }}\n", "{{ source('ev') }}\n" + DROP))
    write(project / "landing/ev/2.json", _file([{"id": 10 + i, "amount": 50 + 20 * (i % 3)} for i in range(6)]))
    code, out, err = cli("run", "spend")
    assert code == 0, out + err
    quarantined = sorted(json.loads(r["record"])["id"] for r in delta_rows(project / "warehouse/_tributary/quarantine"))
    assert quarantined == [12, 15], quarantined  # the new file's, once
    for output in ("a", "b"):
        assert sorted(r["id"] for r in delta_rows(project / f"warehouse/{output}")) == [*range(6), 10, 11, 13, 14]


def test_a_second_output_of_a_checked_step_quarantines_no_row_twice(spark, cli, project):
    """With one output the step's refused rows are quarantined by that output's query; a second
    output moves them to a query of its own, which judged the files read before again."""
    pipeline = project / "pipelines/spend.yaml"
    checked = TWO_OUTPUTS.replace("{{ source('ev') }}\n", "{{ source('ev') }}\n" + DROP)
    write(pipeline, checked.replace("  b: {from: clean, mode: append}\n", ""))
    write(project / "landing/ev/1.json", _file([{"id": i, "amount": 50 + 20 * (i % 3)} for i in range(6)]))
    assert cli("run", "spend")[0] == 0
    write(pipeline, checked)
    write(project / "landing/ev/2.json", _file([{"id": 10 + i, "amount": 50 + 20 * (i % 3)} for i in range(6)]))
    code, out, err = cli("run", "spend")
    assert code == 0, out + err
    quarantined = sorted(json.loads(r["record"])["id"] for r in delta_rows(project / "warehouse/_tributary/quarantine"))
    assert quarantined == [2, 5, 12, 15], quarantined  # each once
    assert sorted(r["id"] for r in delta_rows(project / "warehouse/b")) == [0, 1, 3, 4, 10, 11, 13, 14]  # from the start
