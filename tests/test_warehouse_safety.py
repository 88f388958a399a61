"""The warehouse protects itself: no pipeline writes into its own folder (run log, quarantine,
checkpoints), outside it without the profile's leave, over what it reads, or twice into a table.
All found by `validate`, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write

PIPELINE = """\
name: guarded
sources:
  calls:
    format: json
    path: data/samples/service_calls/static
    schema: ts TIMESTAMP, head_service STRING, response_ms INT
steps:
  stats:
    sql: select head_service, count(*) as calls from {{{{ source('calls') }}}} group by head_service
outputs:
  stats:
{output}
"""


def _validate(cli, project: Path, output: str, extra: str = "") -> tuple[int, str]:
    write(project / "pipelines" / "guarded.yaml", PIPELINE.format(output=output) + extra)
    code, out, err = cli("validate", "pipelines/guarded.yaml")
    return code, out + err


@pytest.mark.parametrize(
    "output",
    [
        "    name: _tributary.events",
        "    name: _tributary.quarantine",
        "    path: warehouse/_tributary/events",
        "    path: warehouse",
    ],
)
def test_the_warehouse_own_tables_are_reserved(cli, project, output):
    code, text = _validate(cli, project, output)
    assert code == 2 and "pipelines/guarded.yaml:12:" in text
    assert "over the warehouse's own folder _tributary/" in text and "reserved" in text


@pytest.mark.parametrize("path", ["../outside", "/tmp/tributary-elsewhere", "''", ".", "data/samples/service_calls"])
def test_an_output_path_outside_the_warehouse_needs_the_profiles_leave(cli, project, path):
    code, text = _validate(cli, project, f"    path: {path}")
    assert code == 2 and "pipelines/guarded.yaml:12:" in text
    # the project root holds the warehouse; a source folder is read by the pipeline
    assert any(s in text for s in ("is outside the warehouse", "which source 'calls' reads", "over the warehouse's own folder"))


def test_the_profile_may_allow_external_roots(cli, project, tmp_path_factory):
    shared = tmp_path_factory.mktemp("shared")
    with (project / "configs" / "local.yaml").open("a") as profile:
        profile.write(f"external_roots: [{shared}]\n")
    code, text = _validate(cli, project, f"    path: {shared}/stats")
    assert code == 0, text
    code, text = _validate(cli, project, f"    path: {shared.parent}/elsewhere")
    assert code == 2 and "is outside the warehouse" in text


def test_an_output_may_not_overwrite_what_the_pipeline_reads_unless_the_source_says_so(cli, project):
    plain = PIPELINE.format(output="    mode: overwrite")
    reading_itself = plain.replace("sources:\n", "sources:\n  previous: {format: delta, table: stats}\n")
    write(project / "pipelines" / "guarded.yaml", reading_itself)
    code, out, err = cli("validate", "pipelines/guarded.yaml")
    assert code == 2 and "output 'stats' would write" in err and "which source 'previous' reads" in err
    assert "own_output: true" in err
    on_purpose = reading_itself.replace("table: stats}", "table: stats, own_output: true}")
    write(project / "pipelines" / "guarded.yaml", on_purpose)
    code, out, err = cli("validate", "pipelines/guarded.yaml")
    assert code == 0, err


def test_two_outputs_may_not_write_one_table(cli, project):
    code, text = _validate(cli, project, "    mode: overwrite", "  again:\n    from: stats\n    name: stats\n")
    assert code == 2 and "outputs 'stats' and 'again' write the same table" in text
