"""Kill real `tributary run` processes at random moments: every output stays at a previous,
complete version (never a partial commit), or, killed between two output commits, the next run
undoes the first; and the next run succeeds."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import delta_rows, delta_version, start_run, write

pytestmark = pytest.mark.spark
TABLES = ("service_stats", "daily_head_stats")


def _snapshot(warehouse: Path) -> dict[str, tuple[int | None, list[dict]]]:
    return {t: (delta_version(warehouse / t), delta_rows(warehouse / t, "1, 2")) for t in TABLES}


def test_sigkill_at_random_moments_never_leaves_a_partial_output(spark, cli, project):
    assert cli("run", "service_calls")[0] == 0
    warehouse = project / "warehouse"
    complete_states = [_snapshot(warehouse)]
    rng = random.Random(int(os.environ.get("CRASH_SEED", "20261121")))
    for attempt in range(3):
        # new input, so a run that got through would change both tables
        write(
            project / f"data/samples/service_calls/static/extra-{attempt}.json",
            f'{{"ts": "2026-11-0{3 + attempt}T10:00:00Z", "client_ip": "10.1.1.1", "head_service": "/news.html", '
            f'"requested_service": "/news.html", "response_ms": {attempt + 1}}}\n',
        )
        process = start_run(project, "service_calls")
        time.sleep(rng.uniform(4.0, 14.0))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        state = _snapshot(warehouse)
        # complete: as some earlier run left it, or every output one version on (killed after its
        # commits, while it logged or stopped Spark)
        last = complete_states[-1]
        all_moved = all(state[t][0] is not None and state[t][0] == (last[t][0] or 0) + 1 for t in TABLES)
        versions = {t: (last[t][0], state[t][0]) for t in TABLES}
        if not (any(state == known for known in complete_states) or all_moved or process.returncode == 0):
            # killed in the moment between its two output commits: one table is one commit on, the
            # other as it was, and the next run undoes that commit before its own (recovery.py; the
            # test below kills there on purpose). CI's run of 2026-11-28 hit this moment.
            moved = [t for t in TABLES if state[t][0] != last[t][0]]
            assert len(moved) == 1 and state[moved[0]][0] == (last[moved[0]][0] or 0) + 1, (
                f"attempt {attempt}: partial state {versions}"
            )
            assert cli("run", "service_calls")[0] == 0
            from deltalake import DeltaTable

            assert "RESTORE" in [h["operation"] for h in DeltaTable(str(warehouse / moved[0])).history()]
            state = _snapshot(warehouse)
        complete_states.append(state)  # a finished run is a complete state too
    code, _, err = cli("run", "service_calls")
    assert code == 0, err
    final = delta_rows(warehouse / "daily_head_stats")
    assert sum(r["invocations"] for r in final) == sum(
        1 for f in (project / "data/samples/service_calls").rglob("*.json") for _ in f.open()
    )


DIE_ON_SECOND_COMMIT = """
import os, sys
from framework.io.delta.delta_rs import DeltaRsStore
original, calls = DeltaRsStore.commit, []
def commit(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
        os._exit(9)  # the process dies between its first and second output commit
    return original(self, *args, **kwargs)
DeltaRsStore.commit = commit
from framework.cli import main
sys.argv = ["tributary", "run", "service_calls"]
main()
"""


def test_a_run_killed_between_output_commits_is_undone_by_the_next_run(spark, cli, project):
    assert cli("run", "service_calls")[0] == 0
    warehouse = project / "warehouse"
    before = _snapshot(warehouse)
    write(
        project / "data/samples/service_calls/static/more.json",
        '{"ts": "2026-11-09T10:00:00Z", "client_ip": "10.1.1.1", "head_service": "/news.html", '
        '"requested_service": "/news.html", "response_ms": 3}\n',
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    died = subprocess.run([sys.executable, "-c", DIE_ON_SECOND_COMMIT], cwd=project, env=env, capture_output=True)
    assert died.returncode == 9
    partial = _snapshot(warehouse)
    changed = [t for t in TABLES if partial[t] != before[t]]
    assert len(changed) == 1, "the killed run committed exactly one of its two outputs"

    assert cli("run", "service_calls", "--select", "daily_head_stats")[0] == 0  # any next run of the pipeline
    from deltalake import DeltaTable

    restored = changed[0]
    operations = [h["operation"] for h in DeltaTable(str(warehouse / restored)).history()]
    assert "RESTORE" in operations
    ends = {e["run_id"]: e["status"] for e in delta_rows(warehouse / "_tributary" / "events") if e["event"] == "run_end"}
    assert "interrupted" in ends.values()
    staging = warehouse / "_tributary" / "staging"
    assert not staging.exists() or not any(staging.iterdir()), "what the killed run staged stays for ever"
    if restored == "service_stats":  # not selected by the recovery run: exactly as before the killed run
        assert _snapshot(warehouse)["service_stats"][1] == before["service_stats"][1]
