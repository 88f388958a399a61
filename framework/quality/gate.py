"""The quality gate of a batch run: expectations are attached while the plan is built, checked
before anything is staged (integration figures: before anything is committed), and a failing
`fail` expectation stops the run with every table at its previous version.

Attaching a suite to a frame:
- the frame is persisted once, so Great Expectations and the next steps read the same rows
  without computing them twice;
- rows failing a `drop` expectation leave the frame through the step's quarantine (counted by an
  Observation as the run goes), so passed rows + quarantined rows = the frame's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.errors import RunFailed
from framework.quality.results import ExpectationResult
from framework.quality.suite import check, drop_reason, missing_columns
from framework.spec.expectations import ExpectationSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.operators import StepContext


@dataclass
class _Pending:
    target: str
    scope: str
    frame: DataFrame
    specs: list[ExpectationSpec]


class QualityGate:
    def __init__(self) -> None:
        self.results: list[ExpectationResult] = []
        self._pending: list[_Pending] = []

    def attach(self, target: str, scope: str, frame: DataFrame, specs: list[ExpectationSpec], context: StepContext) -> DataFrame:
        """The frame the rest of the run reads: `frame` without the rows `drop` expectations refuse.

        `frame` must be persisted by the caller (it is read by the checks and by the run)."""
        specs = [s for s in specs if s.on == "rows"]
        if not specs:
            return frame
        self._pending.append(_Pending(target, scope, frame, specs))
        drops = [s for s in specs if s.severity == "drop"]
        return context.quarantine(frame, drop_reason(frame, drops)) if drops else frame

    @staticmethod
    def missing(frame: DataFrame, specs: list[ExpectationSpec]) -> list[tuple[int, ExpectationSpec, list[str]]]:
        """Expectations naming columns the frame does not have (index in the spec, spec, columns)."""
        found = []
        for i, spec in enumerate(specs):
            if spec.on == "rows" and (absent := missing_columns(frame, spec)):
                found.append((i, spec, absent))
        return found

    def check_rows(self, progress: Any = None) -> None:
        """Every attached suite, once; raises RunFailed if a `fail` expectation did not pass."""
        for pending in self._pending:
            if progress:
                progress(pending.target, "checking", f"{len(pending.specs)} expectation(s)")
            results = check(pending.frame, pending.target, pending.scope, pending.specs)
            self.results += results
            if progress:
                progress(pending.target, "checked", _tally(results))
        self._pending.clear()
        self._stop_if_failed()

    def check_integration(self, spark: SparkSession, step: str, figures: Any, specs: list[ExpectationSpec]) -> None:
        """Expectations over a step's integration figures (one row of _tributary/integration_quality)."""
        specs = [s for s in specs if s.on == "integration"]
        if not specs:
            return
        frame = spark.createDataFrame(figures.to_pandas())
        results = check(frame, step, "integration", specs)
        for result in results:  # one row: the figure itself says more than "0 of 1 rows unexpected"
            column = result.kwargs.get("column")
            if result.observed_value is None and column in figures.column_names:
                result.observed_value = figures.column(column)[0].as_py()
        self.results += results
        self._stop_if_failed()

    def _stop_if_failed(self) -> None:
        blocking = [r for r in self.results if r.blocks_run]
        if blocking:
            shown = "; ".join(f"{r.target}: {_describe(r)}" for r in blocking[:3])
            more = f" (and {len(blocking) - 3} more)" if len(blocking) > 3 else ""
            raise RunFailed(
                f"quality: {len(blocking)} expectation(s) with severity fail did not pass, nothing was committed: {shown}{more}"
            )


def _describe(result: ExpectationResult) -> str:
    args = ", ".join(f"{k}={v}" for k, v in result.kwargs.items())
    if result.error:
        seen = f"error: {result.error}"
    elif result.unexpected_count is not None:
        seen = f"{result.unexpected_count:,} of {result.element_count:,} rows unexpected"
    else:
        seen = f"observed {result.observed_value}"
    return f"{result.expectation}({args}): {seen}"


def _tally(results: list[ExpectationResult]) -> str:
    passed = sum(r.success for r in results)
    return f"{passed}/{len(results)} passed"
