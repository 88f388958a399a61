"""A chained stream against the single step it starts with, on one generated trace.

    .venv/bin/python benchmarks/bench_chain.py [--instances 20000] [--repeat 3] [--files-per-trigger 10]

The trace and the SWA step are bench_swa.py's (tributary generate service-trace, Parquet, two
streams; key head+client+time, n = 13, t = 22 s). Two streaming pipelines, each `tributary run`
(availableNow) into a fresh warehouse, alternating, `--repeat` times each, after one untimed run of
each (the JIT, the Python workers and the imports warm for both: a warm-up of the single pipeline
alone left the chained one's own parts, its Delta stream source and its windowed aggregation, cold
in its first round, which counted in its median):

- single: union → swa → Delta (bench_swa.py's streaming pipeline);
- chained: union → swa → a per-minute SQL aggregation of its windows (window(window_start,
  '1 minute'), on the watermark the chain states) → Delta. The swa step runs as a chain: its
  windows are committed once to an internal Delta table that the SQL step reads as a stream
  (docs/architecture.md, "Chained steps on streams").

Throughput is input tuples per second of wall time (the run's own start included). Prints the
chained pipeline's throughput ÷ the single step's, the ratio of the medians. Target ≥ 0.8.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, record
from bench_swa import write_pipeline

sys.path.insert(0, str(REPO))

PER_MINUTE = """\
  per_minute:
    sql: |
      SELECT window.start AS minute, count(*) AS instances, sum(tuple_count) AS tuples, sum(total_ms) AS total_ms
      FROM {{ ref('instances') }}
      GROUP BY window(window_start, '1 minute')
outputs:
  per_minute: {mode: append}
"""


def chained_pipeline(root: Path, data: Path, per_trigger: int) -> Path:
    """bench_swa's streaming SWA pipeline with a per-minute SQL aggregation after its swa step."""
    path = write_pipeline(root, "swa_chain", "streaming", "swa", 13, data, per_trigger)
    text = path.read_text()
    path.write_text(text[: text.index("outputs:")] + PER_MINUTE)
    return path


def run(spark, root: Path, pipeline: Path, warehouse: Path) -> tuple[float, dict[str, int]]:
    """Seconds of one `tributary run` and the rows each output wrote."""
    from framework.compiler import compile_pipeline
    from framework.engine.runner import run_pipeline
    from framework.profiles import load_profile
    from framework.project import Project

    project = Project(root)
    profile = load_profile(project).model_copy(update={"warehouse": str(warehouse)})
    began = time.perf_counter()
    result = run_pipeline(compile_pipeline(project, pipeline, profile), profile, spark=spark)
    seconds = time.perf_counter() - began
    if result.error:
        raise SystemExit(f"{pipeline.name}: {result.error}")
    return seconds, {o.name: o.rows or 0 for o in result.outputs}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--files-per-trigger", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from framework.engine.session import spark_session
    from framework.generators.service_trace import generate_service_trace
    from framework.profiles import Profile, SparkSettings

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        (root / "configs").mkdir(parents=True)
        (root / "configs" / "local.yaml").write_text(
            f"spark:\n  master: {args.master}\n  conf:\n    spark.sql.shuffle.partitions: 4\nwarehouse: ./warehouse\n"
        )
        data = root / "data"
        trace = generate_service_trace(data, instances=args.instances, seed=7, files=40, fmt="parquet")
        spark = spark_session(
            Profile(spark=SparkSettings(master=args.master, conf={"spark.sql.shuffle.partitions": 4, "spark.ui.enabled": False}))
        )
        pipelines = {
            "single": write_pipeline(root, "swa_stream", "streaming", "swa", 13, data, args.files_per_trigger),
            "chained": chained_pipeline(root, data, args.files_per_trigger),
        }
        print(
            f"trace: {trace.tuples:,} tuples, {trace.instances:,} instances ({args.master}, {args.files_per_trigger} files per trigger)"
        )
        for name, pipeline in pipelines.items():  # JIT, Python workers, imports: warm for both
            run(spark, root, pipeline, Path(tmp) / f"warm-{name}")
        seconds: dict[str, list[float]] = {name: [] for name in pipelines}
        for i in range(args.repeat):
            for name in pipelines if i % 2 == 0 else reversed(list(pipelines)):
                warehouse = Path(tmp) / f"{name}-{i}"
                took, rows = run(spark, root, pipelines[name], warehouse)
                seconds[name].append(took)
                print(f"  {name:8s} round {i + 1}: {took:6.1f}s  {trace.tuples / took:10,.0f} tuples/s  {rows}")
                shutil.rmtree(warehouse, ignore_errors=True)
        rates = {name: trace.tuples / statistics.median(times) for name, times in seconds.items()}
        ratio = rates["chained"] / rates["single"]
        print(f"  single swa stream:  {rates['single']:,.0f} tuples/s (median of {args.repeat})")
        print(f"  chained swa → per-minute SQL → Delta: {rates['chained']:,.0f} tuples/s")
        print(f"  chained ÷ single: {ratio:.2f} (target ≥ 0.8)")
        record("chain.streaming_ratio", ratio)


if __name__ == "__main__":
    main()
