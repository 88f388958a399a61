"""The example pipeline through Tributary vs a hand-written PySpark script doing the same work.

Both run in one process on one SparkSession (JVM start excluded from both), on the same scaled
copy of the example data, alternating, each writing fresh Delta tables with delta-rs:
read two JSON streams with a schema, union them, per-service and per-day statistics, write one
table by overwrite and one by merge on (day, head_service) partitioned by day.

    .venv/bin/python benchmarks/bench_overhead.py [--rows 400000] [--repeat 5]
Target: ratio tributary / hand-written <= 1.10.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, record, scaled_example_project

sys.path.insert(0, str(REPO))

SCHEMA = "ts TIMESTAMP, client_ip STRING, head_service STRING, requested_service STRING, response_ms INT"


def hand_written(spark, root: Path, warehouse: Path, compiled) -> None:
    """What an engineer would write by hand for the same pipeline, with the same SQL."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    from pyspark.sql import functions as F

    data = root / "data/samples/service_calls"
    static = spark.read.schema(SCHEMA).json(str(data / "static")).withColumn("_source", F.lit("static_calls"))
    images = spark.read.schema(SCHEMA).json(str(data / "images")).withColumn("_source", F.lit("image_calls"))
    all_calls = static.unionByName(images).cache()
    all_calls.createOrReplaceTempView("all_calls")
    stats = spark.sql(compiled.sql["service_stats"].text)
    write_deltalake(str(warehouse / "service_stats"), pa.table(stats.toArrow()), mode="overwrite")
    daily = pa.table(spark.sql(compiled.sql["daily_head_stats"].text).toArrow())
    target = warehouse / "daily_head_stats"
    if DeltaTable.is_deltatable(str(target)):
        (
            DeltaTable(str(target))
            .merge(daily, "t.day = s.day AND t.head_service = s.head_service", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
    else:
        write_deltalake(str(target), daily, partition_by=["day"])
    all_calls.unpersist()
    spark.catalog.dropTempView("all_calls")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=400_000, help="rows per input stream")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from framework.compiler import compile_pipeline
    from framework.engine.runner import run_pipeline
    from framework.engine.session import spark_session
    from framework.profiles import Profile, SparkSettings, load_profile
    from framework.project import Project

    with tempfile.TemporaryDirectory() as tmp:
        root = scaled_example_project(Path(tmp) / "project", args.rows)
        project = Project(root)
        profile = load_profile(project)
        spark = spark_session(Profile(spark=SparkSettings(master="local[2]", conf={"spark.sql.shuffle.partitions": 4})))
        compiled = compile_pipeline(project, root / "pipelines/service_calls.yaml", profile)
        spark.range(10).count()  # JVM warm-up, excluded from both

        def run_tributary(i: int) -> None:
            profile_i = profile.model_copy(update={"warehouse": str(Path(tmp) / f"wh-t{i}")})
            run_pipeline(compiled, profile_i, spark=spark)

        def run_hand(i: int) -> None:
            hand_written(spark, root, Path(tmp) / f"wh-h{i}", compiled)

        run_tributary(-1)
        run_hand(-1)  # warm both code paths once
        timings: dict[str, list[float]] = {"tributary": [], "hand-written": []}
        for i in range(args.repeat):
            for label, fn in (("tributary", run_tributary), ("hand-written", run_hand)):
                began = time.perf_counter()
                fn(i)
                timings[label].append(time.perf_counter() - began)
        t, h = statistics.median(timings["tributary"]), statistics.median(timings["hand-written"])
        print(f"input: 2 streams x {args.rows:,} rows; {args.repeat} alternating runs each, one SparkSession (local[2])")
        for label, values in timings.items():
            print(f"{label:>13}: median {statistics.median(values):.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
        print(f"ratio tributary / hand-written (baseline): {t / h:.2f}  (target <= 1.10: {'met' if t / h <= 1.10 else 'MISSED'})")
        record("overhead.batch", t / h)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
