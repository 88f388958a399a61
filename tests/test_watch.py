"""`tributary watch`: reruns after an edit in one warm SparkSession, survives a bad edit, stops cleanly."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from tests.conftest import delta_rows, write

SQL = Path("sql") / "service_stats.sql"


@pytest.mark.spark
def test_watch_reruns_after_each_edit_in_one_session_and_survives_a_bad_edit(spark, project, monkeypatch):
    from framework.errors import BadInput
    from framework.project import Project
    from framework.watch import Cycle, Watch

    monkeypatch.chdir(project)
    monkeypatch.delenv("TRIBUTARY_PROFILE", raising=False)
    original = (project / SQL).read_text()
    edits = [
        original.replace("count(*)                        as calls", "count(*) * 10 as calls"),  # a change
        original.replace("ref('all_calls')", "ref('all_cals')"),  # a mistake
        original,  # fixed
    ]
    cycles: list[Cycle] = []
    sessions = []
    rows: dict[int, list[dict]] = {}  # cycle -> the scratch table's rows after it

    def after(cycle: Cycle) -> None:
        cycles.append(cycle)
        sessions.append(watching.spark)
        table = project / ".tributary" / "scratch" / "service_stats"
        if cycle.result is not None:
            rows[cycle.number] = delta_rows(table)
        if edits:
            time.sleep(0.05)  # a new modification time even on coarse clocks
            (project / SQL).write_text(edits.pop(0))

    console = Console(file=io.StringIO(), width=200)
    watching = Watch(Project(project), "service_calls", console, limit=5, show=3, max_cycles=4, poll_s=0.1, after_cycle=after)
    assert watching.run() == 0

    first, edited, broken, fixed = cycles
    assert first.result is not None and first.changed == []
    assert edited.changed == [str(SQL)] and edited.result is not None
    assert sorted(r["calls"] for r in rows[2]) == sorted(10 * r["calls"] for r in rows[1])
    assert isinstance(broken.error, BadInput) and broken.result is None
    assert "sql/service_stats.sql:11" in str(broken.error) and "all_cals" in str(broken.error)
    assert fixed.result is not None and rows[4] == rows[1]
    assert all(s is sessions[0] for s in sessions), "a rerun started another session"
    assert sessions[0].sparkContext.applicationId == spark.sparkContext.applicationId  # no Spark of its own either
    assert spark.range(3).count() == 3  # still alive: watching stopped nothing
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert "changed: sql/service_stats.sql" in printed and "invalid:" in printed and "Traceback" not in printed
    assert "service_stats (first 3 rows)" in printed
    assert not (project / "warehouse").exists(), "a try wrote into the real warehouse"


@pytest.mark.spark
def test_watch_from_the_command_line_runs_then_exits_0(spark, cli, project):
    code, out, err = cli("watch", "service_calls", "--limit", "5", "--max-runs", "1")
    assert code == 0, err
    assert "a try over the first 5 rows of each source" in out and "daily_head_stats (first 5 rows)" in out


def test_watch_refuses_a_stream_without_limit_and_an_unknown_pipeline(cli):
    code, out, err = cli("watch", "contact_join", "--max-runs", "1")
    assert code == 2 and "--limit" in err
    code, out, err = cli("watch", "no_such_pipeline", "--max-runs", "1")
    assert code == 2 and "not found" in err


def test_ctrl_c_stops_watching_with_exit_0(project):
    """A pipeline that does not compile starts no JVM: the watch waits for an edit, and Ctrl-C ends it."""
    write(
        project / "pipelines" / "broken.yaml",
        "name: broken\nsources: {}\nsteps:\n  a:\n    sql: select * from {{ ref('b') }}\noutputs:\n  a: {}\n",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "framework", "watch", "broken"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert process.stdout is not None
    seen = []
    deadline = time.time() + 60
    while time.time() < deadline:
        line = process.stdout.readline()
        seen.append(line)
        if "watching" in line:
            break
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=30)
    text = "".join(seen) + rest
    assert process.returncode == 0, text
    assert "invalid:" in text and "'b'" in text
    assert "stopped watching" in text and "Traceback" not in text
