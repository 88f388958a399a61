"""Expectations judged from the pass that writes the rows: GX's metrics as one Spark Observation.

Great Expectations decides an expectation from a few metrics (a column map expectation: the row
count, the null count, the unexpected count; expect_column_mean_to_be_between: the mean). On
Spark, GX computes each domain's metrics as its own aggregation job over rows that must be cached
to be read again, and caching a step costs more than computing it. Here the same metrics are
taken from GX as Spark expressions, resolved on an empty frame (no job):
- `X.unexpected_count`, `X.filtered_row_count`: GX's condition of the map metric X and its
  domain (nulls, ignore_row_if) as a hidden boolean column, counted;
- aggregate metrics (`table.row_count`, `column.mean`, `column.max`, ...): GX's own aggregate;
- `X.unexpected_values`: an empty list (results are counts only; samples are observed apart).
They are observed while the run stages its outputs, then handed back to GX (`metrics_validate`),
so GX still judges, with its own definitions, and the checks cost no pass of their own.

An expectation needing anything else (quantiles, value counts, distinct sets, a row_condition)
is validated by GX itself (framework.quality.suite.check) on the persisted rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from framework.quality.results import ExpectationResult
from framework.quality.suite import SAMPLE_ROWS, EmptyFrame, first_line, gx_expectation, make_result, row_domain

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from framework.spec.expectations import ExpectationSpec

CHECK_PREFIX = "__tributary_check_"
RESULT_FORMAT = {"result_format": "BASIC", "partial_unexpected_count": 0}
_SCHEMA_METRICS = ("table.columns", "table.column_types")  # exact from the schema alone


class NotObservable(Exception):
    """A metric that is not one aggregate over the rows: GX validates the expectation itself."""


@dataclass
class ObservedSuite:
    """The hidden check columns and the Observation aggregates for a list of expectations.

    `observable[i]` maps each metric id expectation i needs to where its value comes from: an
    aggregate's alias in the Observation, or a constant."""

    specs: list[ExpectationSpec]
    checks: dict[str, Column] = field(default_factory=dict)  # hidden column -> GX condition ∧ domain
    aggregates: dict[str, Column] = field(default_factory=dict)  # alias -> aggregate
    observable: dict[int, dict[Any, tuple[str, Any]]] = field(default_factory=dict)
    failing: dict[int, str] = field(default_factory=dict)  # row-level expectation -> its hidden check column
    samples: dict[int, list[str]] = field(default_factory=dict)  # warn/fail row-level -> sample aliases
    errors: dict[int, str] = field(default_factory=dict)  # GX could not even plan it (reported as an error)
    counted_check: dict[str, str] = field(default_factory=dict)  # unexpected-count alias -> the check it counts
    engine: Any = None  # GX's Spark engine (over the empty frame): metrics_validate wants one
    sample_row: Any = None  # the row as JSON, for failing samples
    sample_bucket: Any = None

    @property
    def fallback(self) -> list[int]:
        return [i for i in range(len(self.specs)) if i not in self.observable and i not in self.errors]

    def tag(self, df: DataFrame) -> DataFrame:
        """`df` with the hidden check columns (computed once, read by the Observation and the drops)."""
        return df.withColumns(self.checks) if self.checks else df

    def results(self, observed: dict[str, Any], target: str, scope: str) -> dict[int, ExpectationResult]:
        """GX's verdict on each observable expectation, from the observed metric values."""
        results = {}
        for i, sources in self.observable.items():
            spec = self.specs[i]
            metrics = {mid: observed[value] if kind == "alias" else value for mid, (kind, value) in sources.items()}
            try:
                verdict = gx_expectation(spec).metrics_validate(
                    metrics, runtime_configuration={"result_format": dict(RESULT_FORMAT)}, execution_engine=self.engine
                )
            except Exception as e:  # noqa: BLE001 - GX's own failure is the expectation's result
                verdict, error = None, first_line(e)
            result = make_result(target, scope, spec, verdict)
            if verdict is None:
                result.error = error
            if not result.success and i in self.samples:
                result.failing_samples = _samples([observed[a] for a in self.samples[i]])
            results[i] = result
        for i, message in self.errors.items():
            result = make_result(target, scope, self.specs[i], None)
            result.error = message
            results[i] = result
        return results


def plan(df: DataFrame, specs: list[ExpectationSpec], probe_each: bool = False) -> ObservedSuite:
    """Which expectations the pass can judge, and the columns and aggregates it needs for them.

    Spark is asked once whether it accepts the whole Observation (an analysis, no job); only if it
    refuses is each expectation's part asked on its own, to leave the refused ones to GX."""
    from great_expectations.validator.metric_configuration import MetricConfiguration
    from pyspark.sql import functions as F

    empty = EmptyFrame.like(df)
    suite = ObservedSuite(specs, engine=empty.engine)

    def how(configuration: Any) -> tuple[str, Any]:
        """How a metric is observed, and what GX resolves on the empty frame for it (if anything)."""
        name = configuration.metric_name
        base, _, suffix = name.rpartition(".")
        derived = partial(MetricConfiguration, metric_domain_kwargs=configuration.metric_domain_kwargs)
        if name in _SCHEMA_METRICS:
            return "schema", configuration
        if suffix == "unexpected_values":
            return "no values", None  # results are counts only (partial_unexpected_count 0)
        if suffix in ("unexpected_count", "filtered_row_count") and _registered(f"{base}.condition", empty.engine):
            return suffix, derived(f"{base}.condition", metric_value_kwargs=configuration.metric_value_kwargs)
        if _registered(f"{name}.aggregate_fn", empty.engine):
            return "aggregate", derived(f"{name}.aggregate_fn", metric_value_kwargs=configuration.metric_value_kwargs)
        return "unobservable", None

    # every expectation's metrics, and what GX resolves for them, in one graph
    expectations, needs = {}, {}
    for i, spec in enumerate(specs):
        try:
            expectations[i] = gx_expectation(spec)
            needs[i] = (
                expectations[i]
                .get_validation_dependencies(
                    execution_engine=empty.engine, runtime_configuration={"result_format": dict(RESULT_FORMAT)}
                )
                .get_metric_configurations()
            )
        except Exception as e:  # noqa: BLE001 - reported as the expectation's error, as GX would
            suite.errors[i] = first_line(e)
    hows = {c.id: how(c) for cs in needs.values() for c in cs}
    resolved = empty.resolve(list({r.id: r for _, r in hows.values() if r is not None}.values()))
    by_metric: dict[Any, tuple[str, Any]] = {}  # metric id -> source, shared by the expectations

    def source_of(configuration: Any) -> tuple[str, Any]:
        if configuration.id in by_metric:
            return by_metric[configuration.id]
        kind, resolution = hows[configuration.id]
        if configuration.metric_domain_kwargs.get("row_condition"):
            raise NotObservable(f"{configuration.metric_name} with a row_condition")
        if kind == "unobservable" or (resolution is not None and resolution.id not in resolved):
            raise NotObservable(configuration.metric_name)
        value = resolved[resolution.id] if resolution is not None else None
        if kind == "schema":
            source = ("value", value)
        elif kind == "no values":
            source = ("value", [])
        elif kind == "unexpected_count":
            condition, compute_kwargs, accessor_kwargs = value
            domain = row_domain(compute_kwargs, accessor_kwargs, empty.engine)
            column = _check_column(suite, F.coalesce(condition & domain, F.lit(False)))
            source = _aggregate(suite, F.count_if(F.col(column)))
            suite.counted_check[source[1]] = column
        elif kind == "filtered_row_count":
            _, compute_kwargs, accessor_kwargs = value
            source = _aggregate(
                suite, F.count_if(F.coalesce(row_domain(compute_kwargs, accessor_kwargs, empty.engine), F.lit(False)))
            )
        else:  # aggregate
            aggregate, compute_kwargs, _ = value
            if compute_kwargs.get("filter_conditions") or compute_kwargs.get("row_condition"):
                raise NotObservable(f"{configuration.metric_name} over filtered rows")
            source = _aggregate(suite, aggregate)
        by_metric[configuration.id] = source
        return source

    for i, needed in needs.items():
        spec = specs[i]
        before = (dict(suite.checks), dict(suite.aggregates), dict(by_metric))
        try:
            sources = {c.id: source_of(c) for c in needed}
            if probe_each:  # Spark accepts them in an Observation (no distinct, no window in an aggregate)
                _probe(empty.frame, suite)
        except Exception:  # noqa: BLE001 - anything GX or Spark refuses here is left to GX's own validation
            suite.checks, suite.aggregates, by_metric = before
            continue
        suite.observable[i] = sources
        counted = [c for c in needed if c.metric_name == f"{getattr(expectations[i], 'map_metric', None)}.unexpected_count"]
        if spec.row_level and counted:
            suite.failing[i] = suite.counted_check[sources[counted[0].id][1]]
            if spec.severity != "drop":
                suite.samples[i] = _sample_aggregates(suite, df, suite.failing[i])
    if not probe_each:
        try:
            _probe(empty.frame, suite)
        except Exception:  # noqa: BLE001 - find which expectations Spark refuses
            return plan(df, specs, probe_each=True)
    return suite


def _registered(metric: str, engine: Any) -> bool:
    from great_expectations.expectations.registry import get_metric_provider

    try:
        get_metric_provider(metric, engine)
    except Exception:  # noqa: BLE001 - GX raises several kinds for "no such metric"
        return False
    return True


def _check_column(suite: ObservedSuite, condition: Column) -> str:
    name = f"{CHECK_PREFIX}{len(suite.checks)}"
    suite.checks[name] = condition
    return name


def _aggregate(suite: ObservedSuite, aggregate: Column) -> tuple[str, str]:
    alias = f"m{len(suite.aggregates)}"
    suite.aggregates[alias] = aggregate.alias(alias)
    return ("alias", alias)


def _sample_aggregates(suite: ObservedSuite, df: DataFrame, check: str) -> list[str]:
    """Up to SAMPLE_ROWS failing rows, one per hash bucket: constant memory, no extra pass."""
    from pyspark.sql import functions as F

    if suite.sample_row is None:  # one JSON and one hash expression, shared by every sample
        columns = [F.col(f"`{c}`") for c in df.columns]
        suite.sample_row = F.to_json(F.struct(*columns), {"ignoreNullFields": "false"})
        suite.sample_bucket = F.pmod(F.xxhash64(*columns), F.lit(SAMPLE_ROWS))
    # nested, not `failing & bucket == j`: Spark hoists what an And shares across aggregates and
    # would hash every row; a CASE's value is only computed for the rows that reach it
    failing = F.col(check)
    return [
        _aggregate(suite, F.min(F.when(failing, F.when(suite.sample_bucket == j, suite.sample_row))))[1]
        for j in range(SAMPLE_ROWS)
    ]


def _samples(values: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(v) for v in values if v is not None]


def _probe(empty: DataFrame, suite: ObservedSuite) -> None:
    """Spark's analysis of the Observation on the empty frame: raises if it refuses an aggregate."""
    suite.tag(empty).observe("tributary_probe", *suite.aggregates.values())
