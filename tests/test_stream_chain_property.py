"""Property: for random chains of per-micro-batch-fed kinds (swa → SQL window aggregation,
group → SQL, group → group, count join → swa) and random splits into files and micro-batches, a
stream's outputs are batch's, and every input row is accounted for: in the output, late,
quarantined or held."""

from __future__ import annotations

import json
import os
import random
import shutil
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import delta_rows, write

pytestmark = pytest.mark.spark

SOURCE = """\
name: prop
mode: {mode}
sources:
  hits:
    format: json
    path: landing/hits
    schema: user STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: 10s
    max_files_per_trigger: {per_trigger}
"""

#: the count join's second input: the same files, read as a source of its own (a self-join)
AGAIN = """\
  again:
    format: json
    path: landing/hits
    schema: user STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: 10s
    max_files_per_trigger: {per_trigger}
"""

#: each chain: its steps, its output's table, and the column that says how many input rows a row holds
CHAINS = {
    "swa_sql": (
        """\
steps:
  first:
    swa: {input: hits, key: [user], size: 3, timeout: 30s, event_time: ts, aggregates: {ms: sum(ms)}}
  last:
    sql: |
      SELECT window.start AS minute, count(*) AS windows, sum(tuple_count) AS n, sum(ms) AS ms
      FROM {{ ref('first') }}
      GROUP BY window(window_start, '1 minute')
""",
        "tuple_count",
    ),
    "group_sql": (
        """\
steps:
  first:
    group: {inputs: [hits], key: [user], event_time: ts, close: {count: 3, timeout: 30s}, function: chain_count}
  last:
    sql: |
      SELECT user, ts, n, ms FROM {{ ref('first') }} WHERE n > 0
""",
        "n",
    ),
    "group_group": (
        """\
steps:
  first:
    group: {inputs: [hits], key: [user], event_time: ts, close: {count: 3, timeout: 30s}, function: chain_count}
  last:
    group: {inputs: [first], key: [user], event_time: ts, close: {count: 2, timeout: 2m}, function: chain_sum}
""",
        "n",
    ),
    # a pair carries both rows' event times: the analyst names the pair's (the later one, when the
    # join emits it) in a projection, and windows the pairs by it
    "count_join_swa": (
        """\
steps:
  first:
    join: {left: hits, right: again, on: [user], last: {left: 2, right: 2}, tiebreak: [ms]}
  pairs:
    sql: |
      SELECT user, greatest(hits_ts, again_ts) AS ts, hits_ms + again_ms AS ms FROM {{ ref('first') }}
  last:
    swa: {input: pairs, key: [user], size: 3, timeout: 30s, event_time: ts, aggregates: {ms: sum(ms)}}
""",
        "tuple_count",
    ),
}

OUTPUTS = """\
outputs:
  first: {from: first, mode: append}
  last: {from: last, mode: append}
"""

FUNCTIONS = """\
from framework.functions import group_function


@group_function(returns="ts timestamp, n bigint, ms bigint")
def chain_count(events, state, args):
    return {"ts": events["ts"].max(), "n": len(events), "ms": int(events["ms"].sum())}


@group_function(returns="ts timestamp, n bigint, ms bigint")
def chain_sum(events, state, args):
    return {"ts": events["ts"].max(), "n": int(events["n"].sum()), "ms": int(events["ms"].sum())}
"""


def _rows(seed: int, count: int) -> list[dict]:
    """Hits in event-time order (ties and seconds apart), a few without a user (quarantined in both
    modes), then a `flush` user's hits one and two hours later that close every earlier unit."""
    rng = random.Random(seed)
    rows, second = [], 0
    for _ in range(count):
        second += rng.randrange(0, 8)
        user = None if rng.random() < 0.05 else f"u{rng.randrange(3)}"
        rows.append({"user": user, "ts": _ts(second), "ms": rng.randrange(100)})
    return rows + [{"user": "flush", "ts": _ts(second + 3600), "ms": 0}, {"user": "flush", "ts": _ts(second + 7200), "ms": 0}]


def _ts(second: int) -> str:
    return f"2026-11-02T{8 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"


def _split(rows: list[dict], cuts: list[int]) -> list[list[dict]]:
    """Consecutive files (a row is in one file); each file's rows shuffled (within the watermark)."""
    edges = sorted({min(c, len(rows) - 1) for c in cuts if 0 < c < len(rows) - 1})
    parts = [rows[a:b] for a, b in zip([0, *edges], [*edges, len(rows)], strict=True)]
    for i, part in enumerate(parts):
        random.Random(i).shuffle(part)
    return [p for p in parts if p]


def _run(cli, project: Path, chain: str, mode: str, files: list[list[dict]], per_trigger: int) -> str:
    steps, _ = CHAINS[chain]
    sources = SOURCE + (AGAIN if "again" in steps else "")
    write(project / "pipelines/prop.yaml", sources.format(mode=mode, per_trigger=per_trigger) + steps + OUTPUTS)
    for i, rows in enumerate(files):  # a stream reads files in modification-time order, ties in any order
        path = write(project / f"landing/hits/part-{i:03d}.json", "".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    code, out, err = cli("run", "prop")
    assert code == 0, out + err
    return out


def _table(project: Path, name: str) -> list[dict]:
    path = project / "warehouse" / name
    return delta_rows(path) if path.exists() else []


def _multiset(rows: Iterable[dict]) -> Counter:
    """Rows as a multiset. A batch run calls a key's last SWA window `end_of_input` where the
    stream, whose flush hits passed it, says `timeout`: the same window."""
    same = ({**r, "closed_by": "timeout"} if r.get("closed_by") == "end_of_input" else r for r in rows)
    return Counter(json.dumps({k: str(v) for k, v in sorted(r.items())}) for r in same)


def _held(project: Path) -> dict[str, int]:
    events = _table(project, "_tributary/events")
    return {e["name"]: e["rows"] for e in events if e["event"] == "held"}


@pytest.fixture
def udfs(project: Path) -> Path:
    write(project / "udfs/chain_functions.py", FUNCTIONS)
    return project


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    chain=st.sampled_from(sorted(CHAINS)),
    seed=st.integers(0, 1000),
    count=st.integers(20, 60),
    cuts=st.lists(st.integers(1, 60), max_size=4),
    per_trigger=st.integers(1, 3),
)
@example(chain="count_join_swa", seed=11, count=50, cuts=[9, 30, 41], per_trigger=2)  # each chain at least once
def test_a_chain_streams_what_batch_computes_and_accounts_for_every_row(spark, cli, udfs, chain, seed, count, cuts, per_trigger):
    project = udfs
    for folder in ("warehouse", "landing"):
        shutil.rmtree(project / folder, ignore_errors=True)
    rows = _rows(seed, count)
    files = _split(rows, cuts)
    _run(cli, project, chain, "batch", files, per_trigger)
    batch_last = [r for r in _table(project, "last") if r.get("user") != "flush"]
    batch_last = [r for r in batch_last if "minute" not in r or r["minute"] < _flush_minute(rows)]
    batch_first = _table(project, "first")
    for folder in ("warehouse", "landing"):
        shutil.rmtree(project / folder)

    _run(cli, project, chain, "streaming", files, per_trigger)
    _, weight = CHAINS[chain]
    stream_last = _table(project, "last")
    users = [r for r in stream_last if r.get("user") != "flush" and ("minute" not in r or r["minute"] < _flush_minute(rows))]
    assert _multiset(users) == _multiset(batch_last), chain
    if chain == "count_join_swa":
        _pairs_accounted_for(project, batch_first, stream_last)
        return

    # every input row: in the first step's emitted rows, quarantined, late, or held by it ...
    first = _table(project, "first")
    quarantined = len(_table(project, "_tributary/quarantine"))
    late = len(_table(project, "_tributary/late_rows"))
    held = _held(project)
    emitted = sum(r[weight] for r in first)
    assert len(rows) == emitted + quarantined + late + held.get("first", 0), (chain, held)
    assert quarantined == sum(r["user"] is None for r in rows) and late == 0
    # ... and every emitted row's input rows in the last step's output, or held by the last step
    # (only the first flush hit can be: the second is held by the first step)
    downstream = emitted - sum(r["n"] for r in stream_last)
    if chain == "group_group":  # a per-micro-batch reader reports what it holds (each flush row holds one hit)
        assert downstream == held.get("last", 0) <= 1, (chain, held)
    elif chain == "swa_sql":  # Spark's aggregation holds the minute its watermark has not passed
        assert 0 <= downstream <= 1
    else:  # a stateless reader holds nothing
        assert downstream == 0


def _pairs_accounted_for(project: Path, batch_first: list[dict], stream_last: list[dict]) -> None:
    """A count join's pairs are batch's (but those the flush hits close: the join holds its last
    rows for the watermark), and every pair is in the swa's windows or held by it."""
    first = _table(project, "first")
    streamed = _multiset(first)
    assert streamed == _multiset(r for r in batch_first if r["user"] != "flush") + _multiset(
        r for r in first if r["user"] == "flush"
    )
    held = _held(project)
    assert len(first) == sum(r["tuple_count"] for r in stream_last) + held.get("last", 0)
    assert len(_table(project, "_tributary/late_rows")) == 0
    # a row without a user meets no row (SQL equality on a null key), in batch as on the stream
    assert len(_table(project, "_tributary/quarantine")) == 0


def _flush_minute(rows: list[dict]) -> str:
    from datetime import datetime

    first_flush = next(r["ts"] for r in rows if r["user"] == "flush")
    return datetime.fromisoformat(first_flush.replace("Z", "+00:00")).replace(second=0)
