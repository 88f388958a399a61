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

from framework.io.delta_store import DeltaStore

EVENT_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("pipeline", pa.string()),
        ("event", pa.string()),  # run_start | run_end | step_end | output_end | quarantine
        ("name", pa.string()),  # step or output name (null for run events)
        ("status", pa.string()),  # running | ok | failed | skipped
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


RECENT_RUNS_SQL = """
SELECT run_id,
       max(pipeline) AS pipeline,
       date_format(min(CASE WHEN event = 'run_start' THEN ts END), '%Y-%m-%d %H:%M:%S') AS started,
       coalesce(max(CASE WHEN event = 'run_end' THEN status END), 'incomplete') AS status,
       round(max(CASE WHEN event = 'run_end' THEN duration_s END), 1) AS seconds,
       sum(CASE WHEN event = 'output_end' THEN rows END) AS rows_written,
       max(CASE WHEN event = 'run_end' THEN error END) AS error
FROM t
GROUP BY run_id
ORDER BY started DESC
LIMIT {limit}
"""
