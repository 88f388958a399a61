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


# Symbolic links: a folder inside the warehouse (or the scratch warehouse) that is a link to
# elsewhere would take a write out of it. Where an output, Tributary's own folder or a try writes
# is checked with the links resolved, before anything runs (nothing is written elsewhere).


def _link(link: Path, target: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    target.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)
    return target


def test_an_output_name_through_a_symbolic_link_out_of_the_warehouse_is_refused(cli, project, tmp_path_factory):
    elsewhere = _link(project / "warehouse" / "evil", tmp_path_factory.mktemp("elsewhere"))
    for command in ("validate", "plan", "run"):
        code, text = _run(cli, project, "    name: evil", command)
        assert code == 2, (command, text)
        assert "output 'stats'" in text and str(elsewhere) in text and "symbolic link" in text and "hint:" in text
        assert "Traceback" not in text
        if command == "validate":  # said at the output's name: line
            line = PIPELINE.format(output="    name: evil").splitlines().index("    name: evil") + 1
            assert f"pipelines/guarded.yaml:{line}" in text, text
    assert list(elsewhere.iterdir()) == []  # nothing written there
    code, out, err = cli("show", "stats")  # nor read from there as the output
    assert code == 2 and "symbolic link" in err


def test_a_link_that_stays_inside_the_warehouse_is_allowed(cli, project):
    (project / "warehouse" / "real").mkdir(parents=True)
    (project / "warehouse" / "alias").symlink_to(project / "warehouse" / "real", target_is_directory=True)
    code, text = _validate(cli, project, "    name: alias")
    assert code == 0, text


def test_a_link_into_the_warehouse_own_folder_is_refused(cli, project):
    (project / "warehouse" / "_tributary" / "events").mkdir(parents=True)
    (project / "warehouse" / "sneaky").symlink_to(project / "warehouse" / "_tributary" / "events")
    code, text = _validate(cli, project, "    name: sneaky")
    assert code == 2 and "over the warehouse's own folder _tributary/" in text


@pytest.mark.parametrize("linked", ["_tributary", "_tributary/quarantine", "_tributary/staging", "stats"])
def test_the_warehouse_own_folders_and_an_output_table_may_not_lead_out_of_it(cli, project, tmp_path_factory, linked):
    elsewhere = _link(project / "warehouse" / linked, tmp_path_factory.mktemp("elsewhere"))
    code, text = _run(cli, project, "    mode: overwrite", "run")
    assert code == 2, text
    assert str(elsewhere) in text and "symbolic link" in text and "hint:" in text
    assert list(elsewhere.iterdir()) == []


def test_a_link_inside_an_output_table_leading_out_is_refused(cli, project, tmp_path_factory):
    (project / "warehouse" / "stats").mkdir(parents=True)
    elsewhere = _link(project / "warehouse" / "stats" / "_delta_log", tmp_path_factory.mktemp("elsewhere"))
    code, text = _run(cli, project, "    mode: overwrite", "run")
    assert code == 2 and str(elsewhere) in text and "output 'stats'" in text, text
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("linked", [".tributary", ".tributary/scratch", ".tributary/scratch/stats"])
def test_a_try_does_not_follow_a_link_out_of_the_scratch_warehouse(cli, project, tmp_path_factory, linked):
    elsewhere = _link(project / linked, tmp_path_factory.mktemp("elsewhere"))
    code, text = _run(cli, project, "    mode: overwrite", "run", "--limit", "5")
    assert code == 2, text
    assert "symbolic link" in text and "hint:" in text
    assert list(elsewhere.iterdir()) == []


def _run(cli, project: Path, output: str, command: str, *args: str) -> tuple[int, str]:
    write(project / "pipelines" / "guarded.yaml", PIPELINE.format(output=output))
    code, out, err = cli(command, "pipelines/guarded.yaml", *args)
    return code, out + err
