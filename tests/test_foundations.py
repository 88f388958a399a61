"""The foundations every step kind and run mode builds on: the step-kind registry as the only way
in, the run plan as data, one-way layers, and light commands that start no JVM."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import Field

from tests.conftest import empty_generated_folders, write

REPO = Path(__file__).resolve().parents[1]


def test_every_spec_kind_has_one_registry_entry_and_every_entry_a_spec_kind():
    from framework.operators.registry import kinds
    from framework.spec.steps import STEP_KINDS

    assert set(kinds()) == set(STEP_KINDS)
    for name, kind in kinds().items():
        assert kind.spec is STEP_KINDS[name] and kind.name == name


def test_a_kind_registered_in_one_place_but_not_the_other_stops_the_registry():
    from typing import ClassVar

    from framework.operators import registry
    from framework.spec.steps import STEP_KINDS, StepSpec

    class EchoStep(StepSpec):
        kind: ClassVar[str] = "echo"
        echo: str = Field(min_length=1)

    class OtherSql(StepSpec):
        kind: ClassVar[str] = "sql"

    STEP_KINDS["echo"] = EchoStep
    try:
        with pytest.raises(RuntimeError, match=r"no operator for \['echo'\]"):
            registry.check_complete()
    finally:
        del STEP_KINDS["echo"]
    registry.check_complete()
    with pytest.raises(RuntimeError, match="OtherSql is not the spec class"):
        registry.register(registry.StepKind(OtherSql, build=lambda context: context.inputs["x"]))
    assert registry.kinds()["sql"].spec is STEP_KINDS["sql"]


def _own_kind(path: Path) -> str | None:
    """The kind whose own code `path` is: framework/operators/<kind>.py or framework/operators/<kind>/...
    (None elsewhere)."""
    parts = path.relative_to(REPO / "framework").parts
    if len(parts) < 2 or parts[0] != "operators":
        return None
    return parts[1].removesuffix(".py")


def _kind_questions(at: str, own: str | None, text: str) -> list[str]:
    """Where `text` (the module at `at`, the code of kind `own` or None) asks which kind a step is."""
    from framework.spec.steps import STEP_KINDS

    step_classes = {cls.__name__: name for name, cls in STEP_KINDS.items()}
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if names & set(step_classes):
                found.append(f"{at}:{node.lineno}: isinstance of a step class")
        elif isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
            texts = {c.value for c in (node.left, *node.comparators) if isinstance(c, ast.Constant)}
            if own is None and texts & set(STEP_KINDS):
                found.append(f"{at}:{node.lineno}: compares with a kind's name {sorted(texts & set(STEP_KINDS))}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr") and len(node.args) >= 2:
            name = node.args[1]
            if own is None and isinstance(name, ast.Constant) and name.value in STEP_KINDS:
                found.append(f"{at}:{node.lineno}: {getattr(node.func, 'id', '')}(..., {name.value!r})")
        elif isinstance(node, ast.ImportFrom) and node.module == "framework.spec.steps":
            found += [f"{at}:{node.lineno}: imports {a.name}" for a in node.names if step_classes.get(a.name, own) != own]
    return found


def test_no_module_outside_the_registry_asks_which_kind_a_step_is():
    """What a kind can do is its registry entry. Outside the registry, the spec and the kind's own
    package, `isinstance(step, SwaStep)`, `kind_of(s).name == "swa"`, `getattr(step, "swa")` or
    importing `SwaStep` would be a second place to change for every new kind."""
    found = []
    for path in (REPO / "framework").rglob("*.py"):
        at = path.relative_to(REPO)
        if at.parts[1] != "spec" and at.as_posix() != "framework/operators/registry.py":
            found += _kind_questions(at.as_posix(), _own_kind(path), path.read_text())
    assert found == []


def test_the_guard_finds_each_way_of_asking_for_a_kind():
    source = (
        "from framework.spec.steps import AUTO, SwaStep\n"
        "a = kind_of(s).name == 'swa'\n"
        "b = getattr(step, 'join', None)\n"
        "c = isinstance(step, SwaStep)\n"
        "d = s.kind != 'tumbling'\n"
        "e = event.name == 'run_end'\n"
    )
    found = _kind_questions("framework/cli/tune.py", None, source)
    assert sorted(f.split(": ", 1)[1] for f in found) == sorted(
        [
            "imports SwaStep",
            "compares with a kind's name ['swa']",
            "getattr(..., 'join')",
            "isinstance of a step class",
            "compares with a kind's name ['tumbling']",
        ]
    )
    assert _kind_questions("framework/operators/swa/stream.py", "swa", source) == [
        "framework/operators/swa/stream.py:4: isinstance of a step class"
    ]
    assert _own_kind(REPO / "framework" / "operators" / "swa" / "stream.py") == "swa"
    assert _own_kind(REPO / "framework" / "cli" / "tune.py") is None


def _plan(project: Path, name: str, full_refresh: bool = False, select: str | None = None):  # a RunPlan
    from framework.project_context import ProjectContext

    return ProjectContext.load(name, select=select, start=project).plan(full_refresh)


def test_the_plan_says_what_is_shared_what_each_output_writes_and_where(project):
    from framework.plan import RunMode

    plan = _plan(project, "service_calls")
    assert plan.mode is RunMode.BATCH
    position = {node: i for i, node in enumerate(plan.order)}
    assert set(position) == {"static_calls", "image_calls", "all_calls", "service_stats", "daily_head_stats"}
    assert max(position["static_calls"], position["image_calls"]) < position["all_calls"]
    assert position["all_calls"] < min(position["service_stats"], position["daily_head_stats"])
    assert plan.step("all_calls").shared and plan.step("all_calls").readers == 2
    assert not plan.step("service_stats").shared
    modes = {o.name: o.mode for o in plan.outputs}
    assert modes == {"service_stats": "overwrite", "daily_head_stats": "merge"}
    assert plan.output("daily_head_stats").keys == ("day", "head_service")
    assert plan.output("service_stats").table == str(project / "warehouse" / "service_stats")
    assert plan.upstream_sources("daily_head_stats") == ("image_calls", "static_calls")
    # a batch full refresh rewrites every output
    assert {o.mode for o in _plan(project, "service_calls", full_refresh=True).outputs} == {"overwrite"}
    # --select: the selected step, the steps it needs, and only its outputs
    selected = _plan(project, "service_calls", select="service_stats")
    assert [s.name for s in selected.steps] == ["all_calls", "service_stats"]
    assert [s.selected for s in selected.steps] == [False, True]
    assert [o.name for o in selected.outputs] == ["service_stats"]


def test_the_plan_names_who_splits_off_the_rows_expectations_refuse(project):
    """A step whose only reader is one output without checks of its own: that output's write
    splits the refused rows off. An output with its own drop expectations splits its own."""
    from framework.plan import CheckScope, QuarantineSplit

    write(
        project / "pipelines" / "checked.yaml",
        """
name: checked
sources:
  calls: {format: json, path: data/samples/service_calls/static, schema: "ts TIMESTAMP, client_ip STRING, head_service STRING, requested_service STRING, response_ms INT"}
steps:
  kept:
    sql: select * from {{ source('calls') }}
    expectations:
      - expect_column_values_to_not_be_null: {column: head_service}
        severity: drop
  shared:
    sql: select * from {{ source('calls') }}
    expectations:
      - expect_column_values_to_not_be_null: {column: head_service}
        severity: drop
  counted:
    sql: select count(*) as n from {{ ref('shared') }}
outputs:
  kept: {mode: overwrite}
  shared:
    mode: overwrite
    expectations:
      - expect_column_values_to_be_between: {column: response_ms, min_value: 0}
        severity: drop
  counted: {mode: overwrite}
""",
    )
    plan = _plan(project, "checked")
    assert plan.step("kept").split_by == "kept"
    assert plan.output("kept").split == QuarantineSplit("kept", CheckScope.STEP)
    assert plan.step("shared").split_by is None  # read by a step too: its refused rows are read again
    assert plan.output("shared").split == QuarantineSplit("shared", CheckScope.OUTPUT)
    assert plan.output("counted").split is None


def test_a_streaming_plan_keeps_each_outputs_mode_and_says_how_each_step_runs(project):
    from framework.operators.registry import Streaming

    plan = _plan(project, "contact_join", full_refresh=True)
    assert plan.streaming and [o.mode for o in plan.outputs] == ["append"]
    step = plan.step("contacts")
    assert step.kind.streaming(step.spec) is Streaming.NATIVE  # a time window: Spark's stream-stream join


def test_a_per_micro_batch_step_feeds_other_steps_on_a_stream_and_plan_shows_the_chain(cli, project):
    """A step that runs per micro-batch may feed other steps on a stream (issue 34: it used to be
    refused): validate accepts it and `plan` says how the chain runs and the watermark its reader
    sees, without a JVM (the tumbling baseline runs per micro-batch too)."""
    head = """
name: {name}
mode: streaming
sources:
  calls: {{format: json, path: data/samples/service_calls/static, event_time: ts, watermark: 10s,
          schema: "ts TIMESTAMP, client_ip STRING, head_service STRING, requested_service STRING, response_ms INT"}}
"""
    write(
        project / "pipelines" / "tumbling_stream.yaml",
        head.format(name="tumbling_stream")
        + """steps:
  windows:
    tumbling: {input: calls, key: [head_service], size: 100, event_time: ts}
outputs:
  windows: {mode: append}
""",
    )
    write(
        project / "pipelines" / "swa_read.yaml",
        head.format(name="swa_read")
        + """steps:
  windows:
    swa: {input: calls, key: [head_service], size: 5, timeout: 10s, event_time: ts}
  counted:
    sql: select head_service, tuple_count from {{ ref('windows') }}
outputs:
  counted: {mode: append}
""",
    )
    code, out, err = cli("validate", "pipelines/tumbling_stream.yaml")
    assert code == 0, out + err
    code, out, err = cli("validate", "pipelines/swa_read.yaml")
    assert code == 0, out + err
    code, out, err = cli("plan", "pipelines/swa_read.yaml")
    assert code == 0, out + err
    assert "in a query of its own" in " ".join(out.replace("│", " ").split())
    from rich.console import Console

    from framework.display import plan_tables

    console = Console(width=1000, record=True)
    for table in plan_tables(_plan(project, "swa_read")):
        console.print(table)
    text = console.export_text()
    assert "_tributary/chains/swa_read/windows" in text
    assert "watermark window_start − 20s (inputs' delay 10s + emission lag 10s)" in text
    assert "reads windows from its chain table, after that query in an available-now run" in text


def test_plan_shows_the_run_without_starting_spark(cli):
    code, out, err = cli("plan", "service_calls")
    assert code == 0, err
    assert "computed once for 2 readers" in out and "merge" in out and "day head_service, by day" in out


def test_plan_shows_the_projects_files_and_tables_from_its_folder(cli, project):
    """A long absolute path would be cut at its end (the file name) in a terminal's table."""
    code, out, err = cli("plan", "service_calls")
    assert code == 0, err
    assert "data/samples/service_calls/static" in out and "warehouse/daily_head_stats" in out, out
    assert str(project) not in out.replace("\n", ""), out


@pytest.mark.parametrize(
    "command",
    [
        ["validate"],
        ["validate", "--explain", "instances"],
        ["compile", "service_instances"],
        ["plan", "service_instances"],
        ["engine", "status"],
    ],
)
def test_light_commands_import_neither_spark_nor_great_expectations(project, command):
    empty_generated_folders(project)
    code = (
        "import sys\nfrom framework.cli import main\n"
        f"sys.argv = ['tributary', *{command!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = [m for m in ('pyspark', 'great_expectations', 'pandas', 'pyarrow') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["show", "service_stats"],
        ["history", "service_stats"],
        ["show", "service_stats", "--where", "calls > 1"],
        ["query", "select count(*) from service_stats"],
    ],
)
def test_looking_at_tables_imports_neither_spark_nor_great_expectations(project, command):
    """show, history and query read Delta with delta-rs (and DuckDB): no JVM; plain `show` not even pandas."""
    import pyarrow as pa
    from deltalake import write_deltalake

    first = pa.array([1_790_000_000_000_000], pa.timestamp("us", tz="UTC"))
    rows = pa.table({"requested_service": ["/a"], "calls": [3], "first_call": first})
    write_deltalake(str(project / "warehouse" / "service_stats"), rows, partition_by=["requested_service"])
    code = (
        "import sys\nfrom framework.cli import main\n"
        f"sys.argv = ['tributary', *{command!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = [m for m in ('pyspark', 'great_expectations') if m in sys.modules]\n"
        "print('HEAVY', heavy, 'pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout
    if command == ["show", "service_stats"]:
        assert "HEAVY [] False" in done.stdout  # pandas alone costs ~0.3 s of a show's second


def _docs_gen():
    import importlib.util

    spec = importlib.util.spec_from_file_location("tributary_docs_gen", REPO / "docs" / "gen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_tables_made_from_setup_cfg_and_the_benchmark_figures_are_current():
    gen = _docs_gen()
    assert gen.stale_pages() == [], "run: python docs/gen.py"
    layers = gen.importlinter_layers()
    assert layers[0] == ["cli"] and ["errors", "observations", "jvm", "cluster_auth"] in layers
    assert layers[-1] == ["private_folder"]
    table = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for package in (p for layer in layers for p in layer):
        assert f"`{package}`" in table
    with pytest.raises(ValueError, match="framework_new"):  # a layer setup.cfg gains must be described
        gen.layer_table([*layers, ["framework_new"]])


def test_the_cli_reference_has_every_command_and_option():
    import typer

    from framework.cli import app

    page = _docs_gen().cli_reference()
    root = typer.main.get_command(app)
    for name, command in root.commands.items():
        assert (f"`tributary {name}`" in page) != command.hidden
        for sub, subcommand in getattr(command, "commands", {}).items():
            assert (f"`tributary {name} {sub}`" in page) != subcommand.hidden  # `engine serve` is internal
    assert "`--explain STEP`" in page and "`--full-refresh`" in page


def test_the_spec_reference_has_every_definition_of_the_schema():
    import json

    page = _docs_gen().spec_reference()
    schema = json.loads((REPO / "tributary.schema.json").read_text(encoding="utf-8"))
    for name in schema["$defs"]:
        assert f"## {name}\n" in page
    for key in schema["properties"]:
        assert f"| `{key}` |" in page


def test_a_udf_edited_to_the_same_size_within_a_second_is_imported_anew(tmp_path: Path, monkeypatch):
    """Python's bytecode cache trusts a file's size and modification second; a long-lived process
    (the warm engine, watch) ran the old function after an edit from 0.1 to 0.5."""
    import os

    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as where PYTHONDONTWRITEBYTECODE is not set

    from framework.functions.loader import load_functions
    from framework.project import Project

    module = tmp_path / "udfs" / "scale.py"
    text = "from framework.functions import udf\n\n\n@udf(returns='double')\ndef scaled(x):\n    return x * {}\n"
    write(module, text.format("0.1"))
    os.utime(module, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    assert load_functions(Project(tmp_path)).sql["scaled"].fn(10) == 1.0
    write(module, text.format("0.5"))
    os.utime(module, ns=(1_700_000_000_000_000_001, 1_700_000_000_000_000_001))  # the same second, one ns later
    assert load_functions(Project(tmp_path)).sql["scaled"].fn(10) == 5.0


def test_importing_udfs_leaves_ctrl_c_as_it_was(tmp_path: Path):
    """A udfs/ module that ignored SIGINT made Ctrl-C do nothing: the interrupted run committed."""
    import signal

    from framework.functions.loader import load_functions
    from framework.project import Project

    write(
        tmp_path / "udfs" / "quiet.py",
        "import signal\n\nfrom framework.functions import udf\n\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\n\n@udf(returns='int')\ndef same(x):\n    return x\n",
    )
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    assert "same" in load_functions(Project(tmp_path)).sql
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


def test_a_udfs_module_that_ends_the_process_while_imported_is_bad_input(tmp_path: Path):
    """os._exit(0) at import ended validate, run and test at once with exit 0, having done nothing."""
    import subprocess
    import sys

    write(tmp_path / "udfs" / "leaving.py", "import os\n\nos._exit(0)\n")
    write(
        tmp_path / "pipelines" / "p.yaml",
        "name: p\nsources:\n  x: {format: json, path: in, schema: 'id INT'}\n"
        "steps:\n  s: {sql: 'select id from {{ source(\"x\") }}'}\noutputs:\n  s: {mode: overwrite}\n",
    )
    done = subprocess.run([sys.executable, "-m", "framework", "validate", "p"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "udfs/leaving.py:3" in done.stderr and "os._exit(0)" in done.stderr, done.stderr


def test_a_udfs_module_that_never_finishes_importing_is_bad_input(tmp_path: Path, monkeypatch):
    """A module that slept or looped at import made validate, run and test wait for ever."""
    from framework.errors import BadInput
    from framework.functions import loader
    from framework.project import Project

    monkeypatch.setattr(loader, "IMPORT_SECONDS", 1.0)
    write(tmp_path / "udfs" / "slow.py", "import time\n\ntime.sleep(30)\n")
    with pytest.raises(BadInput) as raised:
        loader.load_functions(Project(tmp_path))
    assert "udfs/slow.py:3" in str(raised.value) and "still importing after 1 s" in str(raised.value), str(raised.value)
