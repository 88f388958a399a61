"""Choosing an `swa` step's size n and timeout t from its input (Li et al., §5.2–5.3).

The paper's recipe, as `tributary tune` runs it:
1. instances: each instance's degree (its tuples) and duration (last − first event time, in
   seconds). Where the step declares `truth:`, an instance is a value of the truth instance column;
   otherwise a pilot pass cuts the input into generous windows (PILOT_SIZE_FACTOR × n tuples,
   PILOT_TIMEOUT_FACTOR × t) by the step's own key, and each window stands for an instance;
2. fits (framework.integration.fitting): an Erlang for the degree, a two-branch hyper-Erlang for the
   duration, each with its Kolmogorov–Smirnov distance to the data;
3. n = the smallest integer with F(n) ≥ α, t = the smallest whole second with 1 − F(t) ≤ β.

Only the per-instance figures leave Spark (two numbers per instance), so fitting a trace of a
million instances costs the driver ~16 MB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from framework.errors import BadInput, Problem
from framework.integration.fitting import Erlang, Fit, HyperErlang, fit_erlang, fit_hyper_erlang, smallest_size, smallest_timeout
from framework.spec.steps import SwaSpec

if TYPE_CHECKING:
    import numpy as np

    from framework.operators import StepContext

MIN_INSTANCES = 30  # fewer than this and a two-branch mixture (five parameters) is a guess
PILOT_SIZE_FACTOR, PILOT_TIMEOUT_FACTOR = 10, 5


@dataclass(frozen=True)
class Instances:
    degree: np.ndarray  # tuples per instance
    duration: np.ndarray  # seconds from the instance's first to its last tuple
    source: str  # where the instances came from, said to the user


@dataclass(frozen=True)
class Tuning:
    step: str
    instances: Instances
    degree: Fit
    duration: Fit
    alpha: float
    beta: float
    size: int  # the chosen n
    timeout: int  # the chosen t, whole seconds
    current_size: int | str  # what the YAML says now (auto: learned per head)
    current_timeout: float | str

    def size_rows(self) -> list[tuple[int, float]]:
        """F(n−1), F(n), F(n+1), as the paper's §5.2 prints them."""
        cdf = self.degree.distribution.cdf
        return [(n, float(cdf(n))) for n in (self.size - 1, self.size, self.size + 1) if n >= 1]

    def timeout_rows(self) -> list[tuple[int, float]]:
        """1 − F at t−1, t, t+1 (the share of instances a window of that timeout would cut)."""
        cdf = self.duration.distribution.cdf
        return [(t, 1 - float(cdf(t))) for t in (self.timeout - 1, self.timeout, self.timeout + 1) if t >= 1]

    def empirical_size_share(self) -> float:
        """Share of the instances whose degree is at most n (what F(n) estimates)."""
        return float((self.instances.degree <= self.size).mean())

    def empirical_timeout_share(self) -> float:
        """Share of the instances lasting longer than t (what 1 − F(t) estimates)."""
        return float((self.instances.duration > self.timeout).mean())


def check_levels(alpha: float, beta: float) -> None:
    wrong = [f"{name} = {value:g}" for name, value in (("--alpha", alpha), ("--beta", beta)) if not 0 < value < 1]
    if wrong:
        raise BadInput(
            Problem(
                f"{' and '.join(wrong)}: a level must lie strictly between 0 and 1",
                hint="e.g. --alpha 0.9 (n covers 90% of the degrees) --beta 0.05 (5% of instances may outlast t)",
            )
        )


def tune(step: str, spec: SwaSpec, instances: Instances, alpha: float, beta: float) -> Tuning:
    check_levels(alpha, beta)
    usable = int((instances.degree > 0).sum())
    lasting = int((instances.duration > 0).sum())
    if min(usable, lasting) < MIN_INSTANCES:
        raise BadInput(
            Problem(
                f"step '{step}': {usable:,} instance(s), {lasting:,} of them lasting more than an instant: "
                f"at least {MIN_INSTANCES} of each are needed to fit the degree and duration distributions",
                hint="tune on more input (a longer trace, or a larger --sample)",
            )
        )
    degree = fit_erlang(instances.degree, discrete=True)
    duration = fit_hyper_erlang(instances.duration)
    return Tuning(
        step,
        instances,
        degree,
        duration,
        alpha,
        beta,
        smallest_size(degree.distribution, alpha),
        smallest_timeout(duration.distribution, beta),
        spec.size,
        spec.timeout,
    )


def read_instances(context: StepContext, sample: float | None = None) -> Instances:
    """Each instance's degree and duration, from the truth column or a pilot pass (module docstring)."""
    from pyspark.sql import functions as F

    from framework.operators.columns import quoted
    from framework.operators.keyed_windows import MICROS, UNIT, checked_input, spec_of

    spec = spec_of(context)
    assert isinstance(spec, SwaSpec)  # tributary tune checks the step's kind
    rows = checked_input(context)
    if spec.truth is not None:
        grouping = [F.col(quoted(spec.truth.instance))]
        units, source = rows, f"instances from the truth column '{spec.truth.instance}'"
        members = grouping
    else:
        from framework.operators.swa.batch import KEY_HASH, assign_windows, key_columns

        pilot = spec.model_copy(
            update={"size": max(100, PILOT_SIZE_FACTOR * spec.size), "timeout": PILOT_TIMEOUT_FACTOR * spec.timeout}
        )
        units = assign_windows(rows, pilot, last=False)
        members = [*key_columns(units, spec)]
        grouping = [F.col(KEY_HASH), *members, F.col(UNIT)]
        source = (
            f"no truth: columns, so instances come from a pilot pass: windows of up to {pilot.size} tuples and "
            f"{pilot.timeout:g} s keyed by {spec.key_label()}"
        )
    if sample is not None:
        units = units.where((F.abs(F.xxhash64(*members)) % 1_000_000) < int(sample * 1_000_000))
        source += f", {sample:.0%} of them (--sample)"
    per_instance = units.groupBy(*grouping).agg(
        F.count(F.lit(1)).alias("degree"),
        ((F.max(MICROS) - F.min(MICROS)) / 1e6).alias("duration"),
    )
    table = per_instance.select("degree", "duration").toArrow()
    return Instances(
        table.column("degree").to_numpy().astype("float64"),
        table.column("duration").to_numpy().astype("float64"),
        source,
    )


def describe(distribution: Erlang | HyperErlang) -> str:
    """The fitted distribution in the paper's notation."""
    if isinstance(distribution, Erlang):
        return f"Erlang(k={distribution.shape}, rate={distribution.rate:.4f})"
    parts = [
        f"{w:.4f}·Erlang(k={b.shape}, rate={b.rate:.4f})"
        for w, b in zip(distribution.weights, distribution.branches, strict=True)
    ]
    return " + ".join(parts)


def summary(tuning: Tuning) -> dict[str, Any]:
    """The tuning as plain data (for --json and the run log)."""
    return {
        "step": tuning.step,
        "instances": len(tuning.instances.degree),
        "source": tuning.instances.source,
        "alpha": tuning.alpha,
        "beta": tuning.beta,
        "size": tuning.size,
        "timeout_s": tuning.timeout,
        "current_size": tuning.current_size,
        "current_timeout_s": tuning.current_timeout,
        "degree_fit": describe(tuning.degree.distribution),
        "degree_ks": round(tuning.degree.ks_distance, 4),
        "duration_fit": describe(tuning.duration.distribution),
        "duration_ks": round(tuning.duration.ks_distance, 4),
        "degree_mean": round(float(tuning.instances.degree.mean()), 4),
        "duration_mean_s": round(float(tuning.instances.duration.mean()), 4),
        "size_cdf": {str(n): round(f, 4) for n, f in tuning.size_rows()},
        "timeout_tail": {str(t): round(f, 4) for t, f in tuning.timeout_rows()},
    }


def fit_quality(ks: float) -> str:
    """A word for a Kolmogorov–Smirnov distance (the largest gap between fitted and data CDF)."""
    if math.isnan(ks):
        return "unknown"
    return "good" if ks < 0.05 else "fair" if ks < 0.1 else "poor: read the plots before trusting it"


def report_lines(t: Tuning) -> list[str]:
    """The tuning as `tributary tune` prints it: each fit, F around the choice, and the choice."""
    degree = _fitted("degree", t.degree, f"{t.instances.degree.mean():.2f} tuples")
    duration = _fitted("duration", t.duration, f"{t.instances.duration.mean():.2f} s")
    now_timeout = t.current_timeout if isinstance(t.current_timeout, str) else f"{t.current_timeout:g} s"
    return [
        f"{t.step}: {len(t.instances.degree):,} instances; {t.instances.source}",
        degree,
        *[f"     F({n}) = {f:.4f}{'  ← n' if n == t.size else ''}" for n, f in t.size_rows()],
        f"  size n = {t.size} (the smallest n with F(n) ≥ α = {t.alpha:g}; "
        f"{t.empirical_size_share():.1%} of these instances have at most n tuples; now {t.current_size})",
        duration,
        *[f"     1 − F({s}) = {tail:.4f}{'  ← t' if s == t.timeout else ''}" for s, tail in t.timeout_rows()],
        f"  timeout t = {t.timeout} s (the smallest whole second with 1 − F(t) ≤ β = {t.beta:g}; "
        f"{t.empirical_timeout_share():.1%} of these instances last longer; now {now_timeout})",
    ]


def _fitted(name: str, fit: Fit, mean: str) -> str:
    return (
        f"  {name:<9} {describe(fit.distribution)}, mean {mean}; "
        f"KS distance {fit.ks_distance:.3f} ({fit_quality(fit.ks_distance)})"
    )
