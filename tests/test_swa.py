"""`swa:` and `tumbling:` steps: the fold against the rule written literally, end-to-end runs in
batch and streaming (streaming equals batch on every closed window), quarantine, bad specs."""

from __future__ import annotations

import datetime
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from framework.operators.keyed_windows import CLOSED_BY
from framework.operators.swa.batch import fold_windows
from tests.conftest import delta_rows, write

BASE = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def swa_oracle(rows: list[tuple], n: int, t: float) -> list[dict]:
    """The SWA rule of the issue, tuple by tuple. rows: (key, ts seconds, value), in total order."""
    open_: dict = {}
    done: list[dict] = []
    for key, ts, value in rows:
        window = open_.get(key)
        if window is not None and ts - window["start"] <= t and window["count"] < n:
            window["count"] += 1
            window["end"], window["total"] = ts, window["total"] + value
        else:
            if window is not None:
                done.append({**window, "closed_by": "timeout"})
            window = open_[key] = {"key": key, "start": ts, "end": ts, "count": 1, "total": value}
        if window["count"] == n:
            done.append({**window, "closed_by": "count"})
            open_[key] = None
    done += [{**w, "closed_by": "end_of_input"} for w in open_.values() if w is not None]
    return done


# -- the fold, without Spark ---------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60)), max_size=80),
    n=st.integers(1, 6),
    t=st.integers(1, 25),
)
def test_fold_assigns_the_windows_of_the_sequential_rule(rows, n, t):
    rows = sorted(rows)  # by key, then time: the order the fold receives
    if not rows:
        return
    keys = [k for k, _ in rows]
    new_key = np.array([i == 0 or keys[i] != keys[i - 1] for i in range(len(rows))])
    unit, closed, start, position = fold_windows(new_key, np.array([ts for _, ts in rows], dtype=np.int64), n, t)
    got: dict[tuple, dict] = {}
    for (key, ts), u, c, s, p in zip(rows, unit, closed, start, position, strict=True):
        w = got.setdefault((key, int(u)), {"key": key, "start": int(s), "end": ts, "count": 0, "total": 0})
        w.update(end=ts, count=w["count"] + 1, total=w["total"] + 1, closed_by=CLOSED_BY[c])
        assert p == w["count"]  # the tuple's place in its window
    expected = swa_oracle(sorted([(k, ts, 1) for k, ts in rows], key=lambda r: (r[0], r[1])), n, t)
    assert sorted(got.values(), key=lambda w: (w["key"], w["start"], w["end"])) == sorted(
        expected, key=lambda w: (w["key"], w["start"], w["end"])
    )


# -- end to end ----------------------------------------------------------------------------------

PIPELINE = """
name: instances
mode: {mode}
sources:
  calls:
    format: {format}
    path: data/calls
    schema: page STRING, client STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: {watermark}s
    max_files_per_trigger: 1
steps:
  windows:
    swa:
      input: calls
      key: head+client
      columns: {{head: page, client: client}}
      size: {size}
      timeout: {timeout}s
      event_time: ts
      tiebreak: [ms]
      aggregates:
        total_ms: sum(ms)
        slowest: max(ms)
outputs:
  windows: {{mode: append}}
"""


def _row(page, client, seconds, ms) -> dict:
    ts = (BASE + datetime.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z") if seconds is not None else None
    return {"page": page, "client": client, "ts": ts, "ms": ms}


def _land(project: Path, files: list[list[dict]], format: str = "json") -> None:  # the spec's word
    """Files landing one after the other (file streams order them by modification time). Parquet
    files carry the event time's statistics in their footers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = project / "data" / "calls"
    folder.mkdir(parents=True, exist_ok=True)
    for i, rows in enumerate(files):
        path = folder / f"part-{i:04d}.{format}"
        if format == "json":
            write(path, "".join(json.dumps(r) + "\n" for r in rows))
        else:
            ts = [datetime.datetime.fromisoformat(r["ts"]) if r["ts"] else None for r in rows]
            columns = {k: [r[k] for r in rows] for k in ("page", "client")}
            table = pa.table(
                {**columns, "ts": pa.array(ts, pa.timestamp("us", tz="UTC")), "ms": pa.array([r["ms"] for r in rows], pa.int32())}
            )
            pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def _windows(table: Path) -> list[tuple]:
    return sorted(
        (
            r["page"],
            r["client"],
            r["window_start"].timestamp() - BASE.timestamp(),
            r["tuple_count"],
            r["total_ms"],
            r["closed_by"],
        )
        for r in delta_rows(table)
    )


def test_batch_swa_emits_each_rule_and_quarantines_tuples_without_a_key(spark, cli, project):
    write(project / "pipelines" / "instances.yaml", PIPELINE.format(format="json", mode="batch", watermark=5, size=3, timeout=10))
    _land(
        project,
        [
            [
                _row("p1", "c1", 0, 10), _row("p1", "c1", 1, 20), _row("p1", "c1", 2, 30),  # 3 tuples: count
                _row("p1", "c1", 3, 40),  # alone: the next one is more than 10 s after it: timeout
                _row("p1", "c1", 30, 50),  # the last of its key: end_of_input
                _row("p2", "c1", 5, 60), _row("p2", "c1", 5, 61),  # equal times: ordered by the tiebreak
                _row(None, "c2", 6, 70),  # no page: quarantined with the reason
                _row("p2", "c2", None, 80),  # no event time: quarantined
            ]
        ],
    )  # fmt: skip
    code, out, err = cli("run", "instances")
    assert code == 0, out + err
    assert _windows(project / "warehouse" / "windows") == [
        ("p1", "c1", 0.0, 3, 60, "count"),
        ("p1", "c1", 3.0, 1, 40, "timeout"),
        ("p1", "c1", 30.0, 1, 50, "end_of_input"),
        ("p2", "c1", 5.0, 2, 121, "end_of_input"),
    ]
    quarantined = delta_rows(project / "warehouse" / "_tributary" / "quarantine", order_by="reason")
    assert [(q["source"], q["reason"]) for q in quarantined] == [
        ("windows", "event_time ts is null"),
        ("windows", "key column(s) page null: the tuple has no instance key"),
    ]
    assert json.loads(quarantined[1]["record"])["page"] is None  # the whole row is kept, nulls included
    assert "quarantined 2 from windows" in out


def test_tumbling_groups_by_key_inside_count_windows(spark, cli, project):
    write(
        project / "pipelines" / "baseline.yaml",
        """
name: baseline
sources:
  calls: {format: json, path: data/calls, schema: "page STRING, client STRING, ts TIMESTAMP, ms INT"}
steps:
  units:
    tumbling: {input: calls, key: [page], size: 3, event_time: ts, aggregates: {total_ms: sum(ms)}}
outputs:
  units: {}
""",
    )
    _land(
        project, [[_row("a", "c", 0, 1), _row("b", "c", 1, 2), _row("a", "c", 2, 4), _row("a", "c", 3, 8), _row("b", "c", 4, 16)]]
    )
    code, out, err = cli("run", "baseline")
    assert code == 0, out + err
    rows = sorted(
        (r["page"], r["tuple_count"], r["total_ms"], r["closed_by"]) for r in delta_rows(project / "warehouse" / "units")
    )
    # windows: [a b a] [a b]: a's tuples 1 and 4 meet in the first, 8 falls in the second
    assert rows == [("a", 1, 8, "end_of_input"), ("a", 2, 5, "count"), ("b", 1, 2, "count"), ("b", 1, 16, "end_of_input")]


def test_tumbling_gives_order_dependent_aggregates_each_units_tuples_in_time_order(spark, cli, project):
    """Over 1M keys, first, last and collect_list of tumbling units were wrong in 10,333 of 611,708
    units: a unit's tuples sat in several partitions and were aggregated in the order they came."""
    import random

    rng = random.Random(7)
    rows = [_row(f"k{rng.randrange(200)}", "c", second, second) for second in range(4_000)]
    rng.shuffle(rows)
    _land(project, [rows[i::4] for i in range(4)])
    write(
        project / "pipelines" / "baseline.yaml",
        "name: baseline\nsources:\n  calls: {format: json, path: data/calls, "
        'schema: "page STRING, client STRING, ts TIMESTAMP, ms INT"}\n'
        "steps:\n  units:\n    tumbling: {input: calls, key: [page], size: 1000, event_time: ts,\n"
        "      aggregates: {first_ms: first(ms), last_ms: last(ms), all_ms: collect_list(ms)}}\noutputs:\n  units: {}\n",
    )
    code, out, err = cli("run", "baseline")
    assert code == 0, out + err
    expected: dict[tuple[str, int], list[int]] = {}
    for r in sorted(rows, key=lambda r: r["ms"]):  # ms is the tuple's second: the time order
        expected.setdefault((r["page"], r["ms"] // 1000), []).append(r["ms"])
    units = delta_rows(project / "warehouse" / "units")
    assert len(units) == len(expected)
    for u in units:
        want = expected[(u["page"], u["first_ms"] // 1000)]
        assert (u["first_ms"], u["last_ms"], list(u["all_ms"])) == (want[0], want[-1], want), u["page"]


TUMBLING_STREAM = """
name: baseline
mode: streaming
sources:
  calls: {{format: json, path: data/calls, schema: "page STRING, client STRING, ts TIMESTAMP, ms INT",
          event_time: ts, watermark: {delay}s, max_files_per_trigger: 1}}
steps:
  units:
    tumbling: {{input: calls, key: [page], size: {size}, event_time: ts, aggregates: {{total_ms: sum(ms)}}}}
outputs:
  units: {{mode: append}}
"""


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 100_000), files=st.integers(1, 4))
def test_streaming_tumbling_emits_the_batch_runs_full_windows(spark, cli, project, seed, files):
    """Tuples in any split into files, out of order by less than the watermark delay: the stream
    emits exactly the count windows (numbered over the whole input in its total order) that are
    full among the tuples its final watermark has placed; across runs too (state carried)."""
    import shutil

    shutil.rmtree(project / "data" / "calls", ignore_errors=True)
    shutil.rmtree(project / "warehouse", ignore_errors=True)
    rng = random.Random(seed)
    size, delay = rng.randint(2, 4), 4
    seconds = rng.sample(range(60), rng.randint(8, 30))  # distinct event times: one total order
    rows = [_row(rng.choice(["p1", "p2", "p3"]), "c", second, i) for i, second in enumerate(seconds)]
    arrival = sorted(rows, key=lambda r: datetime.datetime.fromisoformat(r["ts"]).timestamp() + rng.uniform(0, delay - 0.5))
    cuts = sorted(rng.sample(range(1, len(arrival)), min(files - 1, len(arrival) - 1)))
    parts = [arrival[a:b] for a, b in zip([0, *cuts], [*cuts, len(arrival)], strict=True)]
    write(project / "pipelines" / "baseline.yaml", TUMBLING_STREAM.format(delay=delay, size=size))
    _land(project, parts[:1])
    assert cli("run", "baseline")[0] == 0  # a first run over the first file: the state carries over
    _land(project, parts)
    code, out, err = cli("run", "baseline")
    assert code == 0, out + err

    ordered = sorted(rows, key=lambda r: r["ts"])
    mark = max(r["ts"] for r in rows)
    mark = (datetime.datetime.fromisoformat(mark) - datetime.timedelta(seconds=delay)).isoformat().replace("+00:00", "Z")
    placed = [r for r in ordered if r["ts"] < mark]
    expected: dict[tuple, list[int]] = {}
    for position, r in enumerate(placed[: len(placed) // size * size]):
        expected.setdefault((position // size, r["page"]), []).append(r["ms"])
    table = project / "warehouse" / "units"
    streamed = (
        sorted((r["page"], r["tuple_count"], r["total_ms"], r["closed_by"]) for r in delta_rows(table)) if table.exists() else []
    )
    assert streamed == sorted((page, len(ms), sum(ms), "count") for (_, page), ms in expected.items())


def _closed_by_mark(rows: list[tuple], n: int, t: float, mark: float) -> list[tuple]:
    """What a stream must have emitted once its watermark reached `mark`: the fold over the tuples
    before the mark, keeping windows closed by count or by a later tuple, plus open windows the
    mark has passed (s + t < mark) as timeouts."""
    final = [r for r in rows if r[1] < mark]
    emitted = []
    for w in swa_oracle(final, n, t):
        if w["closed_by"] == "end_of_input":
            if w["start"] + t >= mark:
                continue
            w["closed_by"] = "timeout"
        emitted.append(w)
    return emitted


def _as_tuples(windows: list[dict]) -> list[tuple]:
    return sorted((*w["key"], float(w["start"]), w["count"], w["total"], w["closed_by"]) for w in windows)


@pytest.mark.parametrize("file_format", ["json", "parquet"])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 100_000), files=st.integers(1, 4))
def test_streaming_swa_equals_batch_on_every_closed_window(spark, cli, project, file_format, seed, files):
    """Random tuples, delivered in any split into files (one micro-batch each) and out of order by
    less than the watermark delay (so none is late): the stream emits exactly the batch run's
    windows that its final watermark has closed. JSON rows are read for the watermark; Parquet
    files give it from their footers."""
    import shutil

    shutil.rmtree(project / "data" / "calls", ignore_errors=True)
    shutil.rmtree(project / "warehouse", ignore_errors=True)
    rng = random.Random(seed)
    n, t, delay = rng.randint(2, 4), rng.choice([3, 5, 8]), 4
    rows = []
    for i in range(rng.randint(10, 40)):
        key = (rng.choice(["p1", "p2"]), rng.choice(["c1", "c2"]))
        rows.append(_row(key[0], key[1], rng.randint(0, 40), i))
    arrival = sorted(rows, key=lambda r: datetime.datetime.fromisoformat(r["ts"]).timestamp() + rng.uniform(0, delay - 0.5))
    cuts = sorted(rng.sample(range(1, len(arrival)), min(files - 1, len(arrival) - 1)))
    _land(project, [arrival[a:b] for a, b in zip([0, *cuts], [*cuts, len(arrival)], strict=True)], file_format)
    pipeline = PIPELINE.format(format=file_format, mode="streaming", watermark=delay, size=n, timeout=t)
    write(project / "pipelines" / "instances.yaml", pipeline)

    code, out, err = cli("run", "instances")
    assert code == 0, out + err
    as_seconds = [(r["page"], r["client"]) for r in rows]
    ordered = sorted(
        (
            ((p, c), (datetime.datetime.fromisoformat(r["ts"]) - BASE).total_seconds(), r["ms"])
            for (p, c), r in zip(as_seconds, rows, strict=True)
        ),
        key=lambda x: (x[1], x[2]),
    )
    mark = max(ts for _, ts, _ in ordered) - delay
    expected = _closed_by_mark(ordered, n, t, mark)
    streamed = (
        [(p, c, s, k, total, closed) for p, c, s, k, total, closed in _windows(project / "warehouse" / "windows")]
        if (project / "warehouse" / "windows").exists()
        else []
    )
    assert streamed == _as_tuples(expected)
    batch = _as_tuples(swa_oracle(ordered, n, t))
    normalized = {w if w[-1] != "end_of_input" else (*w[:-1], "timeout") for w in batch} | set(batch)
    assert set(streamed) <= normalized  # every streamed window is a batch window


# -- bad input -----------------------------------------------------------------------------------

BAD_STEP = """
name: bad
sources:
  calls: {{format: json, path: data/calls, schema: "page STRING, client STRING, ts TIMESTAMP, ms INT"}}
steps:
  windows:
    swa:
{body}
outputs:
  windows: {{}}
"""
GOOD = {
    "input": "calls",
    "key": "head+client",
    "columns": "{head: page, client: client}",
    "size": "3",
    "timeout": "10s",
    "event_time": "ts",
}


def _bad_step(**changes) -> str:
    fields = {**GOOD, **changes}
    return BAD_STEP.format(body="\n".join(f"      {k}: {v}" for k, v in fields.items() if v is not None))


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"key": "head+ip"}, "unknown association strategy 'head+ip'; valid: head, head+time, head+client, head+client+time"),
        ({"key": "head+client+time"}, "strategy 'head+client+time' needs the column of role(s) ['time']"),
        ({"size": "0"}, "greater than or equal to 1"),
        ({"timeout": "0s"}, "timeout must be more than 0"),
        ({"event_time": None}, "event_time"),
        ({"aggregates": "{total: sum(ms) +}"}, "aggregate 'total' is not a SQL expression"),
    ],
)
def test_a_bad_swa_spec_is_named_at_validate_time(cli, project, changes, expected):
    write(project / "pipelines" / "bad.yaml", _bad_step(**changes))
    code, out, err = cli("validate", "bad")
    assert code == 2, out + err
    assert expected in out + err
    assert "pipelines/bad.yaml:" in out + err  # file and line


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_a_column_the_input_lacks_or_a_non_timestamp_event_time_is_exit_2(spark, cli, project, mode):
    """Found before any row is read, also on streams (where the fold itself is planned per
    micro-batch)."""
    text = _bad_step(columns="{head: page, client: client_ip}", event_time="ms")
    if mode == "streaming":
        text = _streaming(text)
    write(project / "pipelines" / "bad.yaml", text)
    _land(project, [[_row("p1", "c1", 0, 10)]])
    code, out, err = cli("run", "bad")
    assert code == 2, out + err
    assert "key column 'client_ip' (strategy 'head+client') is not in input 'calls'" in out + err
    assert "event_time column 'ms' is int, not a timestamp" in out + err


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_an_aggregate_that_cannot_run_is_exit_2(spark, cli, project, mode):
    text = _bad_step() if mode == "batch" else _streaming(_bad_step())
    text = text.replace("      event_time: ts\n", "      event_time: ts\n      aggregates: {total: sum(no_such_column)}\n")
    write(project / "pipelines" / "bad.yaml", text)
    _land(project, [[_row("p1", "c1", 0, 10)]])
    code, out, err = cli("run", "bad")
    assert code == 2, out + err
    assert "aggregate 'total: sum(no_such_column)' cannot run" in out + err


def _streaming(text: str) -> str:
    """The bad-step pipeline as a stream: appended output, a source with a watermark."""
    text = text.replace("name: bad\n", "name: bad\nmode: streaming\n").replace("windows: {}", "windows: {mode: append}")
    return text.replace('ms INT"}', 'ms INT", event_time: ts, watermark: 5s}')


def test_streaming_swa_needs_a_watermark(cli, project):
    text = _bad_step().replace("name: bad\n", "name: bad\nmode: streaming\n").replace("windows: {}", "windows: {mode: append}")
    write(project / "pipelines" / "bad.yaml", text)
    code, out, err = cli("validate", "bad")
    assert code == 2, out + err
    assert "streaming SWA closes windows by the watermark; source(s) ['calls'] have none" in out + err


def test_service_instances_example_swa_beats_the_tumbling_baseline(spark, cli, project):
    """The example on a small generated trace (W scaled down with it): SWA integrates more
    instances precisely than tumbling windows, and the figures land in the quality table."""
    code, out, err = cli("generate", "service-trace", "--instances", "1500", "--files", "4")
    assert code == 0, out + err
    pipeline = project / "pipelines" / "service_instances.yaml"
    pipeline.write_text(pipeline.read_text().replace("size: 32000", "size: 3000"))
    code, out, err = cli("run", "service_instances")
    assert code == 0, out + err
    assert "integration quality" in out and "Completeness (γ = 1)" in out
    figures = {r["step"]: r for r in delta_rows(project / "warehouse" / "_tributary" / "integration_quality")}
    swa, tumbling = figures["instances"], figures["instances_tumbling"]
    assert swa["instances"] == tumbling["instances"] == 1500
    assert swa["completeness_100"] > tumbling["completeness_100"]
    assert swa["completeness_100"] <= swa["completeness_85"] <= swa["completeness_75"]
    assert swa["correct_rate"] > 0.95 and swa["recall"] > 0.95
    rows = delta_rows(project / "warehouse" / "instances")
    assert sum(r["tuple_count"] for r in rows) == swa["tuples"]

    code, out, err = cli("evaluate", "service_instances", "--step", "instances")
    assert code == 0, out + err
    assert "instances: swa head+client+time 13/22s" in out
    assert len(delta_rows(project / "warehouse" / "_tributary" / "integration_quality")) == 3


@pytest.mark.parametrize("file_format", ["json", "parquet"])
def test_streaming_swa_records_late_and_keyless_tuples(spark, cli, project, file_format):
    pipeline = PIPELINE.format(format=file_format, mode="streaming", watermark=4, size=3, timeout=10)
    write(project / "pipelines" / "instances.yaml", pipeline)
    _land(
        project,
        [
            [_row("p1", "c1", s, s) for s in (0, 10, 20, 30)],
            [_row("p1", "c1", 1, 99), _row(None, "c1", 35, 98), _row("p1", "c1", 32, 97)],  # late (mark 26), keyless, fine
        ],
        file_format,
    )
    code, out, err = cli("run", "instances")
    assert code == 0, out + err
    late = delta_rows(project / "warehouse" / "_tributary" / "late_rows")
    assert [json.loads(r["record"])["ms"] for r in late] == [99]
    assert "older than the watermark" in late[0]["reason"]
    quarantined = delta_rows(project / "warehouse" / "_tributary" / "quarantine")
    assert [(q["source"], json.loads(q["record"])["ms"]) for q in quarantined] == [("windows", 98)]
    # the watermark is 35 - 4 = 31 (the keyless tuple still shows how far event time has come):
    # it closed [0, 10] and [20, 30] (32 came more than 10 s after 0 and 20); [32 ...] may still grow
    assert [w[2:] for w in _windows(project / "warehouse" / "windows")] == [(0.0, 2, 10, "timeout"), (20.0, 2, 50, "timeout")]


def test_a_partitioned_streaming_swa_output_gets_the_same_windows_in_partition_folders(spark, cli, project):
    """The operator writes its output's files itself; a table partitioned by a key column gets the
    same windows laid out in its partition folders."""
    import shutil

    from deltalake import DeltaTable

    _land(
        project,
        [
            [_row("p1", "c1", s, s) for s in (0, 1, 2)] + [_row("p2", "c1", 3, 3)],
            [_row("p1", "c1", 20, 20), _row("p2", "c1", 30, 30)],
        ],
    )
    windows = {}
    for layout, output in (("flat", "{mode: append}"), ("partitioned", "{mode: append, partition_by: [page]}")):
        pipeline = PIPELINE.format(format="json", mode="streaming", watermark=4, size=3, timeout=5)
        write(project / "pipelines" / "instances.yaml", pipeline.replace("windows: {mode: append}", f"windows: {output}"))
        shutil.rmtree(project / "warehouse", ignore_errors=True)
        code, out, err = cli("run", "instances")
        assert code == 0, out + err
        windows[layout] = _windows(project / "warehouse" / "windows")
    # mark 26: p1 [0 1 2] by count, p2 [3] and p1 [20] by timeout; p2 [30] still held
    assert [(w[0], w[2], w[-1]) for w in windows["flat"]] == [
        ("p1", 0.0, "count"),
        ("p1", 20.0, "timeout"),
        ("p2", 3.0, "timeout"),
    ]
    assert windows["partitioned"] == windows["flat"]
    table = DeltaTable(str(project / "warehouse" / "windows"))
    assert table.metadata().partition_columns == ["page"]
    assert {uri.split("/windows/", 1)[1].split("/")[0] for uri in table.file_uris()} == {"page=p1", "page=p2"}


def test_sigkill_mid_stream_loses_and_duplicates_no_window(spark, cli, project):
    """Killed while its micro-batches commit (each writes its output's files and its state in one
    job; the commit moves the files into the table), a streaming SWA run resumed to the end holds
    exactly the windows of an uninterrupted run: the rule's own (`_closed_by_mark`, what
    test_streaming_swa_equals_batch_on_every_closed_window checks a stream against), not a second
    streaming run of the same files. One kill: each costs a JVM start."""
    from tests.conftest import delta_version, kill_while_committing

    rng = random.Random(11)
    seconds = sorted(rng.randint(0, 240) for _ in range(160))
    rows = [_row(rng.choice(["p1", "p2", "p3"]), rng.choice(["c1", "c2"]), second, i) for i, second in enumerate(seconds)]
    _land(project, [rows[i : i + 10] for i in range(0, len(rows), 10)], "parquet")  # 16 micro-batches
    write(
        project / "pipelines" / "instances.yaml",
        PIPELINE.format(format="parquet", mode="streaming", watermark=4, size=3, timeout=10),
    )
    # in time order (then by ms, the tiebreak): none is late, and the final watermark is the newest time minus 4 s
    ordered = [((r["page"], r["client"]), float(second), r["ms"]) for r, second in zip(rows, seconds, strict=True)]
    reference = _as_tuples(_closed_by_mark(ordered, 3, 10, mark=seconds[-1] - 4))

    table = project / "warehouse" / "windows"
    kills = kill_while_committing(project, "instances", table, rng, kills=1, attempts=3, commits=3, linger=0.3)
    assert kills == 1, "the kill should land while the stream is running"
    assert (delta_version(table) or -1) >= 0 and len(_windows(table)) < len(reference)
    code, out, err = cli("run", "instances")
    assert code == 0, out + err
    assert len(reference) > 20
    assert _windows(table) == reference


def _small_key_trace(spark, rows):
    """(key, second) pairs as tuples of one SWA spec (n = 3, t = 10 s), numbered, with MICROS."""
    from pyspark.sql import functions as F

    from framework.operators.keyed_windows import MICROS
    from framework.spec.steps import SwaSpec

    spec = SwaSpec.model_validate({"input": "x", "key": ["k"], "size": 3, "timeout": "10s", "event_time": "ts"})
    frame = spark.createDataFrame(
        [(k, datetime.datetime(2026, 1, 1) + datetime.timedelta(seconds=s), i) for i, (k, s) in enumerate(rows)],
        "k STRING, ts TIMESTAMP, n INT",
    ).withColumn(MICROS, F.unix_micros("ts"))
    return spec, frame


@pytest.fixture(params=["jvm", "sql", "pandas"])
def fold(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, spark) -> str:
    """Each SWA fold in turn: the JVM aggregate (the session has Tributary's jar), its SQL form
    (`SwaFoldFunction`, what a Spark Connect session names after it uploads the jar; here through
    the test session's class path) and the pandas UDF that runs without it (TRIBUTARY_JVM=0)."""
    from pyspark.sql import functions as F

    from framework import jvm

    monkeypatch.setenv("TRIBUTARY_JVM", "0" if request.param == "pandas" else "1")
    if request.param == "sql":
        monkeypatch.setattr(
            jvm, "swa_fold", lambda spark, size, timeout, micros: jvm.sql_fold(spark, micros, F.lit(size), F.lit(timeout))
        )
        monkeypatch.setattr(
            jvm, "swa_fold_sized", lambda spark, micros, size, timeout: jvm.sql_fold(spark, micros, size, timeout)
        )
    has_jvm_fold = jvm.swa_fold(spark, 2, 1, F.lit(0)) is not None
    assert has_jvm_fold == (request.param != "pandas"), "the test session must have the JVM functions, and only when enabled"
    return request.param


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 60)), min_size=1, max_size=40),
    batch=st.integers(1, 7),
)
@example(rows=[("a", 0), ("a", 10), ("a", 21), ("b", 5), ("b", 5), ("b", 6), ("b", 7)], batch=2)  # ts − s = t joins; n-th closes
def test_the_fold_assigns_what_the_whole_partition_fold_assigns(spark, fold, rows, batch):
    """Each fold (the pandas UDF sees a key's tuples split over Arrow batches of any size and must
    carry the open window over) assigns what assign_windows assigns with whole partitions: window,
    start and position per tuple, and the same units."""

    from framework.operators.keyed_windows import UNIT, unit_rows
    from framework.operators.swa.batch import POSITION, START, assign_windows, closed_in_place
    from tests.whole_partition_fold import assign_windows as whole_partition_windows

    spec, frame = _small_key_trace(spark, rows)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", batch)
    try:
        assigned = {(r.n, r[UNIT], r[START], r[POSITION]) for r in assign_windows(frame, spec).collect()}
        units = {tuple(r) for r in unit_rows("s", spec, assign_windows(frame, spec), [UNIT], closed_in_place(spec)).collect()}
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    whole = whole_partition_windows(frame, spec)
    assert assigned == {(r.n, r[UNIT], r[START], r[POSITION]) for r in whole.collect()}
    assert units == {tuple(r) for r in unit_rows("s", spec, whole, [UNIT]).collect()}


def test_the_batch_step_sorts_its_tuples_once_and_aggregates_each_window_as_it_streams_past(spark, fold):
    """One shuffle and one sort for the key order (every window function in one Window): a second
    sort of every tuple in another order doubled the step's time. The windows are then aggregated
    in one pass as their tuples stream past (one sort aggregate, after a sort by window that finds
    the tuples in that order already), not by a partial and a final hash aggregation in the same
    task, and an aggregate that depends on order gets each window's tuples in their order. The
    aggregation needs a second shuffle only after the pandas fold (Spark forgets the partitioning
    across a Python UDF)."""
    from framework.operators import StepContext, build_step
    from framework.spec.steps import SwaStep

    step = SwaStep.model_validate(
        {
            "swa": {
                "input": "x",
                "key": ["k"],
                "size": 3,
                "timeout": "10s",
                "event_time": "ts",
                "aggregates": {"s": "collect_list(second(ts))"},
            }
        }
    )
    at = [("a", 2), ("b", 5), ("a", 0), ("a", 1), ("a", 3)]
    tuples = spark.createDataFrame([(k, datetime.datetime(2026, 1, 1, 0, 0, s)) for k, s in at], "k STRING, ts TIMESTAMP")
    units = build_step("swa", StepContext(spark, "s", step, {"x": tuples}))
    plan = units._jdf.queryExecution().executedPlan().toString()  # the plan's shape is the point
    assert plan.count("Window [") == 1
    assert plan.count("Exchange hashpartitioning") == (2 if fold == "pandas" else 1)
    assert ("ArrowEvalPython" in plan) == (fold == "pandas")
    if fold != "pandas":
        sorts = [line.strip() for line in plan.splitlines() if "Sort [" in line and "SortAggregate" not in line]
        assert len(sorts) == 2, plan
        assert sorts[0].startswith("+- Sort [__tributary_key_hash#") and ", __tributary_unit#" in sorts[0], plan  # by window
        assert plan.count("SortAggregate(") == 1 and "HashAggregate" not in plan, plan
    assert sorted((r.k, r.tuple_count, r.s) for r in units.collect()) == [("a", 1, [3]), ("a", 3, [0, 1, 2]), ("b", 1, [5])]


def test_sessions_aggregate_sorted_rows_in_one_pass_unless_their_catalog_is_hive(spark):
    """The plans above need Spark's sort aggregate (every session Tributary starts turns it on);
    a profile with a Hive catalog keeps Spark's default (Hive UDAFs: framework.engine.session)."""
    from framework.engine.session import SORT_AGGREGATE, defaults_for

    assert spark.conf.get(SORT_AGGREGATE) == "true"
    assert defaults_for({})[SORT_AGGREGATE] == "true"
    assert SORT_AGGREGATE not in defaults_for({"spark.sql.catalogImplementation": "hive"})


def test_a_replayed_streaming_batch_recomputes_its_windows_from_the_previous_state(spark, tmp_path):
    """The streaming operator called again with a batch id it has run (Spark's replay after a
    crash) emits the same windows from the state of the batch before it; a state folder written
    by the earlier layout (open and pending tuples in two tables) is read as the held tuples."""
    import shutil

    from framework.operators.micro_batch_state import MicroBatchState
    from framework.operators.swa.stream import HELD, SwaStream
    from framework.spec.steps import SwaStep

    step = SwaStep.model_validate({"swa": {"input": "x", "key": ["k"], "size": 3, "timeout": "10s", "event_time": "ts"}})
    start = datetime.datetime(2026, 1, 1)

    def frame(rows: list[tuple[str, int]]):
        return spark.createDataFrame(
            [(k, start + datetime.timedelta(seconds=s), i) for i, (k, s) in enumerate(rows)], "k STRING, ts TIMESTAMP, n INT"
        )

    def run(operator: SwaStream, rows: list[tuple[str, int]], batch_id: int) -> list[tuple]:
        return sorted(tuple(r) for r in _emitted(spark, operator(frame(rows), batch_id)))

    batches = [[("a", 0), ("a", 1), ("b", 2), ("a", 5)], [("a", 20), ("b", 9), ("b", 30), ("a", 8)], [("a", 45), ("b", 44)]]
    operator = SwaStream("w", step, str(tmp_path / "state"), delay=4.0)
    emitted = [run(operator, rows, i) for i, rows in enumerate(batches)]
    # mark 26: a [0 1 5] by count, a [8] (20 came too late for it) and b [2 9] by timeout; a [20] held
    assert [(w[0], w[-1]) for w in emitted[1]] == [("a", "count"), ("a", "timeout"), ("b", "timeout")]
    assert run(operator, batches[1], 1) == emitted[1]  # replayed after batch 2 ran
    assert operator.figures["state_rows_peak"] >= 2

    # the earlier layout: batch 0's held tuples as `pending`, no `open` tuples
    legacy = MicroBatchState(str(tmp_path / "legacy"))
    folder = Path(legacy.folder(0))
    shutil.copytree(Path(operator.state_dir) / "batch-000000000", folder)
    (folder / HELD).rename(folder / "pending")
    spark.createDataFrame([], spark.read.parquet(str(folder / "pending")).schema).write.parquet(str(folder / "open"))
    assert run(SwaStream("w", step, legacy.root, delay=4.0), batches[1], 1) == emitted[1]


def test_the_streaming_windows_are_folded_and_aggregated_after_one_shuffle(spark, tmp_path):
    """Which windows are final, and the tuples of the others, come out of the aggregation that
    makes the output's rows: no second window over each key, no second shuffle, and no join
    (the watermark is compared as data: framework.operators.batch_values). The aggregation is one
    sort aggregate over the fold's tuples, sorted by window (they are in that order already).
    The shuffle hashes the key's hash alone, not the key's columns again, and the tuple the state
    may keep is a column computed before the aggregation, not collect_list's argument (which
    Spark evaluates row by row, interpreted)."""
    import re

    from framework.operators.keyed_windows import with_micros
    from framework.operators.swa.stream import SwaStream
    from framework.spec.steps import SwaStep

    step = SwaStep.model_validate({"swa": {"input": "x", "key": ["k"], "size": 3, "timeout": "10s", "event_time": "ts"}})
    rows = [(k, datetime.datetime(2026, 1, 1) + datetime.timedelta(seconds=s)) for k, s in [("a", 0), ("b", 25), ("a", 30)]]
    tuples = with_micros(spark.createDataFrame(rows, "k STRING, ts TIMESTAMP"), step.swa)
    windows = SwaStream("w", step, str(tmp_path / "state"), delay=1.0).windows(tuples, mark=29_000_000)
    plan = windows._jdf.queryExecution().executedPlan().toString()  # the plan's shape is the point
    assert plan.count("Exchange hashpartitioning") == 1
    assert plan.count("Exchange") == 1 and "Join" not in plan
    assert plan.count("Sort [") == 2 and plan.count("SortAggregate(") == 1 and "HashAggregate" not in plan
    assert plan.count("Window [") == 1
    assert "ArrowEvalPython" not in plan
    assert re.search(r"Exchange hashpartitioning\(__tributary_key_hash#\d+L?, \d+\)", plan), plan
    assert re.search(r"collect_list\(__tributary_held_tuple#\d+, ", plan), plan


def _micro_batches(spark, state: Path):  # a function
    """Runs micro-batches of (key, second) tuples through one streaming SWA operator (key k, n = 3,
    t = 3 s, watermark delay 1 s); each returns (key, tuple_count, closed_by) of what it emitted."""
    from framework.operators.swa.stream import SwaStream
    from framework.spec.steps import SwaStep

    step = SwaStep.model_validate({"swa": {"input": "x", "key": ["k"], "size": 3, "timeout": "3s", "event_time": "ts"}})
    operator = SwaStream("w", step, str(state), delay=1.0)

    def run(seconds: list[tuple[str, int]], batch_id: int) -> list[tuple]:
        rows = [(k, datetime.datetime(2026, 1, 1) + datetime.timedelta(seconds=s)) for k, s in seconds]
        emitted = operator(spark.createDataFrame(rows, "k STRING, ts TIMESTAMP"), batch_id)
        return sorted((r.k, r.tuple_count, r.closed_by) for r in _emitted(spark, emitted))

    return run


def _emitted(spark, written) -> list:  # a SparkSession and the operator's WrittenRows
    """The rows a streaming SWA operator wrote for its output (the sink commits these files)."""
    return spark.read.schema(written.schema).parquet(written.folder).collect()


def test_a_window_whose_timeout_or_nth_tuple_is_at_the_watermark_stays_held_whole(spark, tmp_path):
    """At the mark is not before it: a tuple still to come may carry the mark's event time. So b
    (s + t = mark) and a (n-th tuple at the mark) wait, keep all their tuples, and come out whole
    once the mark passes them."""
    run = _micro_batches(spark, tmp_path / "state")
    assert run([("a", 3), ("a", 4), ("a", 5), ("b", 2), ("c", 6)], 0) == []  # mark 5
    assert run([("d", 20)], 1) == [("a", 3, "count"), ("b", 1, "timeout"), ("c", 1, "timeout")]


def test_a_window_closed_by_count_is_emitted_once_its_last_tuple_is_before_the_watermark(spark, tmp_path):
    """Before its timeout runs out: a's third tuple (n = 3) is before the mark (6 − 1 s); c's
    third tuple is not, so c's window waits even though it is full."""
    from framework.operators.swa.stream import SwaStream
    from framework.spec.steps import SwaStep

    step = SwaStep.model_validate({"swa": {"input": "x", "key": ["k"], "size": 3, "timeout": "10s", "event_time": "ts"}})
    seconds = [("a", 0), ("a", 1), ("a", 2), ("c", 3), ("c", 4), ("c", 6)]
    rows = [(k, datetime.datetime(2026, 1, 1) + datetime.timedelta(seconds=s)) for k, s in seconds]
    emitted = SwaStream("w", step, str(tmp_path / "state"), delay=1.0)(spark.createDataFrame(rows, "k STRING, ts TIMESTAMP"), 0)
    assert [(r.k, r.tuple_count, r.closed_by) for r in _emitted(spark, emitted)] == [("a", 3, "count")]


def test_an_empty_micro_batch_emits_nothing_and_keeps_the_state(spark, tmp_path):
    """Spark may leave rows it knows are empty out of the fold's plan; nothing is counted then,
    and the operator neither fails nor loses the held tuples."""
    run = _micro_batches(spark, tmp_path / "state")
    assert run([("a", 3), ("b", 2)], 0) == []
    assert run([], 1) == []
    assert run([("c", 20)], 2) == [("a", 1, "timeout"), ("b", 1, "timeout")]


def test_a_streaming_batchs_figures_counted_in_its_tasks_are_what_its_files_hold(spark, tmp_path):
    """The windows a batch emitted, their lifetimes and the windows it left open come from the
    fold job's tasks: they equal what its output files and the SWA rule over its held tuples say."""
    import pyarrow.dataset as ds

    from framework.operators.micro_batch_state import OUTPUT, MicroBatchState
    from framework.operators.swa.stream import HELD, SwaStream
    from framework.spec.steps import SwaStep

    step = SwaStep.model_validate({"swa": {"input": "x", "key": ["k"], "size": 3, "timeout": "10s", "event_time": "ts"}})
    start = datetime.datetime(2026, 1, 1)
    operator = SwaStream("w", step, str(tmp_path / "state"), delay=4.0)
    state = MicroBatchState(operator.state_dir)
    batches = [
        [("a", 0), ("a", 1), ("b", 2), ("a", 5), ("c", 6)],
        [("a", 20), ("b", 9), ("b", 30), ("a", 8), ("c", 26)],
        [("a", 45)],
    ]
    for batch_id, seconds in enumerate(batches):
        rows = [(k, start + datetime.timedelta(seconds=s)) for k, s in seconds]
        operator(spark.createDataFrame(rows, "k STRING, ts TIMESTAMP"), batch_id)
        folder, figures = state.folder(batch_id), operator.batches[batch_id]
        held = state.rows(folder, HELD)
        assert figures["open_windows"] == operator._measure(folder, held, ["k"], state.meta(folder)["mark"]) > 0
        out = ds.dataset(f"{folder}/{OUTPUT}", format="parquet").to_table() if state.rows(folder, OUTPUT) else None
        windows = [] if out is None else out.to_pylist()
        lifetimes = sum(
            (w["window_end"] - w["window_start"]).total_seconds() if w["closed_by"] == "count" else 10.0 for w in windows
        )
        assert (figures["windows_closed"], figures["lifetime_sum_s"]) == (len(windows), pytest.approx(lifetimes))
    assert [operator.batches[i]["windows_closed"] for i in range(3)] == [0, 4, 3]
