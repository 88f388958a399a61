"""The quality log: one row per expectation per run in <warehouse>/_tributary/quality.

Appended whether the run passes or fails (a failing suite is exactly what one wants to read
afterwards), beside the run log (`_tributary/events`) it shares the run id with.

`quarantined` counts the rows a run committed to the quarantine, never rows it only found: a run
that failed, or an identical rerun whose writes were all "skipped: unchanged", records 0, and the
rerun names the run whose commit holds the rows (`written_by`). So summing `quarantined` over runs
counts each quarantined row once, and the rows an expectation's figure counts are in the
quarantine under that same run id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from framework.io.delta.base import DeltaStore

QUALITY_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("pipeline", pa.string()),
        ("target", pa.string()),  # the step or output name the suite checks
        ("scope", pa.string()),  # step | output | integration (the step's row in _tributary/integration_quality)
        ("expectation", pa.string()),  # snake_case name, e.g. expect_column_values_to_not_be_null
        ("kwargs", pa.string()),  # JSON of the expectation's arguments (column, min_value, mostly, ...)
        ("severity", pa.string()),  # warn | drop | fail
        ("dimension", pa.string()),  # meta.dimension when given (completeness | correctness | ...)
        ("meta", pa.string()),  # JSON
        ("success", pa.bool_()),
        ("element_count", pa.int64()),  # rows checked
        ("unexpected_count", pa.int64()),  # rows failing a row-level expectation (null otherwise)
        ("unexpected_percent", pa.float64()),
        ("quarantined", pa.int64()),  # rows this expectation sent to quarantine (drop only)
        ("observed_value", pa.string()),  # aggregate expectations: what was measured (JSON)
        ("threshold", pa.string()),  # what success needed, in words, e.g. "0 ≤ response_ms ≤ 120000, mostly 0.99"
        ("failing_samples", pa.string()),  # JSON list of a few failing rows (only when it failed)
        ("error", pa.string()),  # an expectation that could not be evaluated
        ("checked_at", pa.timestamp("us", tz="UTC")),
        # the run whose commit holds the rows checked, when this run committed none (an identical
        # rerun: its outputs and quarantine were "skipped: unchanged"); null when this run wrote them
        ("written_by", pa.string()),
    ]
)

#: Columns the quality table gained after its first release, added to an older table before appending
ADDED_COLUMNS = {"written_by": "string"}


@dataclass
class ExpectationResult:
    """The outcome of one expectation on one target in one run."""

    target: str
    scope: str
    expectation: str
    kwargs: dict[str, Any]
    severity: str
    success: bool
    meta: dict[str, Any] = field(default_factory=dict)
    element_count: int | None = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    quarantined: int | None = None  # rows this run committed to the quarantine (drop only): 0 if it committed none
    observed_value: Any = None
    threshold: str = ""
    failing_samples: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    written_by: str | None = None  # this run committed nothing: the run whose identical commit holds the rows

    @property
    def blocks_run(self) -> bool:
        return self.severity == "fail" and not self.success

    def as_row(self, run_id: str, pipeline: str, checked_at: datetime) -> dict[str, Any]:
        return {
            "run_id": run_id,
            "pipeline": pipeline,
            "target": self.target,
            "scope": self.scope,
            "expectation": self.expectation,
            "kwargs": json.dumps(self.kwargs, sort_keys=True, default=str),
            "severity": self.severity,
            "dimension": self.meta.get("dimension"),
            "meta": json.dumps(self.meta, sort_keys=True, default=str) if self.meta else None,
            "success": self.success,
            "element_count": self.element_count,
            "unexpected_count": self.unexpected_count,
            "unexpected_percent": self.unexpected_percent,
            "quarantined": self.quarantined,
            "observed_value": None if self.observed_value is None else json.dumps(self.observed_value, default=str),
            "threshold": self.threshold,
            "failing_samples": json.dumps(self.failing_samples, default=str) if self.failing_samples else None,
            "error": self.error,
            "checked_at": checked_at,
            "written_by": self.written_by,
        }


def result_rows(results: list[ExpectationResult], run_id: str, pipeline: str) -> pa.Table:
    now = datetime.now(UTC)
    return pa.Table.from_pylist([r.as_row(run_id, pipeline, now) for r in results], schema=QUALITY_SCHEMA)


def record(store: DeltaStore, table: str, results: list[ExpectationResult], run_id: str, pipeline: str) -> None:
    if results:
        store.ensure_columns(table, ADDED_COLUMNS)
        store.append_rows(table, result_rows(results, run_id, pipeline))
