"""Graph selection and pictures, the JSON Schema, and the example pipelines validating fast."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from framework.errors import BadInput
from framework.graph import PipelineGraph
from tests.conftest import GENERATED, REPO, write


@pytest.fixture
def graph() -> PipelineGraph:
    inputs = {"a": ("src",), "b": ("a",), "c": ("a",), "d": ("b", "c"), "e": ("src",)}
    kinds = {"src": "source", **{k: "sql" for k in inputs}}
    return PipelineGraph.build(inputs, kinds, {"d": "d"})


def test_selection(graph):
    assert graph.select(None) == graph.steps
    assert graph.select("b") == ["b"]
    assert set(graph.select("+b")) == {"a", "b"}
    assert set(graph.select("b+")) == {"b", "d"}
    assert set(graph.select("+d")) == {"a", "b", "c", "d"}
    assert set(graph.select("e, c+")) == {"e", "c", "d"}
    order = graph.order()
    assert all(order.index(i) < order.index(n) for n, ins in graph.inputs.items() for i in ins)


def test_unknown_selection(graph):
    with pytest.raises(BadInput, match="did you mean|valid"):
        graph.select("x+")


def test_mermaid_and_svg(graph):
    text = graph.to_mermaid()
    assert text.startswith("flowchart LR") and "a --> b" in text and "b --> d" in text and "d ==> out_d" in text
    svg = ET.fromstring(graph.to_svg())
    labels = {t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")}
    assert {"src", "a", "b", "c", "d", "e"} <= labels
    edges = [p for p in svg.iter("{http://www.w3.org/2000/svg}path") if p.get("marker-end")]
    assert len(edges) == 7  # 6 reads + 1 output


def test_published_json_schema_is_current_and_describes_steps(cli):
    code, out, _ = cli("schema")
    assert code == 0
    schema = json.loads(out)
    assert json.loads((REPO / "tributary.schema.json").read_text()) == schema, "run: tributary schema > tributary.schema.json"
    assert set(schema["properties"]) >= {"name", "sources", "steps", "outputs", "vars", "mode"}
    assert "merge" in json.dumps(schema["$defs"]["Output"])


def test_every_example_pipeline_references_the_schema():
    for path in (REPO / "pipelines").glob("*.yaml"):
        if path.name.endswith(".tests.yaml"):  # a pipeline's tests (docs/testing.md), not a pipeline
            continue
        assert path.read_text().startswith("# yaml-language-server: $schema=../tributary.schema.json"), path


def test_validate_examples_in_a_fresh_interpreter():
    """Every example validates from the command line (the < 1 s target is measured by
    benchmarks/bench_validate.py and bench_loop.py, not here: a busy machine is no failure)."""
    done = subprocess.run([sys.executable, "-m", "framework", "validate"], cwd=REPO, capture_output=True, text=True)
    refused = [line for line in done.stderr.splitlines() if line.startswith("  pipelines/")]
    # data made by `tributary generate` is not in the repository: a missing source path is refused
    missing = [line for line in refused if "path not found" in line and any(g in line for g in GENERATED)]
    assert refused == missing, done.stderr
    examples = [p for p in (REPO / "pipelines").glob("*.yaml") if not p.name.endswith(".tests.yaml")]
    generated = {p.name for p in examples if any(g in p.read_text() for g in GENERATED)}
    assert all(f"✓ pipelines/{p.name}" in done.stdout for p in examples if p.name not in generated), done.stdout


def test_validate_never_imports_pyspark():
    code = "import sys; from framework.cli import main; sys.argv=['tributary','validate']\ntry:\n main()\nexcept SystemExit: pass\nprint('pyspark' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.stdout.strip().endswith("False"), done.stdout + done.stderr


def test_compile_prints_rendered_sql(cli):
    code, out, _ = cli("compile", "service_calls", "--var", "min_calls=7")
    assert code == 0
    assert "having count(*) >= 7" in out and "from `all_calls`" in out and "percentile_approx(response_ms, 0.95)" in out


def test_graph_writes_pictures(cli, project: Path):
    code, out, _ = cli("graph", "service_calls")
    assert code == 0 and "static_calls --> all_calls" in out
    code, out, _ = cli("graph", "service_calls", "--svg", "g.svg", "--html", "g.html")
    assert code == 0
    ET.fromstring((project / "g.svg").read_text())
    assert "<svg" in (project / "g.html").read_text()


def test_compile_prints_a_steps_description_literally(cli, project: Path):
    """A description is the user's text: `[departure - 1h, departure]` is not rich markup."""
    path = project / "pipelines/service_calls.yaml"
    text = path.read_text().replace(
        "description: Both streams as one, with `_source` telling which.",
        'description: "Calls in [departure - 1h, departure] and [bold]x[/bold], as one"',
    )
    path.write_text(text)
    code, out, err = cli("compile", "service_calls")
    assert code == 0, err
    assert "Calls in [departure - 1h, departure] and [bold]x[/bold], as one" in out, out


def test_graph_svg_prints_only_the_files_written(cli, project: Path):
    code, out, err = cli("graph", "service_calls", "--svg", "g.svg")
    assert code == 0, err
    assert out.strip().splitlines() == ["g.svg"], out
    code, out, err = cli("graph", "service_calls", "--svg", "g.svg", "--html", "g.html")
    assert code == 0 and out.strip().splitlines() == ["g.svg", "g.html"], out


def test_help_texts_reflow_as_sentences(cli, monkeypatch):
    """A docstring's hard line breaks are not where its lines break: on a wide terminal a
    command's sentence stays on one line, in the command list and in its own help."""
    monkeypatch.setenv("COLUMNS", "300")
    code, out, _ = cli("--help")
    assert code == 0
    assert "what each reads and how it runs, what is computed once" in out, out
    assert "whenever a file under pipelines/, sql/ or udfs/ (or its data) changes" in out, out
    for command in ("run", "plan", "scheduler", "backfill", "runs"):
        code, out, _ = cli(command, "--help")
        assert code == 0
        lines = [line.strip(" │") for line in out.splitlines()]
        from framework.cli.app import all_commands

        callback = all_commands()[command].callback
        import inspect

        for paragraph in inspect.getdoc(callback).split("\n\n"):
            joined = " ".join(paragraph.split())
            assert any(joined in line for line in lines), (command, joined, out)


def test_a_misspelt_command_is_answered_with_the_closest_names(cli):
    """Command modules load lazily, yet a typo is still matched against every command."""
    code, out, err = cli("valdate")
    assert code == 2
    assert "Did you mean 'validate'" in out + err


def test_validate_plan_and_graph_take_the_flags_run_takes(cli, project):
    """One project context: --var, --select and --interval mean the same in every command."""
    write(
        project / "pipelines" / "flagged.yaml",
        "name: flagged\nvars: {min_calls: 1}\nsources:\n  calls: {format: json, path: data/samples/service_calls/images}\n"
        "steps:\n  busy:\n    sql: select * from {{ source('calls') }} where {{ var('min_calls') }} > 0\n"
        "outputs:\n  busy: {}\n",
    )
    for command in ("validate", "compile", "plan", "graph"):
        code, out, err = cli(command, "pipelines/flagged.yaml", "--var", "min_calls=3", "--select", "busy")
        assert code == 0, (command, out, err)
    code, out, err = cli("compile", "pipelines/flagged.yaml", "--var", "min_calls=3", "--interval", "2026-11-01/2026-11-02")
    assert code == 0 and "where 3 > 0" in out and "interval 2026-11-01" in out, out + err
    code, out, err = cli("validate", "pipelines/flagged.yaml", "--var", "nope=1")
    assert code == 2 and "nope" in out + err
    code, out, err = cli("validate", "pipelines/flagged.yaml", "--select", "nosuchstep")
    assert code == 2 and "nosuchstep" in out + err


def test_a_picture_goes_to_a_file_in_a_folder_that_exists(cli, project):
    """`graph --svg` into a folder that does not exist, or onto a folder, ended in a
    FileNotFoundError or IsADirectoryError (exit 1); it is bad input naming the option."""
    for target, said in (
        (project / "nowhere" / "g.svg", "is in a folder that does not exist"),
        (project / "sql", "is a folder"),
        (Path(""), "is not a file name"),
    ):
        code, out, err = cli("graph", "service_calls", "--svg", str(target))
        assert code == 2 and f"--svg {target} {said}" in err and "Traceback" not in out + err, out + err
    assert not (project / "nowhere").exists()
    code, out, err = cli("graph", "service_calls", "--svg", str(project / "g.svg"))
    assert code == 0 and (project / "g.svg").read_text().lstrip().startswith("<"), out + err


def test_no_command_offers_to_install_shell_completion(cli):
    """Commands of a module with one command (report, test) offered --install-completion, which
    rewrites ~/.bashrc."""
    for command in ("report", "test", "generate", "engine", "cluster"):
        code, out, _ = cli(command, "--help")
        assert code == 0 and "install-completion" not in out, (command, out)
