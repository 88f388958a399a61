"""What a run report holds (`RunReport` and its rows): the data `gather` reads from the warehouse
and `render` turns into a page, kept apart so either side can change without the other."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from framework.engine.results import OutputStatus, RunStatus

if TYPE_CHECKING:
    pass


SAMPLE_ROWS = 5  # failing samples per expectation, sample records per quarantine group
CELL_CHARS = 240  # longer values are cut in sample tables


# -- what a report holds -----------------------------------------------------------------------


@dataclass
class StepRow:
    name: str
    kind: str
    status: str
    rows: int | None
    seconds: float | None


@dataclass
class OutputRow:
    name: str
    table: str
    mode: str
    status: str
    rows: int | None
    version: int | None
    previous_version: int | None
    seconds: float | None
    details: dict[str, Any] = field(default_factory=dict)  # anything else logged (streaming: state rows, rates)

    @property
    def internal(self) -> bool:
        """Tributary's own outputs (e.g. `_quarantine`) start with an underscore."""
        return self.name.startswith("_")


@dataclass
class QuarantineGroup:
    source: str
    reason: str  # what turned the rows away: the expectation(s), without the rows' values, or the reason
    expectation: str | None
    count: int
    samples: list[dict[str, Any]]
    values: list[tuple[str, int]] = field(default_factory=list)  # the most frequent values the rows failed with


@dataclass
class RunReport:
    run_id: str
    pipeline: str
    status: str  # ok | failed | interrupted | incomplete (no run_end logged)
    started: datetime | None = None
    ended: datetime | None = None
    duration_s: float | None = None
    error: str | None = None
    profile: str | None = None
    writer: str | None = None
    selected: list[str] = field(default_factory=list)
    variables: dict[str, Any] = field(default_factory=dict)
    steps: list[StepRow] = field(default_factory=list)
    outputs: list[OutputRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # late rows, recovered outputs
    quality: list[dict[str, Any]] = field(default_factory=list)  # rows of _tributary/quality
    integration: list[dict[str, Any]] = field(default_factory=list)  # rows of _tributary/integration_quality
    capacity: list[Any] = field(default_factory=list)  # Figures of window steps (framework.integration.capacity)
    quarantine: list[QuarantineGroup] = field(default_factory=list)
    graph_svg: str | None = None
    graph_note: str | None = None  # why there is no graph
    warehouse: str = ""
    chosen: str | None = None  # without --run: which run this is and why, e.g. "the latest run that wrote data: <id>"
    generated_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def rows_written(self) -> int:
        return sum(o.rows or 0 for o in self.outputs if not o.internal and o.status == OutputStatus.WRITTEN)

    @property
    def quarantined(self) -> int:
        return sum(g.count for g in self.quarantine)

    @property
    def failed_expectations(self) -> list[dict[str, Any]]:
        return [q for q in self.quality if not q.get("success")]

    @property
    def changed_nothing(self) -> bool:
        """Ended ok with every output (and the quarantine) skipped: an identical run had written them."""
        return self.status == RunStatus.OK and bool(self.outputs) and all(o.status == OutputStatus.SKIPPED for o in self.outputs)

    @property
    def written_by(self) -> str | None:
        """The run whose commits hold what this run skipped as unchanged."""
        return next((str(o.details["written_by"]) for o in self.outputs if o.details.get("written_by")), None)


def logged_json(text: str | None) -> Any:
    """A JSON text from a log table as its value; text that is not JSON as itself."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text
