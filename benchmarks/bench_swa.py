"""SWA throughput, wall time and state against named baselines, on one generated trace.

    .venv/bin/python benchmarks/bench_swa.py [--instances 88000] [--repeat 1] [--files-per-trigger 10]
        [--only streaming|batch|state] [--floor] [--warmup 1] [--same-files]

88,000 instances ≈ 1M tuples (tributary generate service-trace, Parquet, two streams).
Key head+client+time, n = 13, t = 22 s, the same aggregates everywhere. Prints, in one run:

1. streaming: `tributary run` of an SWA pipeline (trigger availableNow, the same files per
   micro-batch) ÷ a hand-written native streaming `session_window` aggregation (gap 22 s, same
   watermark, foreachBatch into Delta via delta-rs): the ratio of the medians, and the median
   ratio of each two rounds (both run twice back to back, in either order). Target ≥ 1.5 (the source paper's case: less state and less work than session windows).
   Each round reads its own copy of the trace, shifted in event time, as a stream brings new
   event times and so new watermarks (--same-files: every round the same files, whose
   watermarks, and the code Spark generated for them, the warm-up has seen already).
   --floor: each side's floor too (the same stream, every tuple read, none emitted) and native's
   time over Tributary's floor, the most any stateful step could reach here; the keyed floor (the
   same stream, each micro-batch shuffled by the key and sorted by key and event time, as any SWA
   on Spark must order each key's tuples, nothing emitted) and native's time over it, the most any
   SWA built on Spark's shuffle could reach here, whatever runs it; with the batch part,
   the streaming SWA's throughput over the batch SWA's (target ≥ 0.6) and the floor's, and
   Spark's own: native session windows streaming over the same in batch.
   --spark-state: also SWA as a sketch of one of Spark's own stateful operators
   (benchmarks/spark_state/SwaGroupState.java, compiled with javac): what that design, with no
   per-micro-batch plan of Tributary's, could reach against native on the same stream; twice:
   with the benchmark's aggregates written in Java, and emitting the final windows' tuples for
   Spark SQL to aggregate per micro-batch (what a step taking any Spark SQL aggregate would need).
2. batch: the swa step's plan ÷ plain `groupBy(key).agg(...)`, both over the same files written
   to Spark's `noop` sink (compute only). Target ≤ 1.5.
3. state: peak open windows and tuples held by SWA vs the tumbling baseline at W = 32000 (from
   each operator's unit timeline over the whole trace), the peak state rows the streaming SWA run
   actually kept, and the memory those rows take (Arrow bytes per tuple of this trace).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, SERVICE_TRACE_SCHEMA, append_stream_to_delta, record

sys.path.insert(0, str(REPO))

SCHEMA = SERVICE_TRACE_SCHEMA
KEYS = ["head_service", "client_ip", "instance_ts"]
AGGREGATES = {
    "total_ms": "sum(response_ms)",
    "slowest_ms": "max(response_ms)",
    "bytes": "sum(bytes)",
    "services": "collect_set(requested_service)",
}

#: both sources, micro-batch by micro-batch, and their union (the same in every pipeline here)
CALLS = """
sources:
  static_calls: {{format: parquet, path: {data}/static, schema: "{schema}", event_time: ts, watermark: 10s, max_files_per_trigger: {per_trigger}}}
  image_calls: {{format: parquet, path: {data}/images, schema: "{schema}", event_time: ts, watermark: 10s, max_files_per_trigger: {per_trigger}}}
steps:
  calls:
    union: [static_calls, image_calls]
"""

PIPELINE = (
    """
name: swa_bench
mode: {mode}"""
    + CALLS
    + """  instances:
    {kind}:
      input: calls
      key: head+client+time
      columns: {{head: head_service, client: client_ip, time: instance_ts}}
      size: {size}
      {timeout}
      event_time: ts
      aggregates: {{{aggregates}}}
      truth: {{instance: instance_id, primary: is_primary}}
outputs:
  instances: {{mode: append}}
"""
)

#: The floor of a streaming run (--floor): the same sources, micro-batches, run log and commits,
#: and a step that reads every tuple and emits nothing (a filter no Parquet statistic can answer)
FLOOR_PIPELINE = (
    """
name: swa_floor
mode: streaming"""
    + CALLS
    + """  nothing:
    sql: select * from {{{{ ref('calls') }}}} where {nothing}
outputs:
  nothing: {{mode: append}}
"""
)
#: true for no tuple of the trace, and only known by reading each one
NOTHING = "xxhash64(client_ip, ts, response_ms) = 42"


def write_pipeline(root: Path, name: str, mode: str, kind: str, size: int, data: Path, per_trigger: int) -> Path:
    path = root / "pipelines" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        PIPELINE.format(
            mode=mode,
            data=data,
            schema=SCHEMA,
            per_trigger=per_trigger,
            kind=kind,
            size=size,
            timeout="timeout: 22s" if kind == "swa" else "",
            aggregates=", ".join(f"{k}: {v}" for k, v in AGGREGATES.items()),
        ).replace("name: swa_bench", f"name: {name}")
    )
    return path


def streaming_tributary(spark, root: Path, pipeline: Path, warehouse: Path) -> tuple[int, dict]:
    from framework.compiler import compile_pipeline
    from framework.engine.runner import run_pipeline
    from framework.profiles import load_profile
    from framework.project import Project

    project = Project(root)
    profile = load_profile(project).model_copy(update={"warehouse": str(warehouse)})
    result = run_pipeline(compile_pipeline(project, pipeline, profile), profile, spark=spark)
    out = result.outputs[0]
    return out.rows or 0, out.observed


def native_calls(spark, data: Path, per_trigger: int):
    """Both sources as streams read by hand, micro-batch by micro-batch as the pipelines read them."""

    def stream(folder: str):
        reader = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", per_trigger)
        return reader.parquet(str(data / folder)).withWatermark("ts", "10 seconds")

    return stream("static").unionByName(stream("images"))


def streaming_native(spark, data: Path, out: Path, per_trigger: int, floor: bool = False) -> int:
    """Spark's own session windows over the union, written the way one would by hand; `floor`:
    the same stream with no aggregation, every tuple read and none emitted (NOTHING)."""
    from pyspark.sql import functions as F

    calls = native_calls(spark, data, per_trigger)
    if floor:
        sessions = calls.where(NOTHING)
        columns = calls.columns
    else:
        sessions = calls.groupBy(F.session_window("ts", "22 seconds"), *KEYS).agg(
            F.count(F.lit(1)).alias("tuple_count"), *[F.expr(e).alias(n) for n, e in AGGREGATES.items()]
        )
        columns = [*KEYS, "session_window.*", "tuple_count", *AGGREGATES]
    return append_stream_to_delta(sessions, out, columns)


def streaming_keyed_floor(spark, data: Path, out: Path, per_trigger: int) -> int:
    """The keyed floor: the native stream with each micro-batch hashed into the shuffle partitions
    by the key and sorted by key and event time (the work before any fold of each key's tuples in
    order, Tributary's or a Spark stateful operator's: both have Spark shuffle and sort them),
    nothing emitted. The filter is not deterministic, so the optimizer cannot move it below the
    sort; it is false for every row."""
    from pyspark.sql import functions as F

    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))

    def ordered_nothing(batch):
        return batch.repartition(partitions, *KEYS).sortWithinPartitions(*KEYS, "ts").where(F.monotonically_increasing_id() < 0)

    return append_stream_to_delta(native_calls(spark, data, per_trigger), out, per_batch=ordered_nothing)


SPARK_STATE_SOURCE = Path(__file__).parent / "spark_state" / "SwaGroupState.java"


def spark_state_jar(folder: Path) -> Path:
    """The sketch of SWA as a Spark stateful operator, compiled against pyspark's jars."""
    import subprocess
    import zipfile

    import pyspark

    classes = folder / "spark_state_classes"
    jars = Path(pyspark.__file__).parent / "jars"
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", f"{jars}/*", str(SPARK_STATE_SOURCE)], check=True)
    jar = folder / "spark-state-sketch.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        for path in classes.rglob("*.class"):
            archive.write(path, path.relative_to(classes))
    return jar


def streaming_spark_state(spark, data: Path, out: Path, per_trigger: int, sql_aggregates: bool = False) -> int:
    """The sketch (SwaGroupState) on the same stream as native, written the same way (foreachBatch
    into Delta via delta-rs); the key as one string, the event time in micros. `sql_aggregates`:
    the operator emits each final window's tuples, and each micro-batch aggregates them with the
    benchmark's Spark SQL aggregates (a second, stateless step), as a real step would have to."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    calls = native_calls(spark, data, per_trigger)
    keyed = calls.where(F.col("ts").isNotNull() & F.col("head_service").isNotNull())
    tuples = keyed.select(
        F.concat_ws("\u0001", *[F.col(k).cast("string") for k in KEYS]).alias("k"),
        F.unix_micros("ts").alias("micros"),
        "response_ms",
        "bytes",
        "requested_service",
        "ts",
    )
    if not sql_aggregates:
        windows = DataFrame(spark._jvm.tributarybench.SwaGroupState.windows(tuples._jdf, 13, 22_000_000), spark)
        return append_stream_to_delta(windows, out)

    def aggregated(batch):
        return batch.groupBy("k", "window_start", "window_end", "closed_by").agg(
            F.count(F.lit(1)).alias("tuple_count"), *[F.expr(e).alias(n) for n, e in AGGREGATES.items()]
        )

    emitted = DataFrame(spark._jvm.tributarybench.SwaGroupState.tuples(tuples._jdf, 13, 22_000_000), spark)
    return append_stream_to_delta(emitted, out, per_batch=aggregated)


def batch_swa(spark, data: Path) -> None:
    from framework.operators import StepContext, build_step
    from framework.spec.steps import SwaStep

    step = SwaStep.model_validate(
        {
            "swa": {
                "input": "calls",
                "key": "head+client+time",
                "columns": {"head": "head_service", "client": "client_ip", "time": "instance_ts"},
                "size": 13,
                "timeout": "22s",
                "event_time": "ts",
                "aggregates": AGGREGATES,
            }
        }
    )
    calls = spark.read.schema(SCHEMA).parquet(str(data / "static"), str(data / "images"))
    build_step("swa", StepContext(spark, "instances", step, {"calls": calls})).write.format("noop").mode("overwrite").save()


def batch_group_by(spark, data: Path) -> None:
    from pyspark.sql import functions as F

    calls = spark.read.schema(SCHEMA).parquet(str(data / "static"), str(data / "images"))
    units = calls.groupBy(*KEYS).agg(
        F.min("ts"), F.max("ts"), F.count(F.lit(1)), *[F.expr(e).alias(n) for n, e in AGGREGATES.items()]
    )
    units.write.format("noop").mode("overwrite").save()


def batch_session_window(spark, data: Path) -> None:
    """Native session windows in batch over the same files (compute only, as the other batch runs)."""
    from pyspark.sql import functions as F

    calls = spark.read.schema(SCHEMA).parquet(str(data / "static"), str(data / "images"))
    sessions = calls.groupBy(F.session_window("ts", "22 seconds"), *KEYS).agg(
        F.count(F.lit(1)).alias("tuple_count"), *[F.expr(e).alias(n) for n, e in AGGREGATES.items()]
    )
    sessions.write.format("noop").mode("overwrite").save()


def evaluate(spark, root: Path, pipeline: Path):  # a StepEvaluation
    from framework.compiler import compile_pipeline
    from framework.engine.runner import plan_frames
    from framework.integration.evaluation import evaluate_step
    from framework.profiles import load_profile
    from framework.project import Project

    project = Project(root)
    profile = load_profile(project)
    frames = plan_frames(compile_pipeline(project, pipeline, profile), profile, spark)
    return evaluate_step(frames.contexts["instances"])


def timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=88_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--files-per-trigger", type=int, default=10)
    parser.add_argument(
        "--warmup", type=int, default=1, help="streaming: untimed rounds of every side before the timed ones (JIT warm-up)"
    )
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--only", choices=["streaming", "batch", "state"], help="run one part of the bench")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="streaming: also time each side's floor (the same stream, every tuple read, none emitted)",
    )
    parser.add_argument(
        "--same-files",
        dest="fresh",
        action="store_false",
        help="streaming: every round reads the same files (by default each reads its own copy, shifted in event time)",
    )
    parser.add_argument(
        "--spark-state",
        action="store_true",
        help="streaming: also time SWA as a sketch of a Spark stateful operator (benchmarks/spark_state)",
    )
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
        tuples = trace.tuples
        conf: dict[str, object] = {"spark.sql.shuffle.partitions": 4, "spark.ui.enabled": False}
        if args.spark_state:
            conf["spark.jars"] = str(spark_state_jar(Path(tmp)))
        spark = spark_session(Profile(spark=SparkSettings(master=args.master, conf=conf)))
        stream_file = write_pipeline(root, "swa_stream", "streaming", "swa", 13, data, args.files_per_trigger)
        floor_file = root / "pipelines" / "swa_floor.yaml"
        floor_file.write_text(
            FLOOR_PIPELINE.format(data=data, schema=SCHEMA, per_trigger=args.files_per_trigger, nothing=NOTHING)
        )
        swa_file = write_pipeline(root, "swa_batch", "batch", "swa", 13, data, args.files_per_trigger)
        tumbling_file = write_pipeline(root, "tumbling_batch", "batch", "tumbling", 32000, data, args.files_per_trigger)
        print(
            f"trace: {tuples:,} tuples, {trace.instances:,} instances ({args.master}, {args.files_per_trigger} files per trigger)"
        )

        parts = {args.only} if args.only else {"streaming", "batch", "state"}
        streamed: dict[str, float] = {}
        observed = None
        if "streaming" in parts:
            observed = stream_bench(spark, root, data, Path(tmp), tuples, stream_file, floor_file, args, streamed)
        if "batch" in parts:
            medians = batch_bench(spark, data, args.repeat, native=bool(streamed) and args.floor)
            batch = medians["swa step (batch)"]
            if streamed:  # throughput is tuples per second: the ratio of the times, inverted
                vs_batch = batch / streamed["tributary swa (streaming)"]
                print(
                    f"  streaming swa ÷ batch swa, throughput: {vs_batch:.2f}  (target >= 0.6: {'met' if vs_batch >= 0.6 else 'MISSED'})"
                )
                record("swa.streaming_vs_batch", vs_batch)
                if args.floor:
                    floor_vs_batch = batch / streamed["tributary floor (reads all, emits none)"]
                    print(
                        f"  tributary's streaming floor ÷ batch swa, throughput: {floor_vs_batch:.2f} (the most a stream could reach)"
                    )
                    record("swa.streaming_floor_vs_batch", floor_vs_batch)
                    native = medians[NATIVE_BATCH] / streamed["native session_window (streaming)"]
                    print(f"  native session_window streaming ÷ batch, throughput: {native:.2f} (Spark's own ratio, same files)")
                    record("swa.native_streaming_vs_batch", native)
        if "state" in parts:
            state_bench(spark, root, data, swa_file, tumbling_file, observed)


def round_copy(root: Path, data: Path, tmp: Path, i: int, per_trigger: int) -> tuple[Path, Path, Path]:
    """Round `i`'s own copy of the trace (its files, their order, and a pipeline and a floor
    pipeline reading them), every event time `i` + 10 days later than the trace's. A stream sees
    new event times, so new watermarks, in every micro-batch; rerunning the same files would give
    every round the watermarks of the first, and with them the code Spark generated and compiled
    for them (its generated code is cached by its source, which a literal watermark is part of):
    the later rounds would measure a cache a real stream never hits (framework.operators.batch_values)."""
    import os

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    copy = tmp / f"round{i}"
    if not copy.exists():
        for source in sorted(data.rglob("*.parquet"), key=lambda p: p.stat().st_mtime_ns):
            table = pq.read_table(source)
            shifted = pc.add(table.column("ts"), pa.scalar((i + 10) * 86_400_000_000, pa.duration("us")))
            target = copy / source.relative_to(data)
            target.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table.set_column(table.schema.get_field_index("ts"), "ts", shifted), target)
            os.utime(target, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns))  # the files' order
    swa_file = write_pipeline(root, f"swa_stream_{i + 100}", "streaming", "swa", 13, copy, per_trigger)
    floor_file = root / "pipelines" / f"swa_floor_{i + 100}.yaml"
    floor = FLOOR_PIPELINE.format(data=copy, schema=SCHEMA, per_trigger=per_trigger, nothing=NOTHING)
    floor_file.write_text(floor.replace("name: swa_floor", f"name: swa_floor_{i + 100}"))
    return copy, swa_file, floor_file


def stream_bench(
    spark, root: Path, data: Path, tmp: Path, tuples: int, stream_file: Path, floor_file: Path, args, medians: dict[str, float]
) -> dict:
    """1. streaming throughput, after `--warmup` untimed rounds of every side on the same trace
    (JIT, Python workers, file cache: a smaller warm-up left the first timed runs of both ~30 %
    slower), in rounds of one run each, alternating which goes first. Each run's JIT compile time
    (the JVM's own count) is printed with it: on 2 cores the JIT's threads take CPU from the tasks
    for many runs after the first (docs/swa.md). This VM's speed drifts by up to 2x over minutes,
    so besides the ratio of the medians it prints the median ratio of each two rounds.
    With --floor, each round also runs each side's floor (FLOOR_PIPELINE, and the native query
    without its aggregation): native's time over Tributary's floor is the most any stateful step
    run by `tributary run` could reach against native on this stream.
    Returns the figures the last SWA run observed (its state peak); `medians` is told each
    label's median seconds."""
    swa_label, native_label = "tributary swa (streaming)", "native session_window (streaming)"
    floor_label, native_floor_label = "tributary floor (reads all, emits none)", "native floor (reads all, emits none)"
    keyed_label = "keyed floor (shuffled, sorted, none)"
    sketch_label = "swa sketch as a spark stateful operator"
    sql_sketch_label = "... its windows' tuples, SQL aggregates"
    labels = [swa_label, native_label] + ([floor_label, native_floor_label, keyed_label] if args.floor else [])
    labels += [sketch_label, sql_sketch_label] if args.spark_state else []
    times: dict[str, list[float]] = {label: [] for label in labels}
    compiling: dict[str, list[float]] = {label: [] for label in labels}  # JIT compile seconds per run
    jit = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getCompilationMXBean()
    observed: dict = {}
    counts: dict[str, int] = {}

    def run(label: str, i: int) -> float:
        nonlocal observed
        fresh, swa_file, nothing_file = (
            round_copy(root, data, tmp, i, args.files_per_trigger) if args.fresh else (data, stream_file, floor_file)
        )
        began = time.perf_counter()
        if label == swa_label:
            counts[label], observed = streaming_tributary(spark, root, swa_file, tmp / f"wh{i}")
        elif label == floor_label:
            counts[label], _ = streaming_tributary(spark, root, nothing_file, tmp / f"floor{i}")
        elif label == keyed_label:
            out = tmp / f"keyed{i}"
            counts[label] = streaming_keyed_floor(spark, fresh, out, args.files_per_trigger)
            shutil.rmtree(f"{out}.ckpt", ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
        elif label in (sketch_label, sql_sketch_label):
            out = tmp / f"sketch{i}"
            counts[label] = streaming_spark_state(spark, fresh, out, args.files_per_trigger, label == sql_sketch_label)
            shutil.rmtree(f"{out}.ckpt", ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
        else:
            counts[label] = streaming_native(
                spark, fresh, tmp / f"native{i}", args.files_per_trigger, floor=label == native_floor_label
            )
            shutil.rmtree(tmp / f"native{i}.ckpt", ignore_errors=True)
            shutil.rmtree(tmp / f"native{i}", ignore_errors=True)
        return time.perf_counter() - began

    for w in range(args.warmup):
        for label in labels:
            run(label, -1 - w)
    for i in range(args.repeat):
        for label in labels[i % len(labels) :] + labels[: i % len(labels)]:  # the order rotates by round
            compiled_ms = jit.getTotalCompilationTime()
            times[label].append(run(label, i))
            compiling[label].append((jit.getTotalCompilationTime() - compiled_ms) / 1000)
    units, sessions = counts[swa_label], counts[native_label]
    rates = {label: tuples / statistics.median(values) for label, values in times.items()}
    for label, values in times.items():
        runs = ", ".join(f"{v:.1f}s" for v in values)
        jit_s = ", ".join(f"{c:.1f}" for c in compiling[label])
        print(f"  {label:>35}: {rates[label]:>9,.0f} tuples/s  (runs {runs}; JIT compiling during each: {jit_s} s)")
    print(f"    swa emitted {units:,} windows; session_window emitted {sessions:,} sessions")
    ratio = rates[swa_label] / rates[native_label]
    # Two consecutive rounds run both in either order (whichever runs second was seen to be
    # slower), within a minute or so (the VM's speed drifts slower than that): their ratio
    # compares the two at one machine speed, without favouring either.
    blocks = [sum(times[native_label][i : i + 2]) / sum(times[swa_label][i : i + 2]) for i in range(0, args.repeat - 1, 2)]
    paired = f"{statistics.median(blocks):.2f} (median of {len(blocks)} pairs of rounds)" if blocks else "n/a (--repeat < 2)"
    met = ratio >= 1.5 and (not blocks or statistics.median(blocks) >= 1.5)
    print(
        f"  streaming ratio swa / native session_window (baseline): {ratio:.2f} (medians), {paired}"
        f"  (target >= 1.5: {'met' if met else 'MISSED'})"
    )
    record("swa.streaming_medians", ratio)
    if blocks:
        record("swa.streaming_pairs", statistics.median(blocks))
    if args.floor:
        native, floor = statistics.median(times[native_label]), statistics.median(times[floor_label])
        swa, native_floor = statistics.median(times[swa_label]), statistics.median(times[native_floor_label])
        print(
            f"  floors: tributary {floor:.2f} s, native {native_floor:.2f} s; above its floor swa takes {swa - floor:.2f} s, "
            f"session_window {native - native_floor:.2f} s"
        )
        print(f"  the most a stateful step could reach against native here (native ÷ tributary's floor): {native / floor:.2f}")
        record("swa.streaming_ceiling", native / floor)
        keyed = statistics.median(times[keyed_label])
        print(
            f"  keyed floor {keyed:.2f} s: the most any SWA on Spark's shuffle could reach against native here "
            f"(native ÷ the keyed floor): {native / keyed:.2f}; swa above the keyed floor {swa - keyed:.2f} s, "
            f"session_window {native - keyed:.2f} s"
        )
        record("swa.streaming_keyed_ceiling", native / keyed)
    if args.spark_state:
        sketch = rates[sketch_label] / rates[native_label]
        print(
            f"  swa sketch as a spark stateful operator / native session_window: {sketch:.2f} (medians; "
            f"{counts[sketch_label]:,} windows, tributary's swa {units:,}): what that design could reach here"
        )
        record("swa.spark_state_sketch", sketch)
        with_sql = rates[sql_sketch_label] / rates[native_label]
        print(
            f"  the same sketch emitting its windows' tuples, aggregated by Spark SQL per micro-batch / native "
            f"session_window: {with_sql:.2f} (medians; {counts[sql_sketch_label]:,} windows): that design with any aggregate"
        )
        record("swa.spark_state_sql_sketch", with_sql)
    medians.update({label: statistics.median(values) for label, values in times.items()})
    return observed


NATIVE_BATCH = "native session_window (batch)"


def batch_bench(spark, data: Path, repeat: int, native: bool = False) -> dict[str, float]:
    """2. batch wall time; returns each label's median seconds. `native`: also Spark's session
    windows in batch over the same files, for Spark's own streaming ÷ batch ratio."""
    batch: dict[str, list[float]] = {"swa step (batch)": [], "groupBy(key).agg (batch)": []}
    if native:
        batch[NATIVE_BATCH] = []
    for _ in range(repeat + 1):  # the first round warms both up and is not counted
        batch["swa step (batch)"].append(timed(lambda: batch_swa(spark, data)))
        batch["groupBy(key).agg (batch)"].append(timed(lambda: batch_group_by(spark, data)))
        if native:
            batch[NATIVE_BATCH].append(timed(lambda: batch_session_window(spark, data)))
    medians = {label: statistics.median(values[1:]) for label, values in batch.items()}
    for label, values in batch.items():
        print(f"  {label:>35}: {medians[label]:>6.1f} s  (runs {', '.join(f'{v:.1f}s' for v in values[1:])})")
    ratio = medians["swa step (batch)"] / medians["groupBy(key).agg (batch)"]
    print(f"  batch ratio swa / groupBy (baseline): {ratio:.2f}  (target <= 1.5: {'met' if ratio <= 1.5 else 'MISSED'})")
    record("swa.batch", ratio)
    return medians


def state_bench(spark, root: Path, data: Path, swa_file: Path, tumbling_file: Path, observed: dict | None) -> None:
    """3. state (the streaming run's own peak only when the streaming part ran)."""
    import pyarrow.parquet as pq

    sample = pq.read_table(next((data / "static").glob("*.parquet")))
    bytes_per_tuple = sample.nbytes / max(sample.num_rows, 1)
    swa = evaluate(spark, root, swa_file)
    tumbling = evaluate(spark, root, tumbling_file)
    print(f"  state (timeline over the trace; {bytes_per_tuple:.0f} B per tuple in Arrow):")
    for label, e in (("swa n=13 t=22s", swa), ("tumbling W=32000", tumbling)):
        m = e.metrics
        print(
            f"    {label:>17}: windows open max {m.windows_open_max:,} (mean {m.windows_open_mean:,.0f}), "
            f"tuples held max {m.tuples_held_max:,} (mean {m.tuples_held_mean:,.0f}) ≈ "
            f"{m.tuples_held_max * bytes_per_tuple / 2**20:.1f} MiB; completeness γ=1 {m.completeness[1.0]:.2%}"
        )
    if observed is not None:
        print(
            f"    swa streaming run kept at most {observed.get('state_rows_peak', 0):,} rows "
            f"({observed.get('open_windows_peak', 0):,} open windows) in its state between micro-batches ≈ "
            f"{observed.get('state_rows_peak', 0) * bytes_per_tuple / 2**20:.1f} MiB"
        )
    ratio = swa.metrics.tuples_held_max / max(tumbling.metrics.tuples_held_max, 1)
    print(f"  state ratio swa / tumbling W=32000 (peak tuples held): {ratio:.2f}")
    record("swa.state", ratio)


if __name__ == "__main__":
    main()
