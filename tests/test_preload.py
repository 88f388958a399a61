"""A run that starts Spark's JVM imports what its pipeline needs meanwhile (framework.engine.preload).

Each case runs in a fresh interpreter, where nothing is imported yet. There, `spark_session` is
replaced by a probe that looks at what is being imported while the run waits on it, then stops
the run: the question is only what happens before Spark is up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CHECKED = """\
name: checked_calls
sources:
  calls:
    format: json
    path: data/samples/service_calls/static
    schema: ts TIMESTAMP, client_ip STRING, head_service STRING, requested_service STRING, response_ms INT
steps:
  calls_checked:
    sql: select * from {{ source('calls') }}
    expectations:
      - expect_column_values_to_not_be_null: {column: head_service}
        severity: warn
outputs:
  calls_checked: {mode: overwrite}
"""

UNCHECKED = CHECKED.replace(
    """    expectations:
      - expect_column_values_to_not_be_null: {column: head_service}
        severity: warn
""",
    "",
)

#: In a fresh interpreter: the pipeline (argv[1]) run with the HOOKS below in place; a hook
#: records what it sees in `seen` and raises Stop, so the run ends before Spark is needed.
_RUN = """
import json, sys, threading, time
from pathlib import Path

import framework.engine.session as session
from framework.compiler import compile_pipeline
from framework.engine.runner import run_pipeline
from framework.profiles import load_profile
from framework.project import Project

seen = {}
PRELOAD = "tributary-preload"  # framework.engine.preload.THREAD_NAME

class Stop(Exception):
    pass

HOOKS

project = Project(Path("."))
profile = load_profile(project)
compiled = compile_pipeline(project, Path("pipelines") / (sys.argv[1] + ".yaml"), profile)
try:
    run_pipeline(compiled, profile)
except Stop:
    pass
print("SEEN" + json.dumps(seen))
"""

#: `spark_session` waits up to argv[2] s for Great Expectations to be imported (its import starts
#: within milliseconds when it is preloaded; without the preload the run imports it only after
#: Spark is up), then for the preload to end.
_PROBE = _RUN.replace(
    "HOOKS",
    """
def probe(*args, **kwargs):
    deadline = time.monotonic() + float(sys.argv[2])
    while "great_expectations" not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.01)
    seen["importing_gx"] = "great_expectations" in sys.modules
    for thread in threading.enumerate():
        if thread.name == PRELOAD:
            thread.join()
    seen["imported_gx"] = "great_expectations.validator.metric_configuration" in sys.modules
    raise Stop

session.spark_session = probe
""",
)

#: A session that is there at once (as in a process that holds one), and whether the preload
#: still runs when the run goes on (`guard` is the run's next call).
_GOES_ON = _RUN.replace(
    "HOOKS",
    """
def going_on(spark):
    seen["preload_running"] = any(t.name == PRELOAD and t.is_alive() for t in threading.enumerate())
    raise Stop

session.spark_session = lambda *args, **kwargs: object()
session.guard = going_on
""",
)


def _while_spark_starts(project: Path, pipeline: str, wait_s: float, probe: str = _PROBE) -> dict[str, bool]:
    done = subprocess.run(
        [sys.executable, "-c", probe, pipeline, str(wait_s)],
        cwd=project,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(project)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    marker = [line for line in done.stdout.splitlines() if line.startswith("SEEN")]
    assert marker, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(marker[-1][len("SEEN") :])


@pytest.fixture
def checked_project(project: Path) -> Path:
    (project / "pipelines" / "checked_calls.yaml").write_text(CHECKED)
    (project / "pipelines" / "unchecked_calls.yaml").write_text(UNCHECKED)
    return project


def test_a_run_with_expectations_imports_great_expectations_while_spark_starts(checked_project: Path):
    """Great Expectations takes seconds to import; a cold run imports it while the JVM starts."""
    seen = _while_spark_starts(checked_project, "checked_calls", wait_s=20)
    assert seen == {"importing_gx": True, "imported_gx": True}


def test_a_run_without_expectations_does_not_import_great_expectations(checked_project: Path):
    seen = _while_spark_starts(checked_project, "unchecked_calls", wait_s=1)
    assert seen == {"importing_gx": False, "imported_gx": False}


def test_a_run_goes_on_only_once_the_imports_are_done(checked_project: Path):
    """Great Expectations cannot be imported from two threads at once (the second finds a module
    partially initialized): when Spark is there at once, the run waits for the preload before it
    goes on to import anything itself."""
    seen = _while_spark_starts(checked_project, "checked_calls", wait_s=0, probe=_GOES_ON)
    assert seen == {"preload_running": False}


def test_an_engine_started_for_a_pipeline_file_imports_what_that_file_needs(tmp_path):
    """The warm engine's preload for the pipeline file of the command that started it: Great
    Expectations for a checked pipeline; nothing for one without expectations, or for a file that
    is not a pipeline (its command says why, not the engine)."""
    from framework.engine.preload import GREAT_EXPECTATIONS, for_file

    for name, text in (("checked", CHECKED), ("unchecked", UNCHECKED), ("broken", "name: [unclosed\n")):
        (tmp_path / f"{name}.yaml").write_text(text)
    assert for_file(tmp_path / "checked.yaml") == [GREAT_EXPECTATIONS]
    assert for_file(tmp_path / "unchecked.yaml") == []
    assert for_file(tmp_path / "broken.yaml") == []
    assert for_file(tmp_path / "missing.yaml") == []
    os.mkfifo(tmp_path / "pipe.yaml")  # nothing writes to it: reading it would wait forever
    assert for_file(tmp_path / "pipe.yaml") == []
