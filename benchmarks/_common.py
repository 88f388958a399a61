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


#: example data made by `tributary generate`, not in the repository (validate refuses a missing source path)
GENERATED = ("data/samples/service_trace/static", "data/samples/service_trace/images") + tuple(
    f"data/samples/ticks/{s}" for s in ("MCD", "BKC", "WEN", "YUM", "SBX")
)


def example_copy(target: Path) -> Path:
    """The example project copied to `target`, the generated data's folders empty where missing."""
    for folder in ("pipelines", "sql", "configs", "udfs", "data"):
        if (REPO / folder).exists():
            shutil.copytree(REPO / folder, target / folder)
    for folder in GENERATED:
        (target / folder).mkdir(parents=True, exist_ok=True)
    return target


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


#: the benchmarks' headline figures, shown as one table on docs/benchmarks.md (docs/gen.py renders it)
FIGURES_FILE = REPO / "docs" / "benchmarks.yaml"
_FIGURES_HEADER = """\
# The headline figures of benchmarks/, one entry each: the benchmark scripts update `value`, `date` and
# `machine` through benchmarks/_common.py:record(); docs/benchmarks.md shows them as one table
# (python docs/gen.py rewrites it; the docs build fails when it is stale). The first values are those
# the README stated, dated by the commit that stated them.
"""


def append_stream_to_delta(stream, out: Path, columns: list[str] | None = None, per_batch=None) -> int:
    """Run a streaming DataFrame available-now, each micro-batch appended to the Delta table `out`
    through Arrow and delta-rs (the hand-written baselines' sink); returns the rows written.
    `per_batch`: a function of each micro-batch's rows (a batch DataFrame) giving the rows to write."""
    import pyarrow as pa
    from deltalake import write_deltalake

    written = []

    def commit(batch, batch_id):
        batch = per_batch(batch) if per_batch else batch
        table = pa.table((batch.select(*columns) if columns else batch).toArrow())
        written.append(table.num_rows)
        if table.num_rows:
            write_deltalake(str(out), table, mode="append")

    query = stream.writeStream.outputMode("append").foreachBatch(commit)
    query.option("checkpointLocation", str(out) + ".ckpt").trigger(availableNow=True).start().awaitTermination()
    return sum(written)


def machine() -> str:
    """Where a figure was measured: cores, architecture, system and the load at the time."""
    import os
    import platform

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()}-core {platform.machine()} {platform.system()}, load {load:.1f}"


def record(figure_id: str, value: float | str, *, digits: int = 2) -> None:
    """Write a headline figure into docs/benchmarks.yaml (the entry `figure_id`, which must exist there with
    its label, unit and target) and re-render docs/benchmarks.md's table. `TRIBUTARY_BENCH_RECORD=0` skips it,
    e.g. for a run on a machine or a setting that should not become the published figure."""
    import datetime
    import importlib.util
    import os

    import yaml

    if os.environ.get("TRIBUTARY_BENCH_RECORD", "1") == "0":
        return
    data = yaml.safe_load(FIGURES_FILE.read_text(encoding="utf-8"))
    entry = next((f for f in data["figures"] if f["id"] == figure_id), None)
    if entry is None:
        raise KeyError(f"{figure_id!r} is not a figure of {FIGURES_FILE}: add its entry (label, unit, target) first")
    entry["value"] = round(value, digits) if isinstance(value, float) else value
    entry["date"] = datetime.date.today().isoformat()
    entry["machine"] = machine()
    FIGURES_FILE.write_text(
        _FIGURES_HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000), encoding="utf-8"
    )
    spec = importlib.util.spec_from_file_location("tributary_docs_gen", REPO / "docs" / "gen.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.write_marked()
    print(f"recorded {figure_id} = {entry['value']} in {FIGURES_FILE.relative_to(REPO)}")
