"""The quality gate of a batch run: expectations are attached while the plan is built, judged
once the run has staged its outputs (integration figures: before anything is committed), and a
failing `fail` expectation stops the run with every table at its previous version.

Attaching a suite to a frame (framework.quality.observed):
- the metrics GX needs are observed while the run computes the frame anyway (staging), so most
  suites cost no pass of their own and the frame need not be cached;
- rows failing a `drop` expectation carry a drop mask (`__tributary_drop`, one bit per drop
  expectation): an output that stages the frame directly splits its write on it, so the
  quarantined rows come out of the same pass; a frame read further on is persisted and its
  masked rows are read again for the quarantine. Passed rows + quarantined rows = the frame's rows.
- expectations GX cannot be fed that way are validated by GX itself on the persisted frame;
- a uniqueness check no drop needs is counted after the pass from the key columns of the rows
  as written (the output's staged files, which the run names with `staged`) or cached, instead
  of a window that would sort whole rows in the pass (framework.quality.observed.KeyCount).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from framework.errors import RunFailed
from framework.observations import has_run
from framework.observations import observed as observed_metrics
from framework.quality.observed import ObservedSuite, planned
from framework.quality.results import ExpectationResult
from framework.quality.suite import (
    check,
    drop_mask,
    expectations_from_mask,
    failing_conditions,
    missing_columns,
    reason_from_mask,
)
from framework.spec.expectations import ExpectationSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.io.delta.base import StagedWrite

MASK = "__tributary_drop"
#: the metric of an attached frame's Observation that counts the rows it passes on (no drop
#: expectation masked them): the step's row count, so the step needs no Observation of its own
ROWS = "rows"


@dataclass
class _Pending:
    target: str
    scope: str
    specs: list[ExpectationSpec]
    observed: ObservedSuite
    observation: Any  # the Observation of `frame`, None when nothing is observed
    frame: DataFrame  # the frame as attached (a job over it fires the observation)
    cached: DataFrame | None  # the persisted rows, for the expectations GX validates itself
    base: DataFrame | None = None  # the rows before the checks were attached (recomputed if nothing else holds them)
    staged: StagedWrite | None = None  # the output write that holds exactly these rows (split off ones included)
    #: the observed aggregates as a query over the rows, built only for a job that left the rows out
    recount: Callable[[], DataFrame] | None = None

    @property
    def drops(self) -> list[ExpectationSpec]:
        return [s for s in self.specs if s.severity == "drop"]


class QualityGate:
    def __init__(self) -> None:
        self.results: list[ExpectationResult] = []
        self._pending: list[_Pending] = []

    def attach(
        self,
        target: str,
        scope: str,
        frame: DataFrame,
        specs: list[ExpectationSpec],
        persist: Callable[[DataFrame], DataFrame],
        split: bool = False,
        shared: bool = False,
    ) -> DataFrame:
        """`frame` with its row expectations attached, observed as it is computed; with a MASK
        column (null: the row passed every drop expectation) when there are drop expectations.

        split: one output stages the frame and nothing else reads it, so the output can split its
        write on MASK; otherwise the rows are persisted (`persist`) and the masked ones read again.
        shared: several readers: the rows are persisted whatever the expectations."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        specs = [s for s in specs if s.on == "rows"]
        if not specs:
            return frame
        if frame.isStreaming:  # drop expectations only (the compiler's rule): the mask, nothing observed
            conditions = failing_conditions(frame, specs)
            tagged = frame.withColumn(MASK, drop_mask([conditions[s.label] for s in specs]))
            self._pending.append(_Pending(target, scope, specs, ObservedSuite(specs), None, tagged, None))
            return tagged
        drops = [i for i, s in enumerate(specs) if s.severity == "drop"]
        observed = planned(frame, specs, keys_after=bool(split or shared or drops))  # the rows are written or cached
        cached = persist(frame) if shared or observed.fallback or (drops and not split) else None
        base = cached if cached is not None else frame
        tagged = observed.tag(base)
        hidden = list(observed.checks)
        aggregates = observed.observation()
        if drops:
            unplanned = [specs[i] for i in drops if i not in observed.failing]  # left to GX: its condition alone
            conditions = failing_conditions(base, unplanned) if unplanned else {}
            failing = [F.col(observed.failing[i]) if i in observed.failing else conditions[specs[i].label] for i in drops]
            tagged = tagged.withColumn(MASK, drop_mask(failing))
            aggregates.append(F.count_if(F.col(MASK).isNotNull()).alias("rejected"))
        observation, recount = None, None
        if aggregates:
            aggregates.append((F.count_if(F.col(MASK).isNull()) if drops else F.count(F.lit(1))).alias(ROWS))
            observation = Observation(f"tributary_quality_{scope}_{target}_{len(self._pending)}")
            recount = partial(tagged.agg, *aggregates)  # built when needed: analysing a plan costs
            tagged = tagged.observe(observation, *aggregates)
        tagged = tagged.drop(*hidden) if hidden else tagged
        self._pending.append(_Pending(target, scope, specs, observed, observation, tagged, cached, base, recount=recount))
        return tagged

    def staged(self, target: str, scope: str, write: StagedWrite) -> None:
        """The output write that holds the checked rows of (target, scope) as they are: the
        uniqueness counts are read from its key columns (nothing is recomputed)."""
        for pending in self._pending:
            if (pending.target, pending.scope) == (target, scope):
                pending.staged = write

    def quarantined(self, target: str, scope: str, rows: DataFrame) -> DataFrame:
        """Rows with a MASK as quarantine rows: the reason rebuilt from the mask and the row's values,
        and the expectations alone (what the quarantine is grouped by)."""
        from pyspark.sql import functions as F

        from framework.operators import EXPECTATION, REASON

        pending = next(p for p in self._pending if (p.target, p.scope) == (target, scope))
        failed = {
            REASON: reason_from_mask(pending.drops, F.col(MASK)),
            EXPECTATION: expectations_from_mask(pending.drops, F.col(MASK)),
        }
        return rows.withColumns(failed).drop(MASK)

    def observation(self, target: str, scope: str) -> Any:
        """The Observation of an attached frame (its `rejected` metric counts the masked rows, its
        ROWS metric the others); None when nothing is observed or nothing was attached."""
        return next((p.observation for p in self._pending if (p.target, p.scope) == (target, scope)), None)

    @staticmethod
    def missing(frame: DataFrame, specs: list[ExpectationSpec]) -> list[tuple[int, ExpectationSpec, list[str]]]:
        """Expectations naming columns the frame does not have (index in the spec, spec, columns)."""
        found = []
        for i, spec in enumerate(specs):
            if spec.on == "rows" and (absent := missing_columns(frame, spec)):
                found.append((i, spec, absent))
        return found

    def check_rows(self, progress: Any = None) -> None:
        """Every attached suite, once its frame has been computed (the run stages first); raises
        RunFailed if a `fail` expectation did not pass."""
        for pending in self._pending:
            if progress:
                progress(pending.target, "checking", f"{len(pending.specs)} expectation(s)")
            results = self._judge(pending)
            self.results += results
            if progress:
                progress(pending.target, "checked", _tally(results))
        self._stop_if_failed()

    @staticmethod
    def _judge(pending: _Pending) -> list[ExpectationResult]:
        by_index: dict[int, ExpectationResult] = {}
        observed: dict[str, Any] = {}
        if pending.observation is not None:
            if not has_run(pending.observation):
                # nothing computed the frame (e.g. its output was already written by an identical run)
                pending.frame.write.format("noop").mode("overwrite").save()
            metrics = observed_metrics(pending.observation)
            if metrics is None and pending.recount is not None:  # Spark left the (empty) rows out of the job
                metrics = pending.recount().collect()[0].asDict()
            observed |= metrics or {}
        every_column = list(pending.base.columns) if pending.base is not None else []
        observed = pending.observed.unpacked(observed, rows=lambda: _checked_rows(pending, every_column))
        repeated: dict[str, list[int]] = {}  # the repeated key hashes, for a failed uniqueness check's samples
        key_samples: dict[str, list[dict[str, Any]]] | None = None
        check_samples: dict[int, list[dict[str, Any]]] | None = None
        if pending.observed.key_counts:
            keys = [c for how in pending.observed.key_counts.values() for c in how.columns]
            if _reads_staged(pending, keys) == _reads_staged(pending, every_column):
                key_samples, check_samples = {}, {}  # the same rows hold the keys and the samples: taken with the counts
            rows = _checked_rows(pending, keys)
            observed |= pending.observed.count_keys(
                rows,
                repeated,
                _checked_count(pending, keys),
                key_samples,
                checks=pending.observed.failing_rows(observed),
                check_samples=check_samples,
            )
        if pending.observed.observable or pending.observed.errors:
            by_index |= pending.observed.results(
                observed,
                pending.target,
                pending.scope,
                rows=lambda: _checked_rows(pending, every_column),
                repeated=repeated,
                key_samples=key_samples,
                check_samples=check_samples,
            )
        fallback = pending.observed.fallback
        if fallback:
            assert pending.cached is not None
            validated = check(pending.cached, pending.target, pending.scope, [pending.specs[i] for i in fallback])
            by_index |= dict(zip(fallback, validated, strict=True))
        return [by_index[i] for i in range(len(pending.specs))]

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


def _checked_rows(pending: _Pending, columns: list[str]) -> DataFrame:
    """The rows a suite checked, with `columns` as computed: cached, else read back from the output's
    staged files (only the columns asked for are read), else computed again (e.g. an identical
    rerun skipped the write)."""
    if pending.cached is not None:
        return pending.cached
    if _reads_staged(pending, columns):
        assert pending.staged is not None
        return _staged_rows(pending.frame.sparkSession, pending.staged)
    assert pending.base is not None
    return pending.base


def _reads_staged(pending: _Pending, columns: list[str]) -> bool:
    """`_checked_rows` reads these columns from the output's staged files."""
    return pending.cached is None and pending.staged is not None and _holds(pending.staged, columns)


def _checked_count(pending: _Pending, columns: list[str]) -> int | None:
    """How many rows `_checked_rows` gives, when known without a job (a staged write's count)."""
    if _reads_staged(pending, columns):
        assert pending.staged is not None
        return pending.staged.rows + pending.staged.split_rows
    return None


def _holds(write: StagedWrite, columns: list[str]) -> bool:
    """The staged files hold these columns' values as the rows had them (a partition column's
    value went through a folder name: an empty string comes back null)."""
    names = set(write.schema.names)
    return all(c in names and c not in write.partition_by for c in columns)


def _staged_rows(spark: SparkSession, write: StagedWrite) -> DataFrame:
    """Every row of a staged write, the rows its split set aside included."""
    from pyspark.sql.types import LongType, StructField, StructType

    if write.rows + write.split_rows == 0:
        return spark.createDataFrame([], write.schema)
    if write.split_by and write.split_off:
        schema = StructType([*write.schema.fields, StructField(write.split_by, LongType())])
        return spark.read.schema(schema).option("basePath", write.split_off).parquet(write.split_off)
    reader = spark.read.schema(write.schema)
    if write.partition_by:
        reader = reader.option("basePath", write.staging)
    return reader.parquet(write.staging)


def _describe(result: ExpectationResult) -> str:
    args = ", ".join(f"{k}={v}" for k, v in result.kwargs.items())
    if result.error:
        seen = f"error: {result.error}"
    elif result.unexpected_count is not None:
        of = f" of {result.element_count:,}" if result.element_count is not None else ""
        seen = f"{result.unexpected_count:,}{of} rows unexpected"
    else:
        seen = f"observed {result.observed_value}"
    return f"{result.expectation}({args}): {seen}"


def _tally(results: list[ExpectationResult]) -> str:
    passed = sum(r.success for r in results)
    return f"{passed}/{len(results)} passed"
