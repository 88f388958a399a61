"""A stream's later micro-batches reuse the code Spark generated for the earlier ones: SWA and
group steps compare with their watermarks as data, not literals (framework.operators.batch_values),
and the session keeps enough compiled classes for a micro-batch that runs many
(framework.engine.session).

Tumbling windows and count-window joins on streams too: besides their watermarks, they number
rows from an offset, and in time buckets whose bounds and offsets are the micro-batch's own
(framework.operators.ordering), all data as well."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest

from tests.conftest import delta_rows, write

SCHEMA = "page STRING, client STRING, ts TIMESTAMP, ms INT"
SOURCE = f"""
sources:
  calls: {{format: json, path: data/calls, schema: "{SCHEMA}", event_time: ts, watermark: 5s, max_files_per_trigger: 1}}
  again: {{format: json, path: data/calls, schema: "{SCHEMA}", event_time: ts, watermark: 5s, max_files_per_trigger: 1}}
"""
STEPS = {
    "swa": "swa: {input: calls, key: head+client, columns: {head: page, client: client}, size: 3, timeout: 20s, "
    "event_time: ts, aggregates: {total_ms: sum(ms)}}",
    "group": "group: {inputs: [calls], key: [page], event_time: ts, close: {count: 3, timeout: 20s}, function: summary}",
    "tumbling": "tumbling: {input: calls, key: head+client, columns: {head: page, client: client}, size: 5, event_time: ts, "
    "aggregates: {total_ms: sum(ms)}}",
    "join": "join: {left: calls, right: again, on: [page], last: {left: 2, right: 2}, tiebreak: [ms]}",
}
UDFS = """
from framework.functions import group_function

@group_function(returns="n bigint, total bigint")
def summary(events, state, args):
    return {"n": len(events), "total": int(events["ms"].sum())}
"""
BASE = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
BATCHES = 6


def _land(project: Path, batches: int = BATCHES) -> None:
    """Files a minute of event time apart, one micro-batch each: every batch moves the
    watermark on, and no row is late or without a key."""
    for i in range(batches):
        rows = [
            {
                "page": f"p{k % 3}",
                "client": f"c{k % 2}",
                "ts": (BASE + datetime.timedelta(seconds=60 * i + k)).isoformat(),
                "ms": k,
            }
            for k in range(12)
        ]
        path = write(project / "data" / "calls" / f"part-{i:02d}.json", "".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def test_a_value_compared_as_data_answers_as_the_literal_and_compiles_no_code_and_runs_no_job_for_the_next_value(spark):
    """`before` / `not_before` give what `<` / `>=` with a literal give, nulls included, and a new
    value reuses the code the first one compiled, with no join (no job to broadcast the value)."""
    from pyspark.sql import functions as F

    from framework.operators.batch_values import before, not_before

    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    rows = spark.range(2000).select(F.when(F.col("id") % 7 != 0, F.col("id") * 1000 - 500_000).alias("micros"))
    per_value = []
    for value in (-3, 0, 123_457, 999_999_937, -500_000):
        before_count = compiled.getCount()
        as_data = rows.agg(F.count_if(before(F.col("micros"), value)), F.count_if(not_before(F.col("micros"), value)))
        plan = as_data._jdf.queryExecution().executedPlan().toString()
        got = as_data.first()
        per_value.append(compiled.getCount() - before_count)
        expected = rows.agg(F.count_if(F.col("micros") < value), F.count_if(F.col("micros") >= value)).first()
        assert tuple(got) == tuple(expected), value
        nulls = rows.where(before(F.col("micros"), value).isNull() & not_before(F.col("micros"), value).isNull()).count()
        assert nulls == rows.where(F.col("micros").isNull()).count()
        assert "Join" not in plan and "Broadcast" not in plan, plan
    assert per_value[0] > 0 and per_value[1:] == [0] * 4, per_value


@pytest.mark.parametrize("kind", sorted(STEPS))
def test_later_micro_batches_compile_no_new_code(spark, cli, project, monkeypatch, kind):
    """Each micro-batch has a new watermark. Were it a literal in the generated code, every batch
    would compile its stages' classes again (Janino) and run them interpreted until the JIT caught
    up; as data, the third batch on compiles nothing (the first has no previous watermark, the
    second is the first with one). Not exactly nothing every time: in one full run of the suite the
    join's third batch compiled 8 classes once ([69, 31, 8, 0, 0, 0]; not reproduced in the same
    order here), as a plan shaped differently for one batch would. What a value in the code does
    is different: every batch compiles again (24 a batch for tumbling windows, 16 for the join)."""
    from framework.io.stream_sink import ExactlyOnceDeltaSink

    write(project / "udfs" / "summary.py", UDFS)
    write(
        project / "pipelines" / "marks.yaml",
        f"name: marks\nmode: streaming\n{SOURCE}steps:\n  out:\n    {STEPS[kind]}\noutputs:\n  out: {{mode: append}}\n",
    )
    _land(project)
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    per_batch: list[int] = []
    commit = ExactlyOnceDeltaSink.__call__

    def counted(sink: ExactlyOnceDeltaSink, batch, batch_id: int) -> None:  # a DataFrame
        before = compiled.getCount()
        commit(sink, batch, batch_id)
        per_batch.append(compiled.getCount() - before)

    monkeypatch.setattr(ExactlyOnceDeltaSink, "__call__", counted)
    code, out, err = cli("run", "marks")
    assert code == 0, out + err
    assert delta_rows(project / "warehouse" / "out")  # the batches emitted rows
    assert len(per_batch) == BATCHES
    assert len([n for n in per_batch[2:] if n]) <= 1, per_batch


JOIN_STREAM = f"""
name: pairs
mode: streaming
sources:
  calls: {{format: json, path: data/calls, schema: "{SCHEMA}", event_time: ts, watermark: 5s, max_files_per_trigger: 1}}
  again: {{format: json, path: data/calls, schema: "{SCHEMA}", event_time: ts, watermark: 5s, max_files_per_trigger: 1}}
steps:
  pairs:
    join: {{left: calls, right: again, on: [page], last: {{left: 2, right: 2}}, tiebreak: [ms]}}
outputs:
  pairs: {{mode: append}}
"""


def test_a_stream_needing_more_than_a_hundred_classes_a_micro_batch_compiles_them_once(spark, cli, project):
    """A count-window join's micro-batch runs more generated classes than Spark keeps by default
    (100), which then evicted each before the next micro-batch needed it: the same stream run
    again over the same files (the same watermarks) compiled every class again, ~110 a batch.
    The session keeps 1,000 (framework.engine.session), and the rerun compiles next to nothing
    (0 to 8 classes seen, against ~122 for a first run in a new session; with Spark's 100 the rerun
    compiled 116-118 again). Since the join's batch values are data, a first run compiles next to
    nothing too when the session ran a join of the same shape before (as this module's tests do)."""
    import shutil

    write(project / "pipelines" / "pairs.yaml", JOIN_STREAM)
    _land(project, batches=3)
    compiled = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    runs = []
    for _ in range(2):
        shutil.rmtree(project / "warehouse", ignore_errors=True)
        before = compiled.getCount()
        code, out, err = cli("run", "pairs")
        assert code == 0, out + err
        runs.append(compiled.getCount() - before)
    assert delta_rows(project / "warehouse" / "pairs")
    assert runs[1] <= 10, runs
