"""Helpers shared by the benchmark scripts: timing, medians, a scaled copy of the example project."""

from __future__ import annotations

import json
import random
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the columns of `tributary generate service-trace` (framework.generators.service_trace)
SERVICE_TRACE_SCHEMA = (
    "head_service STRING, requested_service STRING, client_ip STRING, ts TIMESTAMP, instance_ts TIMESTAMP, "
    "response_ms INT, bytes BIGINT, instance_id BIGINT, is_primary BOOLEAN"
)


def median_seconds(fn: Callable[[], object], repeat: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times), times


def scaled_example_project(target: Path, rows_per_stream: int, seed: int = 1) -> Path:
    """The example project with each invocation stream grown to `rows_per_stream` rows."""
    for folder in ("pipelines", "sql", "configs"):
        shutil.copytree(REPO / folder, target / folder)
    rng = random.Random(seed)
    heads = ["/index.html", "/shop.html", "/news.html", "/about.html"]
    for stream, subs in (("static", ["/css/site.css", "/js/app.js"]), ("images", ["/img/a.jpg", "/img/b.jpg", "/img/c.jpg"])):
        folder = target / "data/samples/service_calls" / stream
        folder.mkdir(parents=True)
        per_file = max(rows_per_stream // 4, 1)
        for part in range(4):
            with open(folder / f"part-{part:03d}.json", "w") as f:
                for i in range(per_file):
                    second = (part * per_file + i) // 50
                    f.write(
                        json.dumps(
                            {
                                "ts": f"2026-11-{2 + second // 86400 % 20:02d}T{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z",
                                "client_ip": f"10.0.{rng.randrange(16)}.{rng.randrange(250)}",
                                "head_service": rng.choice(heads),
                                "requested_service": rng.choice(subs + heads),
                                "response_ms": int(rng.lognormvariate(3.3, 0.6)),
                            }
                        )
                        + "\n"
                    )
    return target
