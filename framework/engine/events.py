"""The run log: one Delta table (<warehouse>/_tributary/events) of run, step and output events.

`run_start` is committed as soon as a run begins, so a crashed run still shows up; the rest of
a run's events are committed together when it ends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from framework.engine.results import OutputStatus, RunResult, RunStatus
from framework.io.delta.base import DeltaStore

EVENT_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("pipeline", pa.string()),
        # run_start | run_end | step_end | output_end | quarantine | late_rows | capacity | micro_batches | rescale | held | watermark | schedule (an attempt's)
        ("event", pa.string()),
        ("name", pa.string()),  # step or output name (null for run events)
        ("status", pa.string()),  # framework.engine.results: RunStatus, StepStatus, OutputStatus
        ("rows", pa.int64()),
        ("version", pa.int64()),  # Delta version written (outputs)
        ("duration_s", pa.float64()),
        ("error", pa.string()),
        ("details", pa.string()),  # JSON
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)


@dataclass
class EventLog:
    store: DeltaStore
    table: str
    run_id: str
    pipeline: str
    pending: list[dict[str, Any]] = field(default_factory=list)

    def record(
        self,
        event: str,
        *,
        name: str | None = None,
        status: str = "ok",
        rows: int | None = None,
        version: int | None = None,
        duration_s: float | None = None,
        error: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        self.pending.append(
            {
                "run_id": self.run_id,
                "pipeline": self.pipeline,
                "event": event,
                "name": name,
                "status": status,
                "rows": rows,
                "version": version,
                "duration_s": duration_s,
                "error": error,
                "details": json.dumps(details, default=str) if details else None,
                "ts": datetime.now(UTC),
            }
        )

    def flush(self) -> None:
        if not self.pending:
            return
        rows = pa.Table.from_pylist(self.pending, schema=EVENT_SCHEMA)
        self.store.append_rows(self.table, rows)
        self.pending.clear()


def record_result(events: EventLog, result: RunResult) -> None:
    """A finished run's steps, outputs, quarantined and late rows, and its end."""
    for step in result.steps:
        events.record(
            "step_end", name=step.name, status=step.status, rows=step.rows, duration_s=step.plan_s, details={"kind": step.kind}
        )
    for out in result.outputs:
        events.record(
            "output_end",
            name=out.name,
            status=out.status,
            rows=out.rows,
            version=out.version,
            duration_s=out.duration_s,
            details={
                "table": out.table,
                "mode": out.mode,
                "previous_version": out.previous_version,
                **({"written_by": out.written_by} if out.written_by else {}),
                **out.observed,
            },
        )
    for figures in result.capacity:
        events.record("capacity", name=figures.step, status="ok", details=figures.as_dict())
    for spread_step, batches in result.micro_batches.items():
        events.record("micro_batches", name=spread_step, status="ok", rows=len(batches), details={"batches": batches})
    for change in result.rescales:
        events.record("rescale", name=change["step"], status="ok", details=change)
    for holder, held in result.held.items():
        events.record(
            "held",
            name=holder,
            status="ok",
            rows=held.rows,
            details={"what": held.what, "watermark": held.watermark, "waits": held.waits},
        )
    for chained, watermark in result.watermarks.items():
        events.record("watermark", name=chained, status="ok", details={"readers_see": watermark})
    for source, count in result.quarantined.items():
        events.record("quarantine", name=source, status="ok", rows=count)
    for source, count in result.late.items():
        events.record("late_rows", name=source, status="ok", rows=count)
    details: dict[str, Any] = {"startup_s": result.startup_s} if result.startup_s is not None else {}
    if result.exit_code is not None:
        details["exit_code"] = result.exit_code
    if result.inputs_key is not None:
        details["inputs_key"] = result.inputs_key
    events.record("run_end", status=result.status, duration_s=result.duration_s, error=result.error, details=details or None)


RECENT_RUNS_SQL = f"""
SELECT run_id,
       max(pipeline) AS pipeline,
       date_format(min(CASE WHEN event = 'run_start' THEN ts END), '%Y-%m-%d %H:%M:%S') AS started,
       coalesce(max(CASE WHEN event = 'run_end' THEN status END), '{RunStatus.INCOMPLETE}') AS status,
       round(max(CASE WHEN event = 'run_end' THEN duration_s END), 1) AS seconds,
       sum(CASE WHEN event = 'output_end' AND status = '{OutputStatus.WRITTEN}' THEN rows END) AS rows_written,
       max(CASE WHEN event = 'run_end' THEN error END) AS error
FROM t
GROUP BY run_id
ORDER BY started DESC
LIMIT {{limit}}
"""

CAPACITY_SQL = "SELECT run_id, details FROM t WHERE event = 'capacity' ORDER BY ts"


def with_state_column(runs: pa.Table, capacity: pa.Table) -> pa.Table:
    """The runs with a `state predicted → observed` column: each window step's main figure
    (framework.integration.capacity)."""
    from framework.integration.capacity import Figures

    lines: dict[str, list[str]] = {}
    for row in capacity.to_pylist() if capacity.num_rows else []:
        lines.setdefault(row["run_id"], []).append(Figures.from_dict(json.loads(row["details"])).headline())
    column = pa.array(["; ".join(lines.get(run_id, [])) or None for run_id in runs.column("run_id").to_pylist()], pa.string())
    return runs.add_column(runs.column_names.index("error"), "state predicted → observed", column)
