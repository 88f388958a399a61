"""Running a list of expectations on a Spark DataFrame with Great Expectations (GX).

- One ephemeral GX context per process, made on first use, with its progress bars off and its
  Spark data source told not to persist DataFrames (it never unpersists them). The runner persists
  a checked frame itself, once, and unpersists it at the end of the run.
- Validation asks for counts only (BASIC results with no unexpected-value lists); a few failing
  rows are fetched only for expectations that failed.
- Rows are dropped by GX's own definition of "unexpected": the Spark condition of the
  expectation's map metric and the domain's row filters, applied in the same pass that feeds the
  next step, so no index lists ever reach the driver.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem
from framework.quality.results import ExpectationResult
from framework.spec.expectation_catalog import COLUMN_ARGS, catalog
from framework.spec.expectations import ExpectationSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SAMPLE_ROWS = 5

_context: Any = None
_batch_definition: Any = None
_making = threading.Lock()  # runs side by side (backfill --parallel, tributary test) make it once


def gx_batch_definition() -> Any:
    """The process's one GX context (ephemeral), reduced to what is used: a whole-DataFrame batch."""
    global _context, _batch_definition
    with _making:
        if _batch_definition is None:
            _context, _batch_definition = _made()
    return _batch_definition


def _made() -> tuple[Any, Any]:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    source = context.data_sources.add_spark(name="tributary", persist=False)
    return context, source.add_dataframe_asset(name="frame").add_batch_definition_whole_dataframe("whole")


def gx_expectation(spec: ExpectationSpec) -> Any:
    import great_expectations.expectations as gxe

    cls = getattr(gxe, catalog()[spec.name]["class"])
    try:
        return cls(**spec.kwargs)
    except ValueError as e:  # pydantic's ValidationError (v1 in GX): every error, whole
        raise BadInput(
            Problem(
                f"{spec.name}: Great Expectations refuses its arguments: {_errors(e)}",
                hint="fix the arguments in the expectation (`tributary validate` says where it is)",
            )
        ) from None


def _errors(error: ValueError) -> str:
    """A pydantic error's every line as one text: `field: message` per error, a field's
    alternatives (GX also takes a parameter object for most numbers) after 'or'."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return str(error)
    by_field: dict[str, list[str]] = {}
    for one in errors():
        field = ".".join(str(part) for part in one.get("loc", ())) or "arguments"
        by_field.setdefault(field, []).append(str(one.get("msg", "")))
    return "; ".join(f"{field}: {' (or: '.join(said)}{')' * (len(said) - 1)}" for field, said in by_field.items())


def missing_columns(df: DataFrame, spec: ExpectationSpec) -> list[str]:
    present = {c.lower() for c in df.columns}
    return [c for c in spec.columns() if c.lower() not in present]


def check(df: DataFrame, target: str, scope: str, specs: list[ExpectationSpec]) -> list[ExpectationResult]:
    """Validate `df` against `specs` in one GX run; failing samples only for what failed."""
    import great_expectations as gx

    batch = gx_batch_definition().get_batch(batch_parameters={"dataframe": df})  # the context first
    suite = gx.ExpectationSuite(name=f"tributary.{target}.{scope}")
    for i, spec in enumerate(specs):
        expectation = gx_expectation(spec)
        expectation.meta = {"tributary_index": i}
        suite.add_expectation(expectation)
    outcome = batch.validate(suite, result_format={"result_format": "BASIC", "partial_unexpected_count": 0})
    # GX returns results in its own order: match them back by the index put in their meta.
    by_index = {(r.expectation_config.meta or {}).get("tributary_index"): r for r in outcome.results}
    results = [make_result(target, scope, spec, by_index.get(i)) for i, spec in enumerate(specs)]
    # drop expectations' failing rows are in the quarantine table already, with their reason
    failed_rows = [
        (spec, r)
        for spec, r in zip(specs, results, strict=True)
        if spec.row_level and spec.severity != "drop" and not r.success and r.unexpected_count
    ]
    if failed_rows:
        conditions = failing_conditions(df, [spec for spec, _ in failed_rows])
        for spec, result in failed_rows:
            failing = df.withColumn("__tributary_failing", conditions[spec.label])  # a window condition cannot be a filter
            rows = failing.where("__tributary_failing").select(_row_json(df)).limit(SAMPLE_ROWS).collect()
            result.failing_samples = [json.loads(row[0]) for row in rows]
    return results


def first_line(error: BaseException) -> str:
    """An error as one line of a result (its message's first line, or its type)."""
    text = str(error)
    return text.splitlines()[0] if text.strip() else type(error).__name__


def make_result(target: str, scope: str, spec: ExpectationSpec, gx_result: Any) -> ExpectationResult:
    result = ExpectationResult(
        target=target,
        scope=scope,
        expectation=spec.name,
        kwargs=dict(spec.kwargs),
        severity=spec.severity,
        success=False,
        meta=dict(spec.meta),
        threshold=threshold_text(spec),
    )
    if gx_result is None:
        result.error = "Great Expectations returned no result for this expectation"
        return result
    info = gx_result.exception_info or {}
    # GX reports an error either at the top level or keyed by the metric that raised it
    entries = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    raised = next((e for e in entries if e.get("raised_exception")), None)
    if raised:
        result.error = str(raised.get("exception_message") or "the expectation raised an error").splitlines()[0]
        return result
    figures = gx_result.result or {}
    result.success = bool(gx_result.success)
    result.element_count = figures.get("element_count")
    result.unexpected_count = figures.get("unexpected_count")
    result.unexpected_percent = figures.get("unexpected_percent")
    result.observed_value = _plain(figures.get("observed_value"))
    if spec.severity == "drop":
        result.quarantined = result.unexpected_count or 0
    return result


def threshold_text(spec: ExpectationSpec) -> str:
    """What success needs, from the expectation's own arguments (its columns left out)."""
    return ", ".join(f"{k}={_short(v)}" for k, v in spec.kwargs.items() if k not in COLUMN_ARGS)


def failing_conditions(df: DataFrame, specs: list[ExpectationSpec]) -> dict[str, Column]:
    """Per row-level expectation, a boolean Column: true exactly for the rows GX counts as unexpected.

    GX builds the condition of the expectation's map metric (e.g. `column_values.between.condition`)
    and the domain's row filters (nulls ignored, ignore_row_if, row_condition); both are resolved
    on an empty frame, so no Spark job runs here."""
    from great_expectations.validator.metric_configuration import MetricConfiguration
    from pyspark.sql import functions as F

    empty = EmptyFrame.like(df)
    wanted: dict[str, MetricConfiguration] = {}
    for spec in specs:
        expectation = gx_expectation(spec)
        counted = expectation.get_validation_dependencies(execution_engine=empty.engine).get_metric_configuration(
            f"{expectation.map_metric}.unexpected_count"
        )
        wanted[spec.label] = MetricConfiguration(
            f"{expectation.map_metric}.condition",
            metric_domain_kwargs=counted.metric_domain_kwargs,
            metric_value_kwargs=counted.metric_value_kwargs,
        )
    values = empty.resolve(list(wanted.values()))
    conditions = {}
    for label, configuration in wanted.items():
        condition, compute_kwargs, accessor_kwargs = values[configuration.id]
        conditions[label] = F.coalesce(condition & row_domain(compute_kwargs, accessor_kwargs, empty.engine), F.lit(False))
    return conditions


@dataclass(frozen=True)
class EmptyFrame:
    """An empty frame of a frame's columns, as a GX batch: GX builds its metrics' Spark
    expressions there without touching the rows.

    Not linked to the frame's plan: a job over df.limit(0) would finish df's Observations with no
    metrics (source bad-record counts, step row counts)."""

    frame: DataFrame
    engine: Any
    validator: Any

    @classmethod
    def like(cls, df: DataFrame) -> EmptyFrame:
        from great_expectations.validator.validator import Validator

        empty = df.sparkSession.createDataFrame([], df.schema)
        batch = gx_batch_definition().get_batch(batch_parameters={"dataframe": empty})
        engine = batch.data.execution_engine
        return cls(empty, engine, Validator(execution_engine=engine, batches=[batch], data_context=_context))

    def resolve(self, configurations: list[Any]) -> dict[Any, Any]:
        """GX's values of `configurations` here (those it could resolve), without a Spark job.

        Every map metric depends on the table's row count, which GX would count with a Spark job;
        here it is 0, so it is given. (ValidationGraph.resolve takes no known metrics; its inner
        `_resolve` does. tests/test_quality.py checks that planning runs no Spark job.)"""
        if not configurations:
            return {}
        graph = self.validator.metrics_calculator.build_metric_dependency_graph(metric_configurations=configurations)
        known: dict[Any, Any] = {}
        for edge in graph.edges:
            for configuration in (edge.left, edge.right):
                if configuration is not None and configuration.metric_name == "table.row_count":
                    known[configuration.id] = 0
        graph._resolve(metrics=known, show_progress_bars=False)  # see above
        return known


def row_domain(compute_kwargs: dict[str, Any], accessor_kwargs: dict[str, Any], engine: Any = None) -> Column:
    """The rows an expectation looks at: GX's row_condition, filter_conditions and ignore_row_if."""
    from pyspark.sql import functions as F

    parts = [F.lit(True)]
    if compute_kwargs.get("row_condition"):
        parts.append(_row_condition(compute_kwargs["row_condition"], compute_kwargs.get("condition_parser"), engine))
    for row_condition in compute_kwargs.get("filter_conditions") or []:
        parts.append(F.expr(getattr(row_condition, "condition", str(row_condition))))
    ignore = compute_kwargs.get("ignore_row_if")
    columns = [accessor_kwargs[k] for k in ("column_A", "column_B") if k in accessor_kwargs]
    columns += list(accessor_kwargs.get("column_list") or [])
    if ignore and columns:
        nulls = [F.col(f"`{c}`").isNull() for c in columns]
        if ignore in ("both_values_are_missing", "all_values_are_missing"):
            parts.append(~reduce(lambda a, b: a & b, nulls))
        elif ignore in ("either_value_is_missing", "any_value_is_missing"):
            parts.append(~reduce(lambda a, b: a | b, nulls))
    return reduce(lambda a, b: a & b, parts)


def _row_condition(condition: Any, parser: str | None, engine: Any) -> Column:
    """A row_condition as a Spark Column, the way GX's Spark engine reads it (its forms differ by
    how it was written: a pass-through Spark filter, a GX Condition, or a string and a parser)."""
    from great_expectations.expectations.row_conditions import Condition, PassThroughCondition, deserialize_row_condition
    from pyspark.sql import functions as F

    if isinstance(condition, dict):
        condition = deserialize_row_condition(condition)
    if isinstance(condition, PassThroughCondition):
        return F.expr(condition.pass_through_filter)
    if isinstance(condition, Condition) and engine is not None:
        return engine.condition_to_filter_clause(condition)
    if isinstance(condition, str) and parser == "spark":
        return F.expr(condition)
    if isinstance(condition, str):
        from great_expectations.expectations.legacy_row_conditions import parse_condition_to_spark

        return parse_condition_to_spark(condition)
    raise ValueError(f"row_condition {condition!r} is not one Tributary can apply")


def drop_mask(failing: list[Column]) -> Column:
    """Which `drop` expectations a row fails, as bits (expectation k: bit k); null when none.

    A small integer that the quarantine reason is rebuilt from (`reason_from_mask`), so a staged
    write can be split on it (the folder name holds it) without carrying the reason's text."""
    from pyspark.sql import functions as F

    bits = reduce(
        lambda a, b: a + b,
        [F.when(c, F.lit(1 << k).cast("long")).otherwise(F.lit(0).cast("long")) for k, c in enumerate(failing)],
    )
    return F.when(bits != 0, bits)


def reason_from_mask(specs: list[ExpectationSpec], mask: Column) -> Column:
    """The quarantine reason of a row from its drop mask: each failed expectation with the row's values."""
    from pyspark.sql import functions as F

    reasons = []
    for k, spec in enumerate(specs):
        shown = [F.concat(F.lit(f"{c}="), _shown_value(F.col(f"`{c}`").cast("string"))) for c in spec.columns()]
        text = F.concat_ws(" ", F.lit(f"{spec.label}:"), *shown) if shown else F.lit(spec.label)
        reasons.append(F.when(mask.bitwiseAND(F.lit(1 << k).cast("long")) != 0, text))
    return F.when(mask.isNotNull(), F.concat_ws("; ", *reasons))


#: A value longer than this is cut in a quarantine reason: the row's `record` holds it whole.
SHOWN_CHARS = 200


def _shown_value(text: Column) -> Column:
    """A value as the reason shows it: null as `null`, a long one cut with its length said."""
    from pyspark.sql import functions as F

    long = F.concat(F.substring(text, 1, SHOWN_CHARS), F.lit("… ("), F.length(text).cast("string"), F.lit(" characters)"))
    return F.when(text.isNull(), F.lit("null")).when(F.length(text) > SHOWN_CHARS, long).otherwise(text)


def expectations_from_mask(specs: list[ExpectationSpec], mask: Column) -> Column:
    """The expectations a row failed, from its drop mask, without the row's values: what the
    quarantine groups its rows by (the reason, with the values, differs row by row)."""
    from pyspark.sql import functions as F

    labels = [F.when(mask.bitwiseAND(F.lit(1 << k).cast("long")) != 0, F.lit(spec.label)) for k, spec in enumerate(specs)]
    return F.when(mask.isNotNull(), F.concat_ws("; ", *labels))


def _row_json(df: DataFrame) -> Column:
    from pyspark.sql import functions as F

    return F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns]), {"ignoreNullFields": "false"})


def _plain(value: Any) -> Any:
    """GX observed values may be numpy scalars or Decimals: make them JSON-friendly."""
    try:
        json.dumps(value)
        return value
    except TypeError:
        if hasattr(value, "item"):
            return value.item()
        if isinstance(value, (list, tuple)):
            return [_plain(v) for v in value]
        if isinstance(value, dict):
            return {str(k): _plain(v) for k, v in value.items()}
        return str(value)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."
