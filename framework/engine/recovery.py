"""Runs that were killed between two output commits, undone by the next run of their pipeline.

A batch run commits its outputs one after another. If its process dies in between, some outputs
hold its commit and others do not. The next run of the pipeline holds the run lock, so no such
run is still going: it restores the outputs that run committed to their previous version and
logs the run as interrupted, and removes what it staged (its files would stay for ever). A killed
run that committed every output (only its end was not logged) is logged as ok. Runs that share the lock with this one (a parallel backfill's,
`RunContext.siblings`) are alive or ended by themselves, not interrupted.
"""

from __future__ import annotations

import json

from framework.engine.context import RunContext
from framework.engine.events import EventLog
from framework.engine.results import Progress, RunStatus
from framework.io import staging as staging_files
from framework.io.locations import EVENTS_TABLE, STAGING_DIR
from framework.plan.planner import output_table


def recover_interrupted_runs(run: RunContext) -> None:
    store, spec = run.store, run.compiled.spec
    log = run.internal(EVENTS_TABLE)
    rows = store.query(log, f"SELECT run_id, event, details FROM t WHERE pipeline = '{run.pipeline}'").to_pylist()
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
