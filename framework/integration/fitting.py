"""Fitting the distributions that choose SWA's window parameters (Li et al., §5.2–5.3).

The paper fits an instance's degree (tuples per instance) with an Erlang distribution and its
duration (last − first event time) with a two-branch hyper-Erlang (its formula (5) family), then
picks the window size n as the smallest integer with F(n) ≥ α and the timeout t as the smallest
whole second with 1 − F(t) ≤ β. This module holds those fits and choices as plain functions of
numbers (no Spark), so they can be checked against the paper's own figures.

- Erlang: maximum likelihood with an integer shape k, profiled over k (for each k the rate's
  maximum is k / mean, in closed form); scipy's gamma distribution gives the densities.
- Hyper-Erlang: expectation–maximization over branch weights and rates, choosing each branch's
  integer shape in the M-step by the same profile over k (weighted), so every step raises the
  likelihood.
- Goodness of fit: the Kolmogorov–Smirnov distance (scipy.stats.kstest).

`tributary tune` (framework.capacity.tuning) reads a step's instances and calls these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_SHAPE = 400  # the largest integer shape tried (the paper's degree fit has k = 100)


@dataclass(frozen=True)
class Erlang:
    shape: int  # k, the number of phases
    rate: float  # λ

    def cdf(self, x: Any) -> Any:
        from scipy import stats

        return stats.gamma.cdf(x, a=self.shape, scale=1 / self.rate)

    def pdf(self, x: Any) -> Any:
        from scipy import stats

        return stats.gamma.pdf(x, a=self.shape, scale=1 / self.rate)

    @property
    def mean(self) -> float:
        return self.shape / self.rate


@dataclass(frozen=True)
class HyperErlang:
    """A mixture of Erlang branches: F(x) = Σ weight_i · F_i(x) (the paper's formula (2))."""

    weights: tuple[float, ...]
    branches: tuple[Erlang, ...]

    def cdf(self, x: Any) -> Any:
        return sum(w * b.cdf(x) for w, b in zip(self.weights, self.branches, strict=True))

    def pdf(self, x: Any) -> Any:
        return sum(w * b.pdf(x) for w, b in zip(self.weights, self.branches, strict=True))

    @property
    def mean(self) -> float:
        return sum(w * b.mean for w, b in zip(self.weights, self.branches, strict=True))


@dataclass(frozen=True)
class Fit:
    distribution: Erlang | HyperErlang
    ks_distance: float  # the Kolmogorov–Smirnov statistic: the largest gap between the CDFs
    samples: int


def fit_erlang(samples: Sequence[float] | Any, max_shape: int = MAX_SHAPE, discrete: bool = False) -> Fit:
    """The Erlang of integer shape with the highest likelihood (rate k / mean for each k).
    `discrete`: the samples are whole numbers (counts), so the fit's distance to them is measured
    at whole numbers (`_ks_discrete`), not along a continuous axis where every step of the data's
    CDF counts as a gap."""
    import numpy as np

    x = _positive(samples)
    shapes = np.arange(1, max_shape + 1)
    rates = shapes / x.mean()
    loglik = _erlang_loglik(x, np.ones_like(x), shapes, rates)
    best = int(np.argmax(loglik))
    erlang = Erlang(int(shapes[best]), float(rates[best]))
    return Fit(erlang, _ks_discrete(x, erlang) if discrete else _ks(x, erlang), len(x))


def fit_hyper_erlang(samples: Sequence[float] | Any, branches: int = 2, iterations: int = 300, max_shape: int = 60) -> Fit:
    """A hyper-Erlang with `branches` branches by expectation–maximization."""
    import numpy as np
    from scipy import stats

    x = _positive(samples)
    if branches < 1:
        raise ValueError("a hyper-Erlang needs at least one branch")
    # start: the sorted samples cut into equal parts, one Erlang fitted to each
    parts = np.array_split(np.sort(x), branches)
    weights: Any = np.full(branches, 1 / branches)
    fitted: list[Any] = [fit_erlang(p, max_shape).distribution for p in parts if len(p)]
    shapes: Any = np.array([e.shape for e in fitted], dtype=np.float64)
    rates: Any = np.array([e.rate for e in fitted], dtype=np.float64)
    candidates = np.arange(1, max_shape + 1)
    previous = -math.inf
    for _ in range(iterations):
        # E-step: each sample's responsibility per branch
        log_parts = np.log(np.maximum(weights, 1e-300))[:, None] + stats.gamma.logpdf(
            x[None, :], a=shapes[:, None], scale=1 / rates[:, None]
        )
        total = np.logaddexp.reduce(log_parts, axis=0)
        likelihood = float(total.sum())
        responsibility = np.exp(log_parts - total[None, :])
        # M-step: weights, and per branch the integer shape (profiled) with its closed-form rate
        mass = responsibility.sum(axis=1)
        weights = mass / mass.sum()
        for i in range(len(weights)):
            if mass[i] <= 1e-9:
                continue
            weighted_mean = float((responsibility[i] * x).sum() / mass[i])
            rates_k = candidates / weighted_mean
            loglik = _erlang_loglik(x, responsibility[i], candidates, rates_k)
            best = int(np.argmax(loglik))
            shapes[i], rates[i] = candidates[best], rates_k[best]
        if likelihood - previous < 1e-9 * max(1.0, abs(likelihood)):
            break
        previous = likelihood
    order = np.argsort(shapes / rates)  # branches by their mean
    mixture = HyperErlang(tuple(float(weights[i]) for i in order), tuple(Erlang(int(shapes[i]), float(rates[i])) for i in order))
    return Fit(mixture, _ks(x, mixture), len(x))


def smallest_size(distribution: Erlang | HyperErlang, alpha: float) -> int:
    """n: the smallest whole number with F(n) ≥ α (the window holds n tuples)."""
    _check_level("alpha", alpha)
    n = 1
    while float(distribution.cdf(n)) < alpha:
        n += 1
    return n


def smallest_timeout(distribution: Erlang | HyperErlang, beta: float) -> int:
    """t: the smallest whole second with 1 − F(t) ≤ β (at most β of the windows time out)."""
    _check_level("beta", beta)
    t = 1
    while 1 - float(distribution.cdf(t)) > beta:
        t += 1
    return t


def _check_level(name: str, value: float) -> None:
    if not 0 < value < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")


def _positive(samples: Sequence[float] | Any) -> Any:
    import numpy as np

    x = np.asarray(samples, dtype=float)
    x = x[np.isfinite(x) & (x > 0)]
    if len(x) < 2:
        raise ValueError(f"at least 2 positive samples are needed to fit, got {len(x)}")
    return x


def _erlang_loglik(x: Any, weight: Any, shapes: Any, rates: Any) -> Any:
    """Σ_j weight_j · log f_k(x_j) for each (shape k, rate) pair, without an n × K matrix."""
    import numpy as np
    from scipy.special import gammaln

    w = float(weight.sum())
    sum_log_x = float((weight * np.log(x)).sum())
    sum_x = float((weight * x).sum())
    return w * (shapes * np.log(rates) - gammaln(shapes)) + (shapes - 1) * sum_log_x - rates * sum_x


def _ks(x: Any, distribution: Erlang | HyperErlang) -> float:
    from scipy import stats

    return float(stats.kstest(x, distribution.cdf).statistic)


def _ks_discrete(x: Any, distribution: Erlang | HyperErlang) -> float:
    """The largest gap between the data's CDF and the fit's at the whole numbers the data takes,
    with the continuity correction a count rounded from a continuous value has: P(X ≤ v) = F(v + ½)."""
    import numpy as np

    values, counts = np.unique(np.rint(x), return_counts=True)
    below = np.cumsum(counts) / counts.sum()
    fitted = distribution.cdf(values + 0.5)
    return float(np.max(np.abs(below - fitted)))
