"""Drop expectations on streams, judged row by row in each micro-batch.

A streaming run cannot judge a step's rows after the fact as a batch run does, and checks over
the whole table (a row count, a mean) or a `fail` mean nothing for one micro-batch, so streaming
pipelines take row-level `drop` expectations only (the compiler says so for the rest). Each is
Great Expectations' own condition for an unexpected row (framework.quality.suite.failing_conditions),
resolved once on the step's columns without a Spark job; a row failing any of them carries a drop
mask, one bit per expectation, as in batch (framework.quality.gate).

Where the rows are split:
- in the output's sink, for the output's own expectations, for those of the step it writes when
  it is that step's only reader, and for a step that runs per micro-batch (SWA, count join,
  group: its rows only exist there): passing rows go to the table and failing rows to the
  quarantine in the same exactly-once batch (framework.io.stream_sink.SplitRows);
- in the stream itself, for a step other steps read: its refused rows leave the stream there,
  and a quarantine query of their own (reading the step's inputs once more) writes them.

Counts per expectation are summed over the batches this run committed and go to the quality log
like a batch run's results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from framework.io.stream_sink import SplitRows
from framework.operators.context import EXPECTATION, REASON, quarantine_records, quarantine_shape
from framework.operators.micro_batch import QUARANTINE
from framework.quality.gate import MASK
from framework.quality.results import ExpectationResult
from framework.quality.suite import drop_mask, expectations_from_mask, failing_conditions, reason_from_mask, threshold_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.operators.micro_batch import MicroBatchOperator
    from framework.spec.expectations import ExpectationSpec


@dataclass
class BatchCheck:
    """The drop expectations of one step or output, applied to micro-batches, with their counts."""

    target: str
    scope: str  # framework.plan.model.CheckScope
    specs: list[ExpectationSpec]
    run_id: str
    pipeline: str
    record: bool = True  # False: another output's sink records the same refused rows
    conditions: list[Any] = field(default_factory=list)  # per spec: GX's condition (a Column)
    rows: int | None = 0  # rows judged (None: only the refused rows are seen)
    refused: list[int] = field(default_factory=list)  # per spec: rows that failed it

    @classmethod
    def on(
        cls, columns: DataFrame, target: str, scope: str, specs: list[ExpectationSpec], run_id: str, pipeline: str
    ) -> BatchCheck:
        """The check of `specs` (drop expectations) on rows with the columns of `columns`."""
        conditions = failing_conditions(columns, specs)
        return cls(target, scope, specs, run_id, pipeline, conditions=[conditions[s.label] for s in specs])

    @property
    def quarantined(self) -> int:
        """Rows this check sent to the quarantine in this run."""
        return sum(self.refused) if self.record else 0

    def split(self, rows: DataFrame) -> tuple[DataFrame, DataFrame]:
        """(passing rows, failing rows as quarantine records) of a batch the caller persisted; the
        counts are taken with one aggregate over it."""
        from pyspark.sql import functions as F

        tagged = rows if MASK in rows.columns else rows.withColumn(MASK, drop_mask(self.conditions))
        self._count(tagged)
        failing = tagged.where(F.col(MASK).isNotNull())
        return tagged.where(F.col(MASK).isNull()).drop(MASK), self.quarantine_rows(failing)

    def quarantine_rows(self, failing: DataFrame) -> DataFrame:
        """Rows with a drop mask as quarantine records, the reason rebuilt from the mask."""
        from pyspark.sql import functions as F

        mask = F.col(MASK)
        failed = {REASON: reason_from_mask(self.specs, mask), EXPECTATION: expectations_from_mask(self.specs, mask)}
        reasoned = failing.withColumns(failed).drop(MASK)
        return quarantine_records(quarantine_shape(reasoned, self.target), self.run_id, self.pipeline)

    def _count(self, tagged: DataFrame) -> None:
        from pyspark.sql import functions as F

        bits = [F.count_if(F.col(MASK).bitwiseAND(F.lit(1 << k).cast("long")) != 0) for k in range(len(self.specs))]
        counted = tagged.agg(F.count(F.lit(1)), *bits).first()
        assert counted is not None  # an aggregate has one row
        if self.rows is not None:
            self.rows += int(counted[0])
        if not self.refused:
            self.refused = [0] * len(self.specs)
        self.refused = [n + int(counted[k + 1]) for k, n in enumerate(self.refused)]

    def results(self) -> list[ExpectationResult]:
        """One result per expectation over the run's committed batches."""
        refused = self.refused or [0] * len(self.specs)
        return [
            ExpectationResult(
                self.target,
                self.scope,
                spec.name,
                dict(spec.kwargs),
                spec.severity,
                success=n == 0,
                meta=dict(spec.meta),
                element_count=self.rows,
                unexpected_count=n,
                unexpected_percent=(100.0 * n / self.rows) if self.rows else None,
                quarantined=n if self.record else 0,
                threshold=threshold_text(spec),
            )
            for spec, n in zip(self.specs, refused, strict=True)
        ]


@dataclass
class CheckedBatches:
    """The `prepare` of an output's sink whose rows drop expectations judge: the step's operator
    first when it runs per micro-batch, then each check in turn; refused rows join the operator's
    own quarantine rows."""

    checks: list[BatchCheck]
    operator: MicroBatchOperator | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> SplitRows:
        side: dict[str, DataFrame] = {}
        rows = batch
        if self.operator is not None:
            written = self.operator(batch, batch_id)
            side = dict(written.side)
            rows = batch.sparkSession.read.schema(written.schema).parquet(written.folder)
        persisted = rows.persist()
        rows = persisted
        for check in self.checks:
            rows, refused = check.split(rows)
            if check.record:
                side[QUARANTINE] = side[QUARANTINE].unionByName(refused) if QUARANTINE in side else refused
        return SplitRows(rows, side, release=persisted.unpersist)


@dataclass
class RefusedRows:
    """The `prepare` of the quarantine query of a step whose refused rows left the stream: its
    batches hold only rows with a drop mask."""

    check: BatchCheck

    def __call__(self, batch: DataFrame, batch_id: int) -> SplitRows:
        persisted = batch.persist()
        _, refused = self.check.split(persisted)
        return SplitRows(refused, release=persisted.unpersist)
