"""Throughput of the `join:` step (time window, streaming) vs a hand-written native Spark interval
join on the same data, at local[1] and local[2] (target: step ≥ 0.9× the hand-written one).

Both are stream-stream joins with the same watermarks, run with trigger availableNow over the
same generated files, and both write their result to a Delta table through foreachBatch +
delta-rs; only the hand-written one has no Tributary around it.

    .venv/bin/python benchmarks/bench_join.py [--people 300000] [--repeat 3]
A run also pays a fixed ~0.5 s (lock, run log, checkpoint bookkeeping): small inputs show it.

    .venv/bin/python benchmarks/bench_join.py --few-keys [--streaming [--months-per-batch 1]] [--scale 0.1]

A time join on a key with 3 values (a year of flights from 3 airports, ~337k rows × scale, with
the hourly weather of the 3 airports, 26,280 rows; weather within the hour before departure), in
batch or (--streaming) as two streams of monthly files: the `join:` step (keys + a time bucket) ÷ the same join written by hand as Spark plans it
(keys + range: every flight meets every weather row of its airport). Both count the same pairs
(checked). Medians of --repeat rounds after an untimed warm-up round of both, the rounds alternating
which goes first. Target: ≥ 10× faster. The hand-written join's cost grows with the square of the rows
per key, so --scale 1 takes it ~15 minutes here.

    .venv/bin/python benchmarks/bench_join.py --count-stream [--files 8] [--rows 12] [--repeat 3] [--same-files]

A count-window join (`last:`, inner and left) on two streams of small files, one file per
micro-batch: seconds per micro-batch ÷ the same stream through a SQL step that passes the rows on
(the baseline: the run's floor of sources, micro-batches, state and Delta commits). Small
micro-batches are where a count join's fixed work per micro-batch (its Spark jobs) shows. Medians
of --repeat rounds after an untimed warm-up round of each, the three alternated round by round.
Each round streams its own files, a day later in event time (new watermarks, as a real stream
meets); --same-files reruns the warm-up's files, whose values Spark has compiled code for.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, record

sys.path.insert(0, str(REPO))


def native(spark, data: Path, out: Path) -> int:
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

    def commit(batch, batch_id):
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


def tributary(spark, project: Path, warehouse: Path) -> int:
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
        if master in ("local[1]", "local[2]"):
            record(f"join.stream_local{master[6]}", ratio)


FEW_KEYS_PIPELINE = """
name: flights_weather
mode: {mode}
sources:
  flights: {{format: parquet, path: {data}/flights, schema: "origin STRING, ts TIMESTAMP, flight BIGINT"{stream}}}
  weather: {{format: parquet, path: {data}/weather, schema: "origin STRING, ts TIMESTAMP, temp DOUBLE"{stream}}}
steps:
  flights_weather:
    join: {{left: flights, right: weather, on: [origin], event_time: ts, within: {{before: 1h, after: 0s}}}}
outputs:
  flights_weather: {{mode: {output_mode}}}
"""
STREAM_SOURCE = ", event_time: ts, watermark: 1h, max_files_per_trigger: {files}"
MONTHS = 12  # streaming: one file per month and source, --months-per-batch of them per micro-batch


def few_keys_data(data: Path, scale: float) -> tuple[int, int]:
    """A year of flights from 3 airports and their hourly weather, one Parquet file per month and
    source, file times in month order (a stream reads them in that order)."""
    import os

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(5)
    start = np.datetime64("2025-01-01T00:00:00", "us")
    year_us = 365 * 24 * 3600 * 1_000_000
    flights = int(337_000 * scale)
    origins = np.array(["EWR", "JFK", "LGA"])
    hours = np.arange(365 * 24)
    tables = {
        "flights": pa.table(
            {
                "origin": origins[rng.integers(0, 3, flights)],
                "ts": np.sort(start + rng.integers(0, year_us, flights).astype("timedelta64[us]")),
                "flight": np.arange(flights),
            }
        ),
        "weather": pa.table(
            {
                "origin": np.repeat(origins, len(hours)),
                "ts": np.tile(start + (hours * 3600 * 1_000_000).astype("timedelta64[us]"), 3),
                "temp": rng.normal(12, 8, 3 * len(hours)),
            }
        ),
    }
    for name, table in tables.items():
        (data / name).mkdir(parents=True)
        month = np.array(table["ts"].to_numpy().astype("datetime64[M]").astype(int) - 660)  # 2025-01 is month 660
        for m in range(MONTHS):
            path = data / name / f"part-{m:02d}.parquet"
            pq.write_table(table.filter(pa.array(month == m)), path)
            os.utime(path, (1_700_000_000 + m, 1_700_000_000 + m))
    return flights, 3 * len(hours)


def hand_written(spark, data: Path, streaming: bool, months_per_batch: int = 1) -> int:
    """The interval join as Spark plans it when written by hand: keys + range (count only)."""
    from pyspark.sql import functions as F

    def read(name: str, schema: str):
        if not streaming:
            return spark.read.parquet(str(data / name)).alias(name[0])
        reader = spark.readStream.schema(schema).option("maxFilesPerTrigger", months_per_batch).parquet(str(data / name))
        return reader.withWatermark("ts", "1 hour").alias(name[0])

    a = read("flights", "origin STRING, ts TIMESTAMP, flight BIGINT")
    b = read("weather", "origin STRING, ts TIMESTAMP, temp DOUBLE")
    hand = a.join(
        b,
        (F.col("f.origin") == F.col("w.origin"))
        & (F.col("w.ts") >= F.col("f.ts") - F.expr("INTERVAL 1 HOUR"))
        & (F.col("w.ts") <= F.col("f.ts")),
    )
    if not streaming:
        return hand.count()
    counts: list[int] = []
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            hand.writeStream.foreachBatch(lambda batch, _: counts.append(batch.count()))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return sum(counts)


def few_keys(scale: float, streaming: bool, months_per_batch: int = 1, repeat: int = 3) -> None:
    """The step and the hand-written join over the same files, `repeat` rounds each after one
    untimed warm-up round of both, alternating which goes first; the ratio of the medians."""
    import shutil

    from framework.compiler import compile_pipeline
    from framework.engine.runner import run_pipeline
    from framework.engine.session import spark_session
    from framework.profiles import Profile, SparkSettings, load_profile
    from framework.project import Project

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = root / "data"
        flights, weather = few_keys_data(data, scale)
        (root / "pipelines").mkdir()
        (root / "configs").mkdir()
        (root / "configs" / "local.yaml").write_text("warehouse: ./warehouse\n")
        (root / "pipelines" / "flights_weather.yaml").write_text(
            FEW_KEYS_PIPELINE.format(
                data=data,
                mode="streaming" if streaming else "batch",
                stream=STREAM_SOURCE.format(files=months_per_batch) if streaming else "",
                output_mode="append" if streaming else "overwrite",
            )
        )
        spark = spark_session(Profile(spark=SparkSettings(master="local[2]", conf={"spark.sql.shuffle.partitions": 4})))
        project = Project(root)
        profile = load_profile(project)
        compiled = compile_pipeline(project, root / "pipelines" / "flights_weather.yaml", profile)

        def step() -> int:
            shutil.rmtree(root / "warehouse", ignore_errors=True)  # a fresh stream each round
            result = run_pipeline(compiled, profile, spark=spark)
            return sum(o.rows or 0 for o in result.outputs if o.name == "flights_weather")

        def hand() -> int:
            return hand_written(spark, data, streaming, months_per_batch)

        runs = {"step": step, "hand": hand}
        times: dict[str, list[float]] = {"step": [], "hand": []}
        pairs: dict[str, int] = {}
        for i in range(repeat + 1):  # round 0 warms both up (JIT, caches) and is not counted
            for name in ("step", "hand") if i % 2 else ("hand", "step"):
                began = time.perf_counter()
                pairs[name] = runs[name]()
                if i:
                    times[name].append(time.perf_counter() - began)
        step_s, hand_s = statistics.median(times["step"]), statistics.median(times["hand"])
        mode = f"streaming, {-(-MONTHS // months_per_batch)} micro-batch(es)" if streaming else "batch"
        load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
        print(f"few keys ({mode}): {flights:,} flights × {weather:,} weather rows, 3 key values, 1 h window (scale {scale:g})")
        print(f"  medians of {repeat} rounds after a warm-up, alternated; load average {load}")
        print(f"  tributary join step (run, Delta write included): {step_s:7.1f} s, {pairs['step']:,} pairs"
              f"  (rounds {', '.join(f'{t:.1f}' for t in times['step'])})")  # fmt: skip
        print(f"  hand-written interval join (count only):         {hand_s:7.1f} s, {pairs['hand']:,} pairs"
              f"  (rounds {', '.join(f'{t:.1f}' for t in times['hand'])})")  # fmt: skip
        print(
            f"  ratio hand-written / step: {hand_s / step_s:.1f} x faster (target >= 10: {'met' if hand_s / step_s >= 10 else 'MISSED'});"
            f" same pairs: {pairs['step'] == pairs['hand']}"
        )
        if scale == 1 and months_per_batch == 1:  # the published setting
            record("join.few_keys_streaming" if streaming else "join.few_keys_batch", hand_s / step_s, digits=1)


COUNT_STREAM_PIPELINE = """
name: {name}
mode: streaming
sources:
  hits: {{format: json, path: {data}/hits, schema: "user STRING, ts TIMESTAMP, ms INT", event_time: ts, watermark: 10s, max_files_per_trigger: 1}}
  clicks: {{format: json, path: {data}/clicks, schema: "user STRING, ts TIMESTAMP, ms INT", event_time: ts, watermark: 10s, max_files_per_trigger: 1}}
steps:
  pairs:
    {step}
outputs:
  pairs: {{mode: append}}
"""
COUNT_STREAM_STEPS = {
    "inner": "join: {left: hits, right: clicks, on: [user], last: {left: 3, right: 3}, tiebreak: [ms]}",
    "left": "join: {left: hits, right: clicks, on: [user], type: left, last: {left: 3, right: 3}, tiebreak: [ms]}",
    "floor": "sql: SELECT * FROM {{ source('hits') }} UNION ALL SELECT * FROM {{ source('clicks') }}",
}


def count_stream(files: int, rows: int, repeat: int, fresh: bool = True) -> None:
    """Each step as a stream of `files` micro-batches of `rows` rows a side, in one process: the
    median seconds per micro-batch (a run's time ÷ its micro-batches) and its ratio to the floor.
    Each round reads its own files, a day of event time later than the round before (`fresh`), as
    a stream brings new event times and so new watermarks; the same files every round would give
    the later rounds the code Spark generated for the first one's values (bench_swa.round_copy)."""
    import json
    import random

    from framework.compiler import compile_pipeline
    from framework.engine.runner import run_pipeline
    from framework.engine.session import spark_session
    from framework.profiles import Profile, SparkSettings, load_profile
    from framework.project import Project

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pipelines").mkdir()
        (root / "configs").mkdir()
        (root / "configs" / "local.yaml").write_text("warehouse: ./warehouse\n")
        spark = spark_session(Profile(spark=SparkSettings(master="local[2]", conf={"spark.sql.shuffle.partitions": 4})))
        project = Project(root)
        profile = load_profile(project)

        def round_pipelines(i: int) -> dict:
            """Round i's files (the same rows, i days later) and its pipelines over them."""
            rng, data = random.Random(3), root / "data" / f"round{i}"
            for side in ("hits", "clicks"):
                (data / side).mkdir(parents=True, exist_ok=True)
                for f in range(files):
                    lines = [
                        json.dumps(
                            {
                                "user": f"u{rng.randrange(4)}",
                                "ts": f"2026-11-{2 + i:02d}T08:{f:02d}:{i_ * 60 // rows:02d}Z",
                                "ms": rng.randrange(1000),
                            }
                        )
                        for i_ in range(rows)
                    ]
                    path = data / side / f"part-{f:03d}.json"
                    path.write_text("\n".join(lines) + "\n")
                    os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # a stream takes files in this order
            pipelines = {}
            for name, step in COUNT_STREAM_STEPS.items():
                path = root / "pipelines" / f"pairs_{name}_{i}.yaml"
                path.write_text(COUNT_STREAM_PIPELINE.format(name=f"pairs_{name}_{i}", data=data, step=step))
                pipelines[name] = compile_pipeline(project, path, profile)
            return pipelines

        same = round_pipelines(0)
        times: dict[str, list[float]] = {name: [] for name in COUNT_STREAM_STEPS}
        emitted: dict[str, int] = {}
        for i in range(repeat + 1):  # round 0 warms each up (JIT, caches) and is not counted
            compiled = round_pipelines(i) if fresh and i else same
            order = list(compiled)[i % 3 :] + list(compiled)[: i % 3]
            for name in order:
                shutil.rmtree(root / "warehouse", ignore_errors=True)  # a fresh stream each round
                began = time.perf_counter()
                result = run_pipeline(compiled[name], profile, spark=spark)
                if i:
                    times[name].append((time.perf_counter() - began) / files)
                emitted[name] = sum(o.rows or 0 for o in result.outputs)
        floor = statistics.median(times["floor"])
        load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
        print(
            f"count-window join on streams: {files} micro-batches of {rows} rows a side; medians of {repeat} rounds, load {load}"
        )
        for name, values in times.items():
            per = statistics.median(values)
            print(f"  {name:>5}: {per:5.2f} s a micro-batch, {per / floor:4.2f} x the floor ({emitted[name]:,} rows out;"
                  f" rounds {', '.join(f'{v:.2f}' for v in values)})")  # fmt: skip
        if (files, rows) == (8, 12) and fresh:  # the published setting
            record("join.count_stream_inner", statistics.median(times["inner"]) / floor)
            record("join.count_stream_left", statistics.median(times["left"]) / floor)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--few-keys", action="store_true", help="the low-cardinality key shape (batch)")
    parser.add_argument("--streaming", action="store_true", help="--few-keys: as streams of monthly files")
    parser.add_argument("--months-per-batch", type=int, default=1, help="--streaming: months per micro-batch (12: one)")
    parser.add_argument("--scale", type=float, default=0.1, help="--few-keys: share of the ~337k flights")
    parser.add_argument("--people", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", help="run one master in this process (used internally)")
    parser.add_argument("--count-stream", action="store_true", help="a count-window join's micro-batches vs the floor")
    parser.add_argument("--files", type=int, default=8, help="--count-stream: files (micro-batches) a side")
    parser.add_argument("--rows", type=int, default=12, help="--count-stream: rows a file")
    parser.add_argument(
        "--same-files", dest="fresh", action="store_false", help="--count-stream: every round streams the warm-up's files"
    )
    args = parser.parse_args()
    if args.count_stream:
        count_stream(args.files, args.rows, args.repeat, fresh=args.fresh)
        return
    if args.few_keys:
        few_keys(args.scale, args.streaming, args.months_per_batch, args.repeat)
        return
    if args.master:
        one_master(args.master, args.people, args.repeat)
        return
    for master in ("local[1]", "local[2]"):  # one process each: a JVM's master is fixed
        subprocess.run(
            [sys.executable, __file__, "--master", master, "--people", str(args.people), "--repeat", str(args.repeat)], check=True
        )


if __name__ == "__main__":
    main()
