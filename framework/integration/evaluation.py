"""Integration quality of `swa:` and `tumbling:` steps that declare `truth:` (ground-truth columns).

The step's tuples are assigned to units the same way the step assigns them (its kind's `units` in
the step-kind registry), then measured with framework.integration.metrics. A unit is open from its first tuple until it closes: an SWA window
closed by count at its n-th tuple, by timeout (or end of input) at s + t; a tumbling window's key
groups from the window's first to its last tuple (the whole window is held until then).

Figures go to <warehouse>/_tributary/integration_quality, one row per step per run, so quality
suites can put thresholds on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from framework.integration.metrics import IntegrationMetrics, integration_metrics
from framework.operators import StepContext, kind_of
from framework.operators.columns import field_of, quoted
from framework.operators.keyed_windows import UNIT, checked_input
from framework.operators.window_sizes import with_sizes
from framework.spec.steps import StepSpec

if TYPE_CHECKING:
    from framework.io.delta.base import DeltaStore


@dataclass(frozen=True)
class StepEvaluation:
    step: str
    operator: str  # swa | tumbling
    strategy: str
    size: int | str  # auto: learned per head
    timeout_s: float | str | None
    metrics: IntegrationMetrics

    @property
    def label(self) -> str:
        if self.timeout_s is not None:
            timeout = self.timeout_s if isinstance(self.timeout_s, str) else f"{self.timeout_s:g}s"
            return f"{self.step}: swa {self.strategy} {self.size}/{timeout}"
        return f"{self.step}: tumbling {self.strategy} W={self.size}"


def evaluable(step: StepSpec | None) -> bool:
    """Whether the step's kind can be measured (framework.operators.registry) and it declares truth."""
    return step is not None and kind_of(step).evaluable(step)


def evaluate_step(context: StepContext) -> StepEvaluation:
    """Measure one step on its (static) input: the same units the step emits, with ground truth."""
    from pyspark.sql import functions as F

    kind = kind_of(context.spec)
    spec = kind.settings(context.spec)
    probe = StepContext(context.spark, context.name, context.spec, context.inputs)  # its own quarantine list
    rows = checked_input(probe)
    if getattr(spec, "learns", False):  # size: auto: the run's learned sizes, as the step used them
        rows = with_sizes(rows, spec, context.sizes)
    keys = [field_of(rows, c).name for c in spec.key_columns()]
    assert kind.units is not None
    units, opened, closed = kind.units(rows, spec)
    rejected = probe.rejected[0].rows if probe.rejected else None
    # measured with several aggregations: computed once, not once per aggregation
    measured = units.select(
        *[F.col(quoted(c)) for c in dict.fromkeys([*keys, spec.truth.instance, spec.truth.primary, spec.event_time])],
        F.col(UNIT),
        F.timestamp_micros(opened).alias("__opened"),
        F.timestamp_micros(closed).alias("__closed"),
    ).persist()
    metrics = integration_metrics(
        measured,
        unit=[*keys, UNIT],
        instance=field_of(rows, spec.truth.instance).name,
        primary=field_of(rows, spec.truth.primary).name,
        event_time=field_of(rows, spec.event_time).name,
        opened_at="__opened",
        closed_at="__closed",
        lost=rejected,
    )
    measured.unpersist()
    timeout = getattr(spec, "timeout", None)
    return StepEvaluation(context.name, context.spec.kind, spec.key_label(), spec.size, timeout, metrics)


def metrics_rows(evaluations: list[StepEvaluation], run_id: str, pipeline: str) -> pa.Table:
    """One row per step for the integration quality table."""
    now = datetime.now(UTC)
    records = [
        {
            "run_id": run_id,
            "pipeline": pipeline,
            "step": e.step,
            "operator": e.operator,
            "strategy": e.strategy,
            "size": e.size if isinstance(e.size, int) else None,  # null: learned per head (size: auto)
            "timeout_s": e.timeout_s if not isinstance(e.timeout_s, str) else None,
            **{k: v for k, v in e.metrics.as_row().items()},
            "evaluated_at": now,
        }
        for e in evaluations
    ]
    fields = [pa.field(name, pa.string()) for name in ("run_id", "pipeline", "step", "operator", "strategy")] + [
        pa.field("size", pa.int64()),
        pa.field("timeout_s", pa.float64()),
    ]
    for name, value in evaluations[0].metrics.as_row().items():
        fields.append(pa.field(name, pa.int64() if isinstance(value, int) else pa.float64()))
    fields.append(pa.field("evaluated_at", pa.timestamp("us", tz="UTC")))
    return pa.Table.from_pylist(records, schema=pa.schema(fields))


def record(store: DeltaStore, table: str, evaluations: list[StepEvaluation], run_id: str, pipeline: str) -> None:
    if evaluations:
        store.append_rows(table, metrics_rows(evaluations, run_id, pipeline))
