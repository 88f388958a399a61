"""Node count for a windowed join, after Liu et al. (§IV.A, formulas (2)-(8)).

A node holding a window slice of k tuples must compare each arriving tuple with k tuples of the
other stream before the next one arrives: k ≤ 1 / (2·Δt·max(N_A, N_B)). Windows of K_A and K_B
tuples therefore need n = max(K_A, K_B)·Δt·2·max(N_A, N_B) nodes. Δt (time to compare one pair)
is measured here on the real inputs; N_A, N_B are their event-time arrival rates; for a time
window K = N × window length, for a count window K = W.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.spec.steps import JoinSpec

#: the steps this model is for: their kind's registry entry says StateModel.JOIN_NODES


@dataclass
class JoinCapacity:
    step: str
    rate_a: float  # N_A, tuples per second of event time
    rate_b: float
    window_a: float  # K_A, tuples
    window_b: float
    pair_seconds: float  # Δt
    observed: dict[str, Any] = field(default_factory=dict)

    @property
    def nodes(self) -> float:
        return max(self.window_a, self.window_b) * self.pair_seconds * 2 * max(self.rate_a, self.rate_b)

    @property
    def slice_tuples(self) -> float:
        """k: the largest window slice one node keeps up with."""
        return 1 / (2 * self.pair_seconds * max(self.rate_a, self.rate_b))

    def rows(self) -> list[tuple[str, str, str]]:
        o = self.observed
        return [
            ("arrival rate N_A, N_B (tuples/s)", f"{self.rate_a:,.2f}, {self.rate_b:,.2f}", ""),
            ("window K_A, K_B (tuples)", f"{self.window_a:,.1f}, {self.window_b:,.1f}", ""),
            ("Δt per pair compared", f"{self.pair_seconds * 1e9:,.1f} ns", ""),
            ("slice per node k = 1/(2·Δt·max N)", f"{self.slice_tuples:,.0f} tuples", ""),
            (
                "nodes n = max(K)·Δt·2·max(N)",
                f"{self.nodes:.6f} → {max(1, math.ceil(self.nodes))}",
                f"{o.get('executors', '–')} executor slots used",
            ),
            (
                "state rows (streaming)",
                f"≤ {self.window_a + self.window_b:,.0f} expected in windows",
                f"{o.get('state_rows_peak', '–')} peak in the last run",
            ),
            ("throughput", "", f"{o.get('processed_rows_per_s', '–')} rows/s in the last run"),
        ]


def measure_join(
    spark: SparkSession, step_name: str, spec: JoinSpec, inputs: dict[str, DataFrame], sample: int = 1500
) -> JoinCapacity:
    """`spec`: the step's `join:` settings."""
    from pyspark.sql import functions as F

    left, right = inputs[spec.left], inputs[spec.right]
    rates = []
    for frame, column in ((left, spec.left_event_time), (right, spec.right_event_time)):
        row = frame.agg(F.count(F.lit(1)).alias("n"), F.min(column).alias("lo"), F.max(column).alias("hi")).first()
        assert row is not None  # an aggregate has one row
        span = (row["hi"] - row["lo"]).total_seconds() if row["n"] and row["hi"] and row["lo"] else 0.0
        rates.append(row["n"] / span if span > 0 else float(row["n"]))
    if spec.last is not None:
        windows = (float(spec.last.left), float(spec.last.right))
    else:
        length = spec.within.before + spec.within.after  # type: ignore[union-attr]
        windows = (rates[0] * length, rates[1] * length)
    return JoinCapacity(step_name, rates[0], rates[1], windows[0], windows[1], _pair_seconds(left, right, spec, sample))


def _pair_seconds(left: DataFrame, right: DataFrame, spec: Any, sample: int) -> float:
    """Time to compare one pair: a nested-loop comparison of samples, divided by the pairs."""
    from pyspark.sql import functions as F

    a = left.select(*[F.col(k).alias(f"a_{k}") for k in spec.on], F.col(spec.left_event_time).alias("a_ts")).limit(sample).cache()
    b = (
        right.select(*[F.col(k).alias(f"b_{k}") for k in spec.on], F.col(spec.right_event_time).alias("b_ts"))
        .limit(sample)
        .cache()
    )
    n_a, n_b = a.count(), b.count()
    condition = F.lit(True)
    for k in spec.on:
        condition = condition & (F.col(f"a_{k}") == F.col(f"b_{k}"))
    if spec.within is not None:
        gap = F.col("b_ts").cast("double") - F.col("a_ts").cast("double")
        condition = condition & (gap >= -spec.within.before) & (gap <= spec.within.after)
    compare = a.crossJoin(b).where(condition)
    compare.count()  # warm up
    began = time.perf_counter()
    compare.count()
    elapsed = time.perf_counter() - began
    a.unpersist()
    b.unpersist()
    return elapsed / max(n_a * n_b, 1)


def last_observed(events: Any, outputs: list[str]) -> dict[str, Any]:
    """The latest run's observed load for these outputs, from the run log rows (pyarrow table)."""
    rows = [r for r in events.to_pylist() if r["event"] == "output_end" and r["name"] in outputs and r["details"]]
    if not rows:
        return {}
    latest = max(rows, key=lambda r: r["ts"])
    return json.loads(latest["details"])
