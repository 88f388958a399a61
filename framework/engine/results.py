"""What a run did: its result objects and the words for their states.

The statuses are enums whose values are the words the run log stores, so the CLI's summary,
`tributary runs` and the HTML report, which reads them back from the log, say the same thing and
colour it the same way (`tone`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any


class RunStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # killed between two output commits; the next run undid its commits
    INCOMPLETE = "incomplete"  # the log has no end for it (still running, or killed and not yet recovered)


class StepStatus(StrEnum):
    PENDING = "pending"
    PLANNED = "planned"
    OK = "ok"
    STREAMED = "streamed"


class OutputStatus(StrEnum):
    PENDING = "pending"
    WRITTEN = "written"
    SKIPPED = "skipped"  # nothing new, or already written by an identical run
    NOT_COMMITTED = "not committed"  # staged by a run that then failed: nothing reached the table
    FAILED = "failed"
    ROLLED_BACK = "rolled back"
    #: committed by a run that then failed, and its restore failed too: the next run restores it
    NOT_ROLLED_BACK = "not rolled back"


class CheckOutcome(StrEnum):
    """An expectation's outcome as the report shows it."""

    PASS = "pass"
    WARN = "warn"
    DROPPED = "dropped"
    FAIL = "fail"
    ERROR = "error"


class Progress(StrEnum):
    """Steps of work the CLI shows while a run goes (besides the statuses above)."""

    PLANNING = "planning"
    COMPUTING = "computing"
    STAGED = "staged"
    CHECKING = "checking"
    CHECKED = "checked"
    EVALUATING = "evaluating"
    EVALUATED = "evaluated"
    COMMITTING = "committing"
    STREAMING = "streaming"
    RECOVERED = "recovered"


#: Work under way (the CLI draws a spinner); every other state is a result.
UNDER_WAY = frozenset(
    {Progress.PLANNING, Progress.COMPUTING, Progress.CHECKING, Progress.EVALUATING, Progress.COMMITTING, Progress.STREAMING}
)


class Tone(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    NEUTRAL = "neutral"


_TONES: dict[str, Tone] = {
    RunStatus.RUNNING: Tone.WARN,
    RunStatus.OK: Tone.PASS,
    RunStatus.FAILED: Tone.FAIL,
    RunStatus.INTERRUPTED: Tone.WARN,
    RunStatus.INCOMPLETE: Tone.WARN,
    StepStatus.STREAMED: Tone.PASS,
    OutputStatus.WRITTEN: Tone.PASS,
    OutputStatus.SKIPPED: Tone.WARN,
    OutputStatus.ROLLED_BACK: Tone.FAIL,
    OutputStatus.NOT_ROLLED_BACK: Tone.FAIL,
    OutputStatus.NOT_COMMITTED: Tone.FAIL,
    CheckOutcome.PASS: Tone.PASS,
    CheckOutcome.WARN: Tone.WARN,
    CheckOutcome.DROPPED: Tone.WARN,
    CheckOutcome.FAIL: Tone.FAIL,
    CheckOutcome.ERROR: Tone.FAIL,
}


def tone(status: str | None) -> Tone:
    """How good a state is, for colours: a status read back from the log is a plain string."""
    return _TONES.get(str(status), Tone.NEUTRAL)


@dataclass
class StepResult:
    name: str
    kind: str
    status: StepStatus = StepStatus.PENDING
    rows: int | None = None
    plan_s: float = 0.0


@dataclass
class OutputResult:
    name: str
    step: str
    table: str
    mode: str
    status: OutputStatus = OutputStatus.PENDING
    rows: int | None = None
    version: int | None = None
    previous_version: int | None = None
    duration_s: float = 0.0
    app_id: str = ""
    written_by: str | None = None  # skipped: the run whose identical commit holds the rows
    observed: dict[str, Any] = field(default_factory=dict)  # streaming: state rows, rates, executors


@dataclass
class RunResult:
    run_id: str
    pipeline: str
    status: RunStatus = RunStatus.RUNNING
    duration_s: float = 0.0
    store: str = ""
    steps: list[StepResult] = field(default_factory=list)
    outputs: list[OutputResult] = field(default_factory=list)
    quarantined: dict[str, int] = field(default_factory=dict)
    late: dict[str, int] = field(default_factory=dict)
    integration: list[Any] = field(default_factory=list)  # StepEvaluation of steps declaring truth:
    capacity: list[Any] = field(default_factory=list)  # Figures: predicted and observed state of window steps
    #: streaming: step -> its micro-batches' partitions and executors (per-micro-batch steps)
    micro_batches: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: streaming: each widening by the pipeline's `elastic:` rule (step, output, batch, from, to)
    rescales: list[dict[str, Any]] = field(default_factory=list)
    held: dict[str, Any] = field(default_factory=dict)  # streaming: step -> Held, rows still waiting at the end
    #: streaming: a chained step -> the watermark its readers see (framework.plan.model.Chain.watermark)
    watermarks: dict[str, str] = field(default_factory=dict)
    quality: list[Any] = field(default_factory=list)  # ExpectationResult of every expectation checked
    error: str | None = None
    log_file: str | None = None  # Spark's log (errors with their Java stacks)
    started_at: float = field(default_factory=time.time)  # wall clock (epoch seconds) when the run began
    startup_s: float | None = None  # streaming: seconds from the run's start to its first micro-batch
    exit_code: int | None = None  # what `tributary run` exits with: 0 ok, 1 failed, 2 bad input
    limit: int | None = None  # a try (`run --limit`): the rows read of each source
    scratch: str | None = None  # a try: the scratch warehouse it wrote into
    inputs_key: str | None = None  # batch: a hash of its input files' and tables' fingerprint (stale intervals)

    def output(self, name: str) -> OutputResult | None:
        return next((o for o in self.outputs if o.name == name), None)


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
