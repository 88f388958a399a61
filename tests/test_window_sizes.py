"""Windows sized per head (`size: auto`, `timeout: auto`): the fold with each key's own n and t,
the history a run learns from and adds to, and streaming equal to the rule for any split."""

from __future__ import annotations

import datetime
import json
import random
import shutil
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.integration.learned_sizes import History, choose
from framework.operators.keyed_windows import CLOSED_BY
from framework.operators.swa.batch import fold_windows
from framework.spec.steps import SwaSpec
from tests.conftest import delta_rows, write
from tests.test_swa import BASE, _closed_by_mark, _land, _row, swa_oracle


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60)), max_size=80),
    sizes=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 25)), min_size=4, max_size=4),
)
def test_the_fold_with_each_keys_own_size_and_timeout_is_the_rule_per_key(rows, sizes):
    rows = sorted(rows)
    if not rows:
        return
    keys = [k for k, _ in rows]
    new_key = np.array([i == 0 or keys[i] != keys[i - 1] for i in range(len(rows))])
    n = np.array([sizes[k][0] for k in keys])
    t = np.array([sizes[k][1] for k in keys])
    unit, closed, start, _ = fold_windows(new_key, np.array([ts for _, ts in rows], dtype=np.int64), n, t)
    got = Counter((key, int(s), CLOSED_BY[c]) for (key, _), s, c in zip(rows, start, closed, strict=True))
    expected: Counter = Counter()
    for key in set(keys):
        for w in swa_oracle([(k, ts, 1) for k, ts in rows if k == key], *sizes[key]):
            expected[(key, w["start"], w["closed_by"])] += w["count"]
    assert got == expected


def _spec(**learn) -> SwaSpec:
    return SwaSpec.model_validate(
        {
            "input": "x",
            "key": "head+client",
            "columns": {"head": "h", "client": "c"},
            "event_time": "ts",
            "size": "auto",
            "timeout": "auto",
            "learn": learn,
        }
    )


def test_sizes_per_head_and_the_global_fit_for_the_rest():
    history = History(
        degrees={"a": Counter({5: 9, 11: 1}), "b": Counter({12: 4}), "rare": Counter({30: 1})},
        durations={"a": Counter({3: 8, 9: 2}), "b": Counter({20: 3, 40: 1}), "rare": Counter({2: 1})},
    )
    sizes = choose(history, _spec(alpha=0.9, beta=0.25, min_instances=3))
    assert sizes.per_head == {"a": (5, 3_000_000), "b": (12, 20_000_000)}  # 90% of a's have ≤ 5; ≤ 25% outlast t
    assert "rare" not in sizes.per_head and sizes.instances == 15
    fixed = SwaSpec.model_validate({**_spec().model_dump(), "timeout": "30s"})
    assert choose(history, fixed).per_head["a"] == (5, 30_000_000)  # a fixed timeout stays


STREAM = """
name: pages
mode: {mode}
sources:
  calls:
    format: json
    path: data/calls
    schema: page STRING, client STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: {delay}s
    max_files_per_trigger: 1
steps:
  windows:
    swa:
      input: calls
      key: head+client
      columns: {{head: page, client: client}}
      size: auto
      timeout: auto
      learn: {{min_instances: 2}}
      event_time: ts
      tiebreak: [ms]
      aggregates: {{total_ms: sum(ms)}}
outputs:
  windows: {{mode: append}}
"""


def _history(project) -> tuple[dict, tuple]:
    rows = delta_rows(project / "warehouse" / "_tributary" / "window_sizes" / "pages" / "windows")
    per_head = {r["head"]: (r["size"], r["timeout_s"]) for r in rows if r["size"] is not None}
    return per_head, (rows[0]["fallback_size"], rows[0]["fallback_timeout_s"])


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 100_000), files=st.integers(1, 4))
def test_streaming_with_learned_sizes_emits_the_rule_per_head_for_any_split(spark, cli, project, seed, files):
    """History first (tune --learn), then a stream over the same tuples in any split into files:
    it emits exactly the windows each key's own n and t close by its final watermark."""
    shutil.rmtree(project / "data" / "calls", ignore_errors=True)
    shutil.rmtree(project / "warehouse", ignore_errors=True)
    rng = random.Random(seed)
    delay = 4
    rows = [
        _row(rng.choice(["p1", "p2", "p3"]), rng.choice(["c1", "c2"]), rng.randint(0, 40), i) for i in range(rng.randint(12, 40))
    ]
    arrival = sorted(rows, key=lambda r: datetime.datetime.fromisoformat(r["ts"]).timestamp() + rng.uniform(0, delay - 0.5))
    cuts = sorted(rng.sample(range(1, len(arrival)), min(files - 1, len(arrival) - 1)))
    _land(project, [arrival[a:b] for a, b in zip([0, *cuts], [*cuts, len(arrival)], strict=True)])
    write(project / "pipelines" / "pages.yaml", STREAM.format(mode="streaming", delay=delay))

    code, out, err = cli("run", "pages")
    assert code == 2 and "tune pages windows --learn" in err, out + err  # a stream does not learn by itself
    code, out, err = cli("tune", "pages", "windows", "--learn")
    assert code == 0, out + err
    code, out, err = cli("run", "pages")
    assert code == 0, out + err

    per_head, (fallback_n, fallback_t) = _history(project)
    seconds = [(r["page"], r["client"], (datetime.datetime.fromisoformat(r["ts"]) - BASE).total_seconds(), r["ms"]) for r in rows]
    mark = max(s for *_, s, _ in seconds) - delay
    expected = []
    for key in {(p, c) for p, c, _, _ in seconds}:
        n, t = per_head.get(key[0], (fallback_n, fallback_t))
        ordered = sorted(((key, s, ms) for p, c, s, ms in seconds if (p, c) == key), key=lambda x: (x[1], x[2]))
        expected += [
            (*w["key"], float(w["start"]), w["count"], w["total"], w["closed_by"]) for w in _closed_by_mark(ordered, n, t, mark)
        ]
    table = project / "warehouse" / "windows"
    streamed = sorted(
        (
            r["page"],
            r["client"],
            r["window_start"].timestamp() - BASE.timestamp(),
            r["tuple_count"],
            r["total_ms"],
            r["closed_by"],
        )
        for r in (delta_rows(table) if table.exists() else [])
    )
    assert streamed == sorted(expected)


def test_a_batch_run_learns_from_its_input_then_adds_each_run_to_the_history(spark, cli, project):
    rows = [
        _row(p, c, s, i)
        for i, (p, c, s) in enumerate([(p, c, s) for p in ("p1", "p2") for c in ("a", "b", "c") for s in (0, 1, 2)])
    ]
    rows += [_row("p2", c, 30 + s, 100 + i) for i, (c, s) in enumerate([(c, s) for c in ("a", "b", "c") for s in (0, 1, 2, 3)])]
    _land(project, [rows])
    write(project / "pipelines" / "pages.yaml", STREAM.format(mode="batch", delay=4).replace("{mode: append}", "{}"))
    code, out, err = cli("run", "pages")
    assert code == 0, out + err
    assert "no history yet: learned from this run's input" in out
    per_head, _ = _history(project)
    # p1: 3 key values of 3 tuples; p2: 3 key values of 3 tuples and, 30 s later, 4 more each
    assert per_head["p1"][0] == 3
    code, out, err = cli("run", "pages")  # identical: it commits nothing, so it adds nothing either
    assert code == 0, out + err
    history = delta_rows(project / "warehouse" / "_tributary" / "window_sizes" / "pages" / "windows")
    assert {r["head"]: r["instances"] for r in history} == {"p1": 3, "p2": 3}
    _land(project, [[], [{**r, "ts": r["ts"].replace("T00:", "T05:")} for r in rows]])  # new input: the same shapes, later
    code, out, err = cli("run", "pages")
    assert code == 0, out + err
    assert "learned from earlier runs" in out
    history = delta_rows(project / "warehouse" / "_tributary" / "window_sizes" / "pages" / "windows")
    assert {r["head"]: r["instances"] for r in history} == {"p1": 6, "p2": 6}  # two runs of 3 key values each
    assert json.loads(next(r for r in history if r["head"] == "p1")["degrees"]) == {"3": 6}
    assert json.loads(next(r for r in history if r["head"] == "p2")["degrees"]) == {"7": 6}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("key: head+client\n      columns: {head: page, client: client}", "key: [page, client]"),
    ],
)
def test_learning_needs_a_head_column(cli, project, change, expected):
    write(project / "pipelines" / "pages.yaml", STREAM.format(mode="batch", delay=4).replace(change, expected))
    code, out, err = cli("validate", "pages")
    assert code == 2
    assert "learn n and t per head: use a strategy with a head" in err + out


def test_learn_on_a_step_with_fixed_sizes_is_exit_2(cli, project):
    write(
        project / "pipelines" / "pages.yaml",
        STREAM.format(mode="batch", delay=4).replace("size: auto", "size: 3").replace("timeout: auto", "timeout: 5s"),
    )
    code, out, err = cli("tune", "pages", "windows", "--learn")
    assert code == 2
    assert "has a fixed size and timeout, so it learns nothing per head" in err
