"""Runs that were killed between two output commits, undone by the next run of their pipeline.

A batch run commits its outputs one after another. If its process dies in between, some outputs
hold its commit and others do not. The next run of the pipeline holds the run lock, so no such
run is still going: it restores the outputs that run committed to their previous version and
logs the run as interrupted, and removes what it staged (its files would stay for ever). A killed
run that committed every output (only its end was not logged) is logged as ok. Runs that share the lock with this one (a parallel backfill's,
`RunContext.siblings`) are alive or ended by themselves, not interrupted.

A run that failed restores the outputs it had committed (framework.engine.transaction). When such
a restore fails too (the outage that failed the run), the run logs the output as not rolled back;
the next run restores it, if the failed run's commit is still the table's last.
"""

from __future__ import annotations

import json
from typing import Any

from framework.engine.context import RunContext
from framework.engine.events import EventLog
from framework.engine.results import OutputStatus, Progress, RunStatus
from framework.io import staging as staging_files
from framework.io.locations import EVENTS_TABLE, STAGING_DIR
from framework.plan.planner import output_table


def recover_interrupted_runs(run: RunContext) -> None:
    store, spec = run.store, run.compiled.spec
    log = run.internal(EVENTS_TABLE)
    rows = store.query(log, f"SELECT run_id, event, name, status, details FROM t WHERE pipeline = '{run.pipeline}'").to_pylist()
    _restore_not_rolled_back(run, rows)
    ended = {r["run_id"] for r in rows if r["event"] == "run_end"}
    interrupted = {r["run_id"]: r["details"] for r in rows if r["event"] == "run_start" and r["run_id"] not in ended}
    for alive in {run.run_id, *run.siblings}:
        interrupted.pop(alive, None)
    for run_id, details in interrupted.items():
        planned = [o for o in json.loads(details or "{}").get("outputs", []) if o in spec.outputs]
        tables = {o: output_table(run.compiled, run.plan.warehouse, o) for o in planned}
        committed = [o for o, table in tables.items() if store.last_run_id(table) == run_id]
        closing = EventLog(store, log, run_id, run.pipeline)
        partial = bool(committed) and len(committed) < len(tables)
        for output in committed if partial else []:
            version = store.version(tables[output])
            store.restore(tables[output], version - 1 if version else None)
            closing.record("recovered", name=output, details={"restored_to": version - 1 if version else None})
            run.reporter.update("output", output, Progress.RECOVERED, f"undid run {run_id}'s partial commit")
        status = RunStatus.INTERRUPTED if partial or not committed else RunStatus.OK
        closing.record("run_end", status=status, error="the process ended before the run finished")
        closing.flush()
        staging_files.remove_tree(run.internal(f"{STAGING_DIR}/{run_id}"))  # what it staged and never committed


def _restore_not_rolled_back(run: RunContext, rows: list[dict[str, Any]]) -> None:
    """Outputs failed runs committed and could not restore (module docstring), restored now."""
    store, log = run.store, run.internal(EVENTS_TABLE)
    left = {
        (r["run_id"], r["name"]): r for r in rows if r["event"] == "output_end" and r["status"] == OutputStatus.NOT_ROLLED_BACK
    }
    for r in rows:
        if r["event"] == "recovered":
            left.pop((r["run_id"], r["name"]), None)
    for (run_id, output), row in left.items():
        details = json.loads(row["details"] or "{}")
        table, previous = details["table"], details.get("previous_version")
        closing = EventLog(store, log, run_id, run.pipeline)
        if store.last_run_id(table) != run_id:  # a later commit is the table's last: it stays as it is
            closing.record("recovered", name=output, details={"restored_to": None, "why": "not its last commit"})
        else:
            store.restore(table, previous)
            closing.record("recovered", name=output, details={"restored_to": previous})
            said = f"restored version {previous}: undid run {run_id}'s commit, which that run could not"
            run.reporter.update("output", output, Progress.RECOVERED, said)
        closing.flush()
