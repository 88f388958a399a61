"""Elastic stateful steps: a per-micro-batch step's `partitions:` (hash N) may change between runs
of a stream. Spark pins a stream's shuffle partitions in its checkpoint, so its own stateful
operators cannot rescale; these keep their state in files of their own, and the next micro-batch
spreads it over the new N. A stream rescaled mid-way gives an uninterrupted stream's tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import delta_rows, write
from tests.test_stream_chain import _land, _multiset, hit_files

pytestmark = pytest.mark.spark

PIPELINE = """\
name: elastic
mode: streaming
sources:
  hits:
    format: json
    path: landing/hits
    schema: user STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: 10s
  again:
    format: json
    path: landing/hits
    schema: user STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: 10s
steps:
  sessions:
    swa: {{input: hits, key: [user], size: 3, timeout: 30s, event_time: ts, aggregates: {{ms: sum(ms)}}, partitions: {n}}}
  pairs:
    join: {{left: hits, right: again, on: [user], last: {{left: 2, right: 2}}, tiebreak: [ms], partitions: {n}}}
outputs:
  sessions: {{from: sessions, mode: append}}
  pairs: {{from: pairs, mode: append}}
"""
TABLES = ("sessions", "pairs", "_tributary/late_rows", "_tributary/quarantine")


def _stream(cli, project: Path, files: list[list[dict]], partitions: list[int]) -> tuple[dict[str, object], list[dict]]:
    """Land the files in two runs, the i-th with `partitions[i]`; the tables as multisets, and
    per run and step the partitions its micro-batches used (the run log's `micro_batches`), and
    what `tributary capacity` showed after the last run."""
    half = len(files) // 2
    for i, (first, landed) in enumerate(((0, files[:half]), (half, files[half:]))):
        write(project / "pipelines/elastic.yaml", PIPELINE.format(n=partitions[i]))
        _land(project, landed, first=first)
        code, out, err = cli("run", "elastic")
        assert code == 0, out + err
    warehouse = project / "warehouse"
    tables = {t: _multiset(delta_rows(warehouse / t), drop=("run_id", "recorded_at")) for t in TABLES if (warehouse / t).exists()}
    logged = delta_rows(warehouse / "_tributary/events", order_by="ts")
    runs = list(dict.fromkeys(e["run_id"] for e in logged if e["event"] == "micro_batches"))
    spreads = [
        {e["name"]: {b["partitions"] for b in json.loads(e["details"])["batches"]} for e in logged if e["run_id"] == run and e["event"] == "micro_batches"}
        for run in runs
    ]  # fmt: skip
    code, out, err = cli("capacity", "elastic", "--step", "pairs")
    assert code == 0, out + err
    for folder in ("warehouse", "landing"):
        shutil.rmtree(project / folder)
    return tables, [*spreads, {"capacity": " ".join(out.split())}]


def test_a_stream_rescaled_between_runs_gives_an_uninterrupted_streams_tables(spark, cli, project: Path):
    files = hit_files(9, files=4, rows=25)
    steady, _ = _stream(cli, project, files, [2, 2])
    widened, used = _stream(cli, project, files, [2, 6])  # hash 2 -> hash 6 (3N) mid-stream
    assert steady["sessions"] and steady["pairs"]
    assert widened == steady
    # the second run's micro-batches really spread the keys (and the carried state) over 6 tasks
    first, second, shown = used
    assert first == {"sessions": {2}, "pairs": {2}} and second == {"sessions": {6}, "pairs": {6}}
    # `tributary capacity` shows them: one row per output and run of alike batches, local mode: 1 executor
    assert "micro-batches of step 'pairs'" in shown["capacity"] and "│ pairs │ 1 │ 6 │ 1 │" in shown["capacity"]


def test_partitions_on_a_time_join_is_refused_saying_why(cli, project: Path):
    text = PIPELINE.format(n=4).replace("last: {left: 2, right: 2}", "within: {before: 5s, after: 5s}")
    write(project / "pipelines/elastic.yaml", text)
    code, out, err = cli("validate", "elastic")
    assert code == 2
    assert "a time window is Spark's own stream-stream join, whose partitions its checkpoint pins" in " ".join(
        (out + err).split()
    )


ELASTIC = """\
name: widening
mode: streaming
trigger: {{processing_time: 1ms}}
{elastic}
sources:
  hits:
    format: json
    path: landing/hits
    schema: user STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: 10s
    max_files_per_trigger: 1
steps:
  sessions:
    swa: {{input: hits, key: [user], size: 3, timeout: 30s, event_time: ts, aggregates: {{ms: sum(ms)}}, partitions: 2}}
outputs:
  sessions: {{from: sessions, mode: append}}
"""


def test_elastic_widens_a_step_whose_micro_batches_fall_behind_and_its_tables_stay_those_of_a_fixed_run(
    spark, cli, project: Path
):
    """Every micro-batch takes longer than the 1 ms trigger: with `slow_batches: 1, factor: 3` the
    step spreads over 2 partitions, then 6, 18, and 20 (its max_partitions), in one run."""
    files = hit_files(5, files=3, rows=20)
    tables, spread = {}, {}
    for name, elastic in (("fixed", ""), ("elastic", "elastic: {slow_batches: 1, factor: 3, max_partitions: 20}")):
        write(project / "pipelines/widening.yaml", ELASTIC.format(elastic=elastic))
        _land(project, files)
        code, out, err = cli("run", "widening")
        assert code == 0, out + err
        warehouse = project / "warehouse"
        tables[name] = {t: _multiset(delta_rows(warehouse / t), drop=("run_id", "recorded_at")) for t in ("sessions", "_tributary/late_rows") if (warehouse / t).exists()}  # fmt: skip
        logged = delta_rows(warehouse / "_tributary/events", order_by="ts")
        spread[name] = [
            b["partitions"] for e in logged if e["event"] == "micro_batches" for b in json.loads(e["details"])["batches"]
        ]
        spread[f"{name} rescales"] = [json.loads(e["details"]) for e in logged if e["event"] == "rescale"]
        if name == "elastic":
            assert "widened: partitions 2 → 6 after batch 0" in " ".join((out + err).split())
            code, shown, err = cli("capacity", "widening")
            assert code == 0, shown + err
            shown = " ".join(shown.split())
            assert (
                "│ sessions │ 0 │ 2 │ 1 │" in shown
                and "│ sessions │ 1 │ 6 │ 1 │" in shown
                and "│ sessions │ 2 │ 18 │ 1 │" in shown
                and "│ sessions │ 3 │ 20 │ 1 │" in shown
            )
        for folder in ("warehouse", "landing"):
            shutil.rmtree(project / folder)
    assert tables["elastic"] == tables["fixed"] and tables["fixed"]["sessions"]
    assert spread["fixed"] == [2] * 4 and spread["fixed rescales"] == []  # three files and the flush file: four batches
    assert spread["elastic"] == [2, 6, 18, 20]
    assert [(r["batch"], r["from"], r["to"]) for r in spread["elastic rescales"]] == [(0, 2, 6), (1, 6, 18), (2, 18, 20)]


def test_elastic_on_a_batch_pipeline_is_refused_at_its_line(cli, project: Path):
    write(
        project / "pipelines/widening.yaml",
        ELASTIC.format(elastic="elastic: {factor: 3}").replace("mode: streaming", "mode: batch"),
    )
    (project / "landing/hits").mkdir(parents=True)
    code, out, err = cli("validate", "widening")
    assert code == 2
    assert "widening.yaml:4" in err and "elastic: widens the steps of a stream that falls behind" in " ".join(err.split())
