"""The state of swa and tumbling steps: the queueing model's prediction (Li et al., §6.3–6.4) and
what a run held, recorded per run (batch) and per micro-batch (streaming), shown by the run
summary, `tributary runs`, `tributary capacity` and the HTML report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from framework.integration.capacity import InputLoad, observe, predict, sweep
from framework.operators.registry import StateModel
from tests.conftest import delta_rows


def test_sweep_counts_half_open_intervals_and_means_over_time():
    start = np.array([0, 0, 5, 10, 7])
    end = np.array([10, 5, 10, 20, 7])  # the last is empty: never open
    assert sweep(start, end, np.ones(5)) == (2.0, pytest.approx((10 * 2 + 10 * 1) / 20))
    assert sweep(start, end, np.array([1, 2, 3, 4, 9]))[0] == 4.0  # [5, 10): 1 + 3
    assert sweep(start, end, np.ones(5), within=(10, 20)) == (2.0, 1.0)


def _windows(rows: list[tuple[int, int, int, str]]) -> pa.Table:
    def ts(seconds: list[int]) -> pa.Array:
        return pa.array([s * 1_000_000 for s in seconds], pa.timestamp("us", tz="UTC"))

    start, end, count, closed = zip(*rows, strict=True)
    return pa.table(
        {"window_start": ts(list(start)), "window_end": ts(list(end)), "tuple_count": list(count), "closed_by": list(closed)}
    )


def test_a_window_is_open_until_its_nth_tuple_or_its_timeout():
    # n = 3, t = 10: the first closes at its 3rd tuple (s = 4), the others at s + 10
    windows = _windows([(0, 4, 3, "count"), (2, 5, 2, "timeout"), (30, 31, 2, "end_of_input")])
    figures = observe(StateModel.OPEN_WINDOWS, 3, 10.0, windows, bytes_per_tuple=100.0)
    assert figures["open_windows_max"] == 2 and figures["tuples_held_max"] == 5
    assert figures["lifetime_s"] == pytest.approx((4 + 10 + 10) / 3)
    assert figures["state_bytes_max"] == 500


def test_a_streams_observed_open_windows_count_every_tuple_it_holds(tmp_path):
    """The tuples a streaming SWA step holds at a batch's end are its windows not yet emitted, also
    those of tuples the watermark has not reached: the observed open windows count them all, so a
    stream holding tuples never reports 0 open windows (an error of ∞) against its prediction."""
    from types import SimpleNamespace

    import pyarrow.parquet as pq

    from framework.engine.state_figures import streaming_figures
    from framework.operators.keyed_windows import MICROS
    from framework.operators.swa.stream import HELD, SwaStream
    from framework.spec.steps import SwaSpec

    spec = SwaSpec.model_validate({"input": "calls", "key": "head", "columns": {"head": "page"}, "size": 3,
                                   "timeout": "10s", "event_time": "ts"})  # fmt: skip
    mark = 100 * 1_000_000
    # all at or after the mark: page a's 5 tuples are two windows (3 by count, then 2), b's 1 is one
    seconds = {"a": [100, 101, 102, 103, 104], "b": [105]}
    rows = [(page, s * 1_000_000) for page, times in seconds.items() for s in times]
    (tmp_path / HELD).mkdir()
    pq.write_table(pa.table({"page": [p for p, _ in rows], MICROS: [m for _, m in rows]}), tmp_path / HELD / "part-0.parquet")
    operator = SwaStream("views", SimpleNamespace(swa=spec), str(tmp_path / "state"))
    assert operator._measure(str(tmp_path), len(rows), ["page"], mark) == 3
    batches = [{"batch": 0, "windows_closed": 4, "lifetime_sum_s": 40.0, "advance_s": 10.0, "open_windows": 3, "state_rows": 6}]
    figures = streaming_figures("views", "swa", spec, batches)
    assert figures.observed["open_windows_mean"] == 3 and figures.observed["tuples_held_mean"] == 6


def test_the_models_formulas():
    load = InputLoad(
        tuples=10_000, span_s=100, keys=1_000, lifetime_sum_s=20_000, crowded_keys=0, steady_s=90, bytes_per_tuple=135
    )
    swa, notes = predict(StateModel.OPEN_WINDOWS, 13, load)
    assert swa["instances_per_s"] == pytest.approx(10.0)  # 90% of the keys in 90 s
    assert swa["open_windows"] == 201  # ⌊10 × 20⌋ + 1, formula (12)
    assert swa["state_bytes"] == 201 * 13 * 135  # formula (13)
    assert notes == []
    tumbling, _ = predict(StateModel.COUNT_QUEUE, 8000, load)
    assert tumbling["queue_length"] == pytest.approx(0.4994 * 8000 - 0.4526)  # formula (11)
    assert tumbling["residence_s"] == pytest.approx(tumbling["queue_length"] / 100)  # Little's law
    crowded = InputLoad(10_000, 100, 10, 200, crowded_keys=3, steady_s=90, bytes_per_tuple=1)
    assert "3 key value(s)" in predict(StateModel.OPEN_WINDOWS, 13, crowded)[1][0]


def test_a_batch_run_records_predicted_and_observed_state_and_every_view_shows_it(spark, cli, project):
    """On the example's trace (15,000 instances over ~150 s, windows living ~20 s)."""
    code, out, err = cli("generate", "service-trace", "--instances", "15000", "--files", "8")
    assert code == 0, out + err
    pipeline = project / "pipelines" / "service_instances.yaml"
    pipeline.write_text(pipeline.read_text().replace("size: 32000", "size: 3000"))
    code, out, err = cli("run", "service_instances")
    assert code == 0, out + err
    assert "state of swa step 'instances' (n = 13, t = 22 s): predicted and" in out

    events = [e for e in delta_rows(project / "warehouse" / "_tributary" / "events") if e["event"] == "capacity"]
    figures = {e["name"]: json.loads(e["details"]) for e in events}
    swa = figures["instances"]
    # the windows the run wrote are the ones observed
    windows = delta_rows(project / "warehouse" / "instances")
    assert swa["observed"]["windows"] == len(windows)
    # the model (one window per key value) is near what the run held: the paper reports 5.7-12%
    predicted, observed = swa["predicted"]["open_windows"], swa["observed"]["open_windows_mean"]
    assert abs(predicted - observed) / observed < 0.2
    assert swa["notes"] == []
    assert figures["instances_tumbling"]["predicted"]["queue_length"] == pytest.approx(0.4994 * 3000 - 0.4526)

    code, out, err = cli("runs")
    assert code == 0 and "instances: " in out and "windows (" in out
    code, out, err = cli("report", "service_instances")
    assert code == 0, out + err
    page = Path(out.strip()).read_text()
    assert "State: predicted and observed" in page and "open windows c = ⌊λ/μ⌋ + 1 (mean)" in page
    code, out, err = cli("capacity", "service_instances", "--step", "instances")
    assert code == 0, out + err
    assert "observed: the last run of this step in the run log" in out


STREAM = """\
name: stream
mode: streaming
sources:
  calls:
    format: json
    path: data/samples/service_trace/static
    schema: >-
      head_service STRING, requested_service STRING, client_ip STRING, ts TIMESTAMP,
      instance_ts TIMESTAMP, response_ms INT, bytes BIGINT, instance_id BIGINT, is_primary BOOLEAN
    event_time: ts
    watermark: 5s
    max_files_per_trigger: 1
steps:
  instances:
    swa:
      input: calls
      key: head+client+time
      columns: {head: head_service, client: client_ip, time: instance_ts}
      size: 13
      timeout: 22s
      event_time: ts
outputs:
  instances: {mode: append}
"""


def test_a_streaming_run_records_the_model_per_micro_batch(spark, cli, project):
    code, out, err = cli("generate", "service-trace", "--instances", "3000", "--files", "6")
    assert code == 0, out + err
    (project / "pipelines" / "stream.yaml").write_text(STREAM)
    code, out, err = cli("run", "stream")
    assert code == 0, out + err
    assert "state of swa step 'instances' (n = 13, t = 22 s, 6 micro-batches)" in out
    events = [e for e in delta_rows(project / "warehouse" / "_tributary" / "events") if e["event"] == "capacity"]
    figures = json.loads(events[0]["details"])
    assert [b["batch"] for b in figures["batches"]] == list(range(6))
    emitted = sum(b["windows_closed"] for b in figures["batches"])
    assert emitted == len(delta_rows(project / "warehouse" / "instances"))
    assert max(b["state_rows"] for b in figures["batches"]) == figures["observed"]["tuples_held_max"] > 0
    assert figures["predicted"]["open_windows"] > 0
    assert "never reach the steady state" not in " ".join(figures["notes"])
    # an availableNow run ends with windows the watermark has not closed: said, and logged
    held = [e for e in delta_rows(project / "warehouse" / "_tributary" / "events") if e["event"] == "held"]
    assert held[0]["rows"] == figures["batches"][-1]["state_rows"] > 0
    assert f"step 'instances' still holds {held[0]['rows']:,} tuple" in out
    assert "the watermark is at 2026-11-02T08:" in out
    code, out, err = cli("report", "stream")
    assert code == 0, out + err
    assert "<svg" in Path(out.strip()).read_text().split("State: predicted and observed")[1]


def test_a_trace_shorter_than_a_few_window_lifetimes_is_flagged():
    short = InputLoad(
        tuples=17_000, span_s=40, keys=1_500, lifetime_sum_s=1_500 * 20, crowded_keys=0, steady_s=13.5, bytes_per_tuple=90
    )
    _, notes = predict(StateModel.OPEN_WINDOWS, 13, short)
    assert notes == [
        "the input's windows open over 13.5 s, less than 3 mean window lifetimes (20.0 s): the windows never reach "
        "the steady state the model describes, so it overestimates"
    ]
