"""Streams compose: a per-micro-batch step (swa, group, count join, tumbling) feeds other steps on
a stream through an internal exactly-once Delta table (framework.plan.model.Chain), and the
stream's outputs equal batch's for any split into runs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import delta_rows, write

pytestmark = pytest.mark.spark

CHAIN = """\
name: chained
mode: {mode}
sources:
  hits:
    format: json
    path: landing/hits
    schema: user STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: 10s
    max_files_per_trigger: {per_trigger}
steps:
  sessions:
    swa:
      input: hits
      key: [user]
      size: 3
      timeout: 30s
      event_time: ts
      aggregates: {{ms: sum(ms)}}
  per_minute:
    sql: |
      SELECT window.start AS minute, count(*) AS sessions, sum(tuple_count) AS tuples, sum(ms) AS ms
      FROM {{{{ ref('sessions') }}}}
      GROUP BY window(window_start, '1 minute')
outputs:
  sessions: {{from: sessions, mode: append}}
  per_minute: {{from: per_minute, mode: append}}
"""


def hit_files(seed: int, files: int, rows: int) -> list[list[dict]]:
    """Files of hits in event-time order across files (shuffled within a file, no row later than
    the 10 s watermark), then a last file with a `flush` user's hits one and two hours later: the
    first closes every window, the second closes the first's, whose window start moves the chain's
    watermark past every minute before it (a chained reader's watermark moves with the rows it reads)."""
    import random

    rng = random.Random(seed)
    out, second = [], 0
    for _ in range(files):
        batch = []
        for _ in range(rows):
            second += rng.randrange(0, 6)
            batch.append({"user": f"u{rng.randrange(4)}", "ts": _ts(second), "ms": rng.randrange(100)})
        rng.shuffle(batch)
        out.append(batch)
    out.append([{"user": "flush", "ts": _ts(second + 3600), "ms": 0}, {"user": "flush", "ts": _ts(second + 7200), "ms": 0}])
    return out


def _ts(second: int) -> str:
    return f"2026-11-02T{8 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"


def _multiset(rows: list[dict], drop: tuple[str, ...] = ()) -> Counter:
    """Rows as a multiset; a batch run calls a key's last window `end_of_input` where the stream,
    whose flush hits passed it, says `timeout` (framework.operators.swa.stream): the same window."""
    same = [{**r, "closed_by": "timeout"} if r.get("closed_by") == "end_of_input" else r for r in rows]
    return Counter(json.dumps({k: str(v) for k, v in sorted(r.items()) if k not in drop}) for r in same)


def _land(project: Path, files: list[list[dict]], first: int = 0) -> None:
    """Land files in event-time order, each with a later modification time: Spark's file source
    reads a source's files in modification-time order, and files written within the same
    millisecond in any order (one file per micro-batch, a later file read first makes the rows of
    the earlier one late)."""
    import os
    import time

    landed = time.time() - 3600
    for i, rows in enumerate(files, first):
        path = write(project / f"landing/hits/part-{i:03d}.json", "".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (landed + i, landed + i))


def _batch_reference(cli, project: Path, files: list[list[dict]]) -> tuple[list[dict], list[dict]]:
    """The batch run's sessions and minutes over all files; then the project as if it never ran."""
    import shutil

    write(project / "pipelines/chained.yaml", CHAIN.format(mode="batch", per_trigger=1))
    _land(project, files)
    code, _, err = cli("run", "chained")
    assert code == 0, err
    sessions, minutes = delta_rows(project / "warehouse/sessions"), delta_rows(project / "warehouse/per_minute", "minute")
    for folder in ("warehouse", "landing"):
        shutil.rmtree(project / folder)
    return sessions, minutes


def _assert_as_batch(project: Path, files: list[list[dict]], batch_sessions: list[dict], batch_minutes: list[dict]) -> None:
    """The stream's tables are batch's, but for the flush hits' windows and minutes (maybe held)."""
    stream_sessions = delta_rows(project / "warehouse/sessions")
    stream_minutes = delta_rows(project / "warehouse/per_minute", "minute")
    flushed = min(r["window_start"] for r in batch_sessions if r["user"] == "flush").replace(second=0)  # its minute
    expected = _multiset([r for r in batch_sessions if r["user"] != "flush"])
    users = _multiset([r for r in stream_sessions if r["user"] != "flush"])
    assert users == expected, (users - expected, expected - users)
    assert [r for r in stream_minutes if r["minute"] < flushed] == [r for r in batch_minutes if r["minute"] < flushed]
    assert sum(r["tuples"] for r in stream_minutes if r["minute"] < flushed) == sum(len(f) for f in files) - 2


def test_swa_feeds_a_per_minute_sql_aggregation_on_a_stream_as_in_batch(spark, cli, project: Path):
    files = hit_files(3, files=4, rows=30)
    batch_sessions, batch_minutes = _batch_reference(cli, project, files)
    write(project / "pipelines/chained.yaml", CHAIN.format(mode="streaming", per_trigger=10))
    (project / "landing/hits").mkdir(parents=True)  # a stream's folder must exist (validate refuses it otherwise)
    code, out, err = cli("validate", "chained")
    assert code == 0, err
    for i, rows in enumerate(files):  # one file per run: the chain carries its state between runs
        _land(project, [rows], first=i)
        code, out, err = cli("run", "chained")
        assert code == 0, err
    said = " ".join(out.split())  # the summary folds long lines
    assert "step 'sessions' is chained: the steps reading it see the watermark window_start − 40s" in said
    _assert_as_batch(project, files, batch_sessions, batch_minutes)


def test_a_chained_steps_drop_expectation_refuses_rows_before_its_readers_see_them(spark, cli, project: Path):
    """As in batch: a session the swa step's `drop` expectation refuses is quarantined once and
    never reaches the per-minute step that reads the chain."""
    import shutil

    checked = CHAIN.replace(
        "      aggregates: {{ms: sum(ms)}}\n",
        "      aggregates: {{ms: sum(ms)}}\n    expectations:\n"
        "      - expect_column_values_to_be_between: {{column: ms, max_value: 150}}\n        severity: drop\n",
    )
    files = hit_files(5, files=3, rows=20)
    tables = {}
    for mode in ("batch", "streaming"):
        write(project / "pipelines/chained.yaml", checked.format(mode=mode, per_trigger=1))
        _land(project, files)
        code, _, err = cli("run", "chained")
        assert code == 0, err
        warehouse = project / "warehouse"
        tables[mode] = {t: delta_rows(warehouse / t) for t in ("sessions", "per_minute", "_tributary/quarantine")}
        for folder in ("warehouse", "landing"):
            shutil.rmtree(project / folder)
    batch, stream = tables["batch"], tables["streaming"]
    refused = [json.loads(r["record"]) for r in batch["_tributary/quarantine"]]
    assert refused and all(r["ms"] > 150 for r in refused), "the data has sessions to refuse"
    assert _multiset([json.loads(r["record"]) for r in stream["_tributary/quarantine"]]) == _multiset(refused)
    assert {r["source"] for r in stream["_tributary/quarantine"]} == {"sessions"}
    flushed = min(r["window_start"] for r in batch["sessions"] if r["user"] == "flush").replace(second=0)
    assert _multiset([r for r in stream["sessions"] if r["user"] != "flush"]) == _multiset(
        [r for r in batch["sessions"] if r["user"] != "flush"]
    )
    minutes = [
        sorted((r["minute"], r["tuples"], r["ms"]) for r in t["per_minute"] if r["minute"] < flushed) for t in (batch, stream)
    ]
    assert minutes[0] == minutes[1]


def test_a_chain_killed_mid_run_loses_and_duplicates_nothing(spark, cli, project: Path):
    """SIGKILL real `tributary run` processes while the chain's table or the outputs commit (one
    file per micro-batch), then run to the end: the tables are batch's, no row lost or twice."""
    import random

    from tests.conftest import kill_while_committing

    files = hit_files(7, files=8, rows=15)
    batch_sessions, batch_minutes = _batch_reference(cli, project, files)
    write(project / "pipelines/chained.yaml", CHAIN.format(mode="streaming", per_trigger=1))
    _land(project, files)
    chain_table = project / "warehouse/_tributary/chains/chained/sessions"
    kills = kill_while_committing(project, "chained", chain_table, random.Random(7), kills=2, attempts=5, commits=3, linger=4.0)
    assert kills >= 1, "a kill should land while the chain runs"
    code, _, err = cli("run", "chained")
    assert code == 0, err
    _assert_as_batch(project, files, batch_sessions, batch_minutes)
    chained = delta_rows(chain_table)
    assert len(_multiset(chained)) == len(chained), "a window committed twice to the chain's table"


# -- the trading example: one DAG in both modes, files landing apart ------------------------------------


def _trading_best(project: Path, table: str) -> dict:
    return {r["request"]: (r["pair"], round(r["correlation"], 9), r["pairs"]) for r in delta_rows(project / "warehouse" / table)}


def test_trading_stream_gives_batchs_answer_when_a_requests_files_land_apart(spark, cli, project: Path):
    """Requests 0-3, a run, requests 4-7, a run; then request 8's five stock files one per run: no
    tick is late, and the stream's best pairs (pairs → best, as in batch) are batch's."""
    import shutil

    ticks = project / "data/samples/ticks"
    assert cli("generate", "ticks", "--requests", "4", "--ticks", "2000", "--out", str(ticks))[0] == 0
    code, out, err = cli("run", "trading_correlation_streaming")
    assert code == 0, out + err
    assert cli("generate", "ticks", "--requests", "4", "--ticks", "2000", "--first", "4", "--out", str(ticks))[0] == 0
    code, out, err = cli("run", "trading_correlation_streaming")
    assert code == 0, out + err
    assert "late rows" not in out, out
    apart = project / "apart"
    assert cli("generate", "ticks", "--requests", "1", "--ticks", "2000", "--first", "8", "--out", str(apart))[0] == 0
    for stock in sorted(p.name for p in apart.iterdir()):  # one stock file per run
        (ticks / stock).mkdir(exist_ok=True)
        shutil.move(apart / stock / "request-000008.parquet", ticks / stock / "request-000008.parquet")
        code, out, err = cli("run", "trading_correlation_streaming")
        assert code == 0, out + err
        assert "late rows" not in out, out
    assert not (project / "warehouse/_tributary/late_rows").exists() or not delta_rows(project / "warehouse/_tributary/late_rows")
    streamed = _trading_best(project, "trading_best_stream")
    assert cli("run", "trading_correlation")[0] == 0
    assert streamed == _trading_best(project, "trading_best") and len(streamed) == 9


def test_a_udf_that_raises_behind_a_chain_is_said_with_its_error(spark, cli, project: Path):
    """A step reading a chained step runs in its own query: its udf's error reached the run as
    'An exception was raised by the Python Proxy. Return Message: Traceback (most recent call
    last):', the error itself only in the log file."""
    ticks = project / "data/samples/ticks"
    assert cli("generate", "ticks", "--requests", "2", "--ticks", "300", "--out", str(ticks))[0] == 0
    trading = project / "udfs/trading.py"
    text = trading.read_text()
    assert "    return np.arctanh(correlation.clip(-0.999999, 0.999999))" in text
    trading.write_text(
        text.replace("    return np.arctanh(correlation.clip(-0.999999, 0.999999))", "    raise ValueError('fisher broke')")
    )
    code, out, err = cli("run", "trading_correlation_streaming")
    assert code == 1, out + err
    assert "ValueError: fisher broke" in err and "Python Proxy" not in err, err
