"""The trading example's functions (Satzger et al., ESC, §3 and §7): per request, homogenize each
stock's ticks to equally spaced points, correlate every pair (Pearson), find the most correlated.

Ticks happen at random instants, and Pearson's correlation needs equally spaced points, so each
stock's price is sampled on one grid over the span all stocks cover: each point takes the price
of the tick closest to it in time.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from framework.functions import group_function, udf


def homogenize(instants: np.ndarray, prices: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The price of the tick closest in time to each grid point (`instants` sorted)."""
    after = np.clip(np.searchsorted(instants, grid), 1, len(instants) - 1)
    before = after - 1
    closer_before = (grid - instants[before]) <= (instants[after] - grid)
    return prices[np.where(closer_before, before, after)]


def pair_correlations_of(events, points: int) -> list[tuple[str, float]]:  # a pandas DataFrame
    """(pair, Pearson correlation) for every pair of the request's stocks, pairs in name order."""
    instants = events["ts"].astype("int64").to_numpy()
    prices = events["price"].to_numpy()
    symbols = events["symbol"].to_numpy()
    series = {}
    for symbol in sorted(set(symbols)):
        mine = symbols == symbol
        if mine.sum() >= 2:
            series[symbol] = (instants[mine], prices[mine])  # in event-time order, as the step hands them
    if len(series) < 2:
        return []
    start = max(t[0] for t, _ in series.values())
    end = min(t[-1] for t, _ in series.values())
    grid = np.linspace(start, end, points)
    sampled = {s: homogenize(t, p, grid) for s, (t, p) in series.items()}
    return [(f"{a}-{b}", float(np.corrcoef(sampled[a], sampled[b])[0, 1])) for a, b in combinations(sorted(sampled), 2)]


@group_function(returns="pair string, correlation double")
def pair_correlations(events, state, args):  # the group function contract
    """The correlation PEs: one row per pair of stocks of the request."""
    pairs = pair_correlations_of(events, int(args.get("points", 1000)))
    return [{"pair": pair, "correlation": correlation} for pair, correlation in pairs]


@udf(returns="double")
def fisher_z(correlation):  # a pandas Series
    """Fisher's z of a correlation: comparable across requests (its spread does not depend on r)."""
    return np.arctanh(correlation.clip(-0.999999, 0.999999))
