"""Stock ticks for the trading example (Satzger et al., ESC, §3 and §7): per request, five stocks'
tick lists of the last ten minutes, 30,000 ticks each (50 a second), at random instants.

Each stock's folder gets one Parquet file per request (the paper's event: a stock's tick list for
one request, its context). Prices follow random walks driven by a shared market factor with a
per-stock loading that changes per request, so the most correlated pair differs between requests.

Timing: request r's ticks cover the ten minutes [START + r × `spacing_s`, + 600 s), so by default
(`spacing_s` = 600 s) the requests follow one another and do not overlap: event time moves forward
request by request. Within a request the ticks of its five files spread over all ten minutes, and
a file lands whole, so a stream that reads a request's files in separate runs or micro-batches
sees ticks up to ten minutes behind the newest it has seen: its watermark must be at least ten
minutes (pipelines/trading_correlation_streaming.yaml says 10m). Then no tick of a request is
late, whichever of its files lands first, and no tick of a later request is either.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

START = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
SYMBOLS = ("MCD", "BKC", "WEN", "YUM", "SBX", "DPZ", "PZZ", "JACK", "CMG", "QSR")
WINDOW_S = 600  # the ticks of the last ten minutes


def generate_ticks(
    out: Path, requests: int = 10, stocks: int = 5, ticks: int = 30_000, seed: int = 1, spacing_s: float = 600.0, first: int = 0
) -> dict[str, int]:
    """Write `requests` requests (ids first .. first + requests - 1); returns rows per stock."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not 2 <= stocks <= len(SYMBOLS):
        raise ValueError(f"stocks must be between 2 and {len(SYMBOLS)}")
    symbols = SYMBOLS[:stocks]
    written = dict.fromkeys(symbols, 0)
    start_us = int(START.timestamp() * 1_000_000)
    for request in range(first, first + requests):
        rng = np.random.default_rng([seed, request])
        end_us = start_us + int(request * spacing_s * 1_000_000) + WINDOW_S * 1_000_000
        grid = 1200  # the market factor's steps over the ten minutes
        market = np.cumsum(rng.normal(0, 1, grid))
        for symbol in symbols:
            loading = rng.uniform(-1, 1)
            own = np.cumsum(rng.normal(0, 1, grid))
            path = 100 + loading * market + (1 - abs(loading)) * own
            offsets = rng.uniform(0, WINDOW_S, ticks)  # random instants, unsorted as they were logged
            price = path[np.minimum((offsets / WINDOW_S * grid).astype(np.int64), grid - 1)] + rng.normal(0, 0.05, ticks)
            instants = end_us - WINDOW_S * 1_000_000 + (offsets * 1_000_000).astype(np.int64)
            table = pa.table(
                {
                    "request": pa.array(np.full(ticks, request), pa.int64()),
                    "symbol": pa.array([symbol] * ticks),
                    "ts": pa.array(instants, pa.timestamp("us", tz="UTC")),
                    "price": pa.array(np.round(price, 4), pa.float64()),
                }
            )
            folder = out / symbol
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, folder / f"request-{request:06d}.parquet")
            written[symbol] += ticks
    return written
