"""The window-parameter fits (Li et al., §5.2–5.3) against the paper's own numbers, and fits that
recover the distribution samples were drawn from."""

from __future__ import annotations

import numpy as np
import pytest

from framework.integration.fitting import (
    Erlang,
    HyperErlang,
    fit_erlang,
    fit_hyper_erlang,
    smallest_size,
    smallest_timeout,
)

DEGREE = Erlang(shape=100, rate=8.7963)  # the paper's formula (4)
DURATION = HyperErlang((0.0247, 0.9753), (Erlang(1, 0.0404), Erlang(4, 0.3666)))  # formula (5)


def test_the_papers_window_size_and_timeout():
    assert [round(float(DEGREE.cdf(n)), 4) for n in (12, 13, 14)] == [0.7186, 0.9199, 0.9857]
    assert smallest_size(DEGREE, 0.9) == 13
    assert 1 - DURATION.cdf(22) <= 0.05 < 1 - DURATION.cdf(21)
    assert smallest_timeout(DURATION, 0.05) == 22
    assert DURATION.pdf(0) == pytest.approx(0.0009979, rel=1e-3)  # the formula's first term at x = 0


def test_an_erlang_fit_recovers_shape_and_rate():
    samples = np.random.default_rng(1).gamma(shape=7, scale=1 / 2.0, size=5000)
    fit = fit_erlang(samples)
    assert abs(fit.distribution.shape - 7) <= 1
    assert fit.distribution.rate == pytest.approx(2.0, rel=0.15)
    assert fit.ks_distance < 0.03


def test_a_hyper_erlang_fit_recovers_a_two_branch_mixture():
    rng = np.random.default_rng(2)
    n = 6000
    branch = rng.random(n) < 0.3
    samples = np.where(branch, rng.gamma(1, 1 / 0.05, n), rng.gamma(4, 1 / 0.4, n))
    fit = fit_hyper_erlang(samples)
    assert fit.ks_distance < 0.03
    grid = np.linspace(0.5, 80, 50)
    truth = 0.3 * Erlang(1, 0.05).cdf(grid) + 0.7 * Erlang(4, 0.4).cdf(grid)
    assert np.max(np.abs(fit.distribution.cdf(grid) - truth)) < 0.03


@pytest.mark.parametrize("level", [0, 1, -0.1, 1.5])
def test_levels_outside_zero_one_are_refused(level):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        smallest_size(DEGREE, level)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        smallest_timeout(DURATION, level)


def test_too_few_samples_are_refused():
    with pytest.raises(ValueError, match="at least 2 positive samples"):
        fit_erlang([3.0])
