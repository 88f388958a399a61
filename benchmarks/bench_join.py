"""Throughput of the `join:` step (time window, streaming) vs a hand-written native Spark interval
join on the same data, at local[1] and local[2] (target: step ≥ 0.9× the hand-written one).

Both are stream-stream joins with the same watermarks, run with trigger availableNow over the
same generated files, and both write their result to a Delta table through foreachBatch +
delta-rs; only the hand-written one has no Tributary around it.

    .venv/bin/python benchmarks/bench_join.py [--people 300000] [--repeat 3]
A run also pays a fixed ~0.5 s (lock, run log, checkpoint bookkeeping): small inputs show it.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO

sys.path.insert(0, str(REPO))


def native(spark, data: Path, out: Path) -> int:  # noqa: ANN001
    """The interval join as one would write it by hand."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from pyspark.sql import functions as F

    phones = (
        spark.readStream.schema("name STRING, ts TIMESTAMP, phone STRING")
        .json(str(data / "phones"))
        .withWatermark("ts", "1 minute")
        .alias("a")
    )
    emails = (
        spark.readStream.schema("name STRING, ts TIMESTAMP, email STRING")
        .json(str(data / "emails"))
        .withWatermark("ts", "1 minute")
        .alias("b")
    )
    joined = phones.join(
        emails, F.expr("a.name = b.name AND b.ts >= a.ts - interval 30 seconds AND b.ts <= a.ts + interval 30 seconds")
    )
    joined = joined.select("a.name", F.col("a.ts").alias("phones_ts"), "phone", F.col("b.ts").alias("emails_ts"), "email")
    rows = []

    def commit(batch, batch_id):  # noqa: ANN001
        table = pa.table(batch.toArrow())
        rows.append(table.num_rows)
        if table.num_rows:
            write_deltalake(str(out), table, mode="append")

    query = (
        joined.writeStream.foreachBatch(commit)
        .option("checkpointLocation", str(out) + ".ckpt")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sum(rows)


def tributary(spark, project: Path, warehouse: Path) -> int:  # noqa: ANN001
    from framework.compiler import compile_pipeline
    from framework.engine.runner import run_pipeline
    from framework.profiles import load_profile
    from framework.project import Project

    p = Project(project)
    profile = load_profile(p).model_copy(update={"warehouse": str(warehouse)})
    compiled = compile_pipeline(p, project / "pipelines" / "contact_join.yaml", profile)
    result = run_pipeline(compiled, profile, spark=spark)
    return sum(o.rows or 0 for o in result.outputs)


def one_master(master: str, people: int, repeat: int) -> None:
    from framework.engine.session import spark_session
    from framework.generators.contacts import generate_contacts
    from framework.profiles import Profile, SparkSettings

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        for folder in ("pipelines", "sql", "configs"):
            shutil.copytree(REPO / folder, root / folder)
        data = root / "data/samples/contacts"
        counts = generate_contacts(data, people=people, files=8, seed=3)
        tuples = counts["phones"] + counts["emails"]
        spark = spark_session(Profile(spark=SparkSettings(master=master, conf={"spark.sql.shuffle.partitions": 4})))
        timings: dict[str, list[float]] = {"tributary join step": [], "hand-written interval join": []}
        outputs: dict[str, int] = {}
        for i in range(repeat + 1):  # the first round warms both up and is not counted
            for label in timings:
                began = time.perf_counter()
                if label.startswith("tributary"):
                    outputs[label] = tributary(spark, root, Path(tmp) / f"wh{i}")
                else:
                    outputs[label] = native(spark, data, Path(tmp) / f"native{i}")
                if i:
                    timings[label].append(time.perf_counter() - began)
        print(f"{master}: {tuples:,} input tuples, median of {repeat}")
        rates = {}
        for label, values in timings.items():
            rates[label] = tuples / statistics.median(values)
            print(
                f"  {label:>27}: {rates[label]:>9,.0f} tuples/s  ({outputs[label]:,} joined rows; runs {', '.join(f'{v:.1f}s' for v in values)})"
            )
        ratio = rates["tributary join step"] / rates["hand-written interval join"]
        print(f"  ratio step / hand-written (baseline): {ratio:.2f}  (target >= 0.9: {'met' if ratio >= 0.9 else 'MISSED'})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--people", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", help="run one master in this process (used internally)")
    args = parser.parse_args()
    if args.master:
        one_master(args.master, args.people, args.repeat)
        return
    for master in ("local[1]", "local[2]"):  # one process each: a JVM's master is fixed
        subprocess.run(
            [sys.executable, __file__, "--master", master, "--people", str(args.people), "--repeat", str(args.repeat)], check=True
        )


if __name__ == "__main__":
    main()
