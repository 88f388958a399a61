"""`tributary tune`: window parameters from a step's input (Li et al., §5.2–5.3), its pictures,
and `--write` changing only the two values in the analyst's YAML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from framework.errors import BadInput
from framework.spec.rewrite import set_scalars, write_if_unchanged


@pytest.fixture
def trace(cli, project: Path) -> Path:
    code, out, err = cli("generate", "service-trace", "--instances", "1500", "--files", "4")
    assert code == 0, out + err
    return project / "pipelines" / "service_instances.yaml"


def test_tune_fits_the_traces_instances_and_writes_size_and_timeout_keeping_the_rest(spark, cli, project, trace):
    before = trace.read_text().replace("size: 13", "size: 5").replace("timeout: 22s", "timeout: 90s")
    trace.write_text(before)
    code, out, err = cli("tune", "service_instances", "instances", "--json", "--write")
    assert code == 0, out + err
    report = json.loads(out[: out.rindex("}") + 1])
    assert report["instances"] == 1500 and "truth column 'instance_id'" in report["source"]
    # the generator draws degrees from the paper's Erlang(100, 8.7963) and durations from formula (5)
    assert 12 <= report["size"] <= 14 and 20 <= report["timeout_s"] <= 25
    assert list(report["size_cdf"]) == [str(report["size"] + d) for d in (-1, 0, 1)]
    assert report["size_cdf"][str(report["size"] - 1)] < 0.9 <= report["size_cdf"][str(report["size"])]
    assert report["degree_ks"] < 0.05 and report["duration_ks"] < 0.05
    for picture in report["plots"]:
        assert Path(picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    after = trace.read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert [b.strip() for _, b in changed] == [f"size: {report['size']}", f"timeout: {report['timeout_s']}s"]
    code, out, err = cli("validate", "service_instances")
    assert code == 0, out + err


PILOT = """\
name: pilot
sources:
  static_calls:
    format: json
    path: data/samples/service_trace/static
    schema: &calls >-
      head_service STRING, requested_service STRING, client_ip STRING, ts TIMESTAMP,
      instance_ts TIMESTAMP, response_ms INT, bytes BIGINT, instance_id BIGINT, is_primary BOOLEAN
  image_calls: {format: json, path: data/samples/service_trace/images, schema: *calls}
steps:
  calls:
    union: [static_calls, image_calls]
  instances:
    swa:
      input: calls
      key: head+client+time
      columns: {head: head_service, client: client_ip, time: instance_ts}
      size: 13
      timeout: 22s
      event_time: ts
outputs:
  instances: {}
"""


def test_without_truth_a_pilot_pass_stands_for_the_instances(spark, cli, project, trace):
    (project / "pipelines" / "pilot.yaml").write_text(PILOT)
    code, out, err = cli("tune", "pilot", "instances")
    assert code == 0, out + err
    assert "pilot pass" in out and "head+client+time" in out
    assert "size n = 1" in out and "timeout t = 2" in out  # 12-14 and 20-29 on this trace


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["instances", "--alpha", "1.5"], "--alpha = 1.5: a level must lie strictly between 0 and 1"),
        (["instances", "--beta", "0"], "--beta = 0"),
        (["instances", "--sample", "2"], "--sample 2"),
        (["instancs"], "did you mean 'instances'?"),
        (["calls"], "step 'calls' is a union step: tune chooses the size and timeout of an swa step"),
    ],
)
def test_bad_tune_arguments_are_exit_2_before_spark(cli, project, args, expected):
    code, out, err = cli("tune", "service_instances", *args)
    assert code == 2, out + err
    assert expected in err


def test_too_few_instances_to_fit_says_how_many_are_needed(spark, cli, project, trace):
    code, out, err = cli("tune", "service_instances", "instances", "--sample", "0.01")
    assert code == 2, out + err
    assert "at least 30 of each are needed" in err and "--sample" in err


TEXT = """\
steps:
  s:   # the windows
    swa: {input: a, key: [k], event_time: ts, size: 13, timeout: 22s}   # paper: 13 / 22 s
  t:
    swa:
      size: &n 9    # anchored
      timeout: "30s"
  u:
    swa:
      size: *n
"""


def test_set_scalars_replaces_only_the_value_token_in_block_and_flow_style():
    changed = set_scalars(TEXT, "p.yaml", {("steps", "s", "swa", "size"): "12", ("steps", "t", "swa", "timeout"): "25s"})
    assert changed == TEXT.replace("size: 13", "size: 12").replace('timeout: "30s"', "timeout: 25s")
    with pytest.raises(BadInput, match="not a plain value"):
        set_scalars(TEXT, "p.yaml", {("steps", "u", "swa", "size"): "12"})
    with pytest.raises(BadInput, match="not a plain value"):
        set_scalars(TEXT, "p.yaml", {("steps", "t", "swa", "size"): "12"})
    with pytest.raises(BadInput, match="cannot find steps.u.swa.timeout"):
        set_scalars(TEXT, "p.yaml", {("steps", "u", "swa", "timeout"): "1s"})


def test_a_file_changed_since_it_was_read_is_not_written(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(TEXT)
    new = set_scalars(TEXT, "p.yaml", {("steps", "s", "swa", "size"): "12"})
    path.write_text(TEXT + "# an edit made while tune ran\n")
    with pytest.raises(BadInput, match="changed since it was read"):
        write_if_unchanged(path, TEXT, new, "p.yaml")
    assert path.read_text().endswith("# an edit made while tune ran\n")
    write_if_unchanged(path, TEXT + "# an edit made while tune ran\n", new, "p.yaml")
    assert path.read_text() == new and not list(tmp_path.glob(".p.yaml.*"))
