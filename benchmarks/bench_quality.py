"""The cost of a suite of expectations on ~1M rows, against the step's own run and a hand-written pass.

    .venv/bin/python benchmarks/bench_quality.py [--rows 1000000] [--repeat 3] [--warmup 1] [--shape both|service|wide]
                                                 [--reference] [--profile [PHASE]] [--per-expectation]

One generated service trace (Parquet, two streams, a few corrupted tuples) and one Tributary
project in a temp folder. One SQL step stacks both streams, adds derived columns and per-instance
window figures and filters; one output, overwrite. Two shapes:

- service: the step's 16 columns, 8 expectations (not_null x2, between: drop; in_set,
  match_regex, compound unique, table row count, column mean: warn);
- wide: the same step with 24 more derived columns (40), 20 expectations (3 drop, 17 warn: nulls,
  ranges, sets, regexes, lengths, two compound keys, row count, means, max, min, a column pair).

Per shape, all in one process on one SparkSession (local[2], JVM start excluded), `--warmup`
untimed rounds (one by default), then `--repeat` rounds, each running A, B and C in turn (the order rotates by round),
each pipeline run into a fresh warehouse:

A. the pipeline without expectations: the whole run (read, step, stage, commit) is the step's
   own compute time, the baseline;
B. the same pipeline with the suite on the step. Cost = median(B) - median(A);
C. the same checks as one hand-written Spark SQL aggregation (count_if ... in one select) over
   the step's rows, cached beforehand (a copy with one more column, so A and B never read the
   cache) so only the checks are timed.

Figures: cost / A (target <= 0.25) and cost / C (target <= 1.5), ratios of medians within the
run; the load average is printed with them (the machine is shared). Also prints B's per-phase
breakdown (functions of framework.engine and QualityGate.check_rows wrapped from the outside,
nothing in the framework changed) and B's Spark jobs per phase and call site (job groups +
Spark's status store).
--floor (service shape): two more rounds in the rotation, the floor of checks made while the rows are
written, by hand with no Tributary and no Great Expectations, over the same planned step frame:
E. the step's rows written as Parquet (what A's staging does, without the commit);
D. the same write with the 8 checks as one Observation of the write, the 3 drop checks as a split
   write (the refused rows in a folder of their own, unsorted, as Tributary writes it), those rows
   then written as the quarantine's file, and the compound key counted from its column hashes read
   back from the written files (one job, sorted in the driver).
The floor's cost is D - E: what the checks cost a pass that also writes the rows it checked. Its
ratio over C says whether the 1.5 x target lies above that floor; (B - A) / (D - E) says how close
Tributary's suite is to it.
--reference: the step's rows sent to Spark's noop sink, with the checks observed, and persist + count.
--profile [PHASE]: cProfile of one more B run's phase (check_rows unless named: plan, stage, ...). --per-expectation: each expectation alone
through Tributary's suite runner (framework.quality.suite.check) over the cached step rows.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from _common import REPO, record

sys.path.insert(0, str(REPO))

SCHEMA = (
    "head_service STRING, requested_service STRING, client_ip STRING, ts TIMESTAMP, instance_ts TIMESTAMP, "
    "response_ms INT, bytes BIGINT, instance_id BIGINT, is_primary BOOLEAN"
)
TUPLES_PER_INSTANCE = 11.37  # the service trace's mean degree

STEP_SQL = """\
      with calls as (
        select *, 'static' as stream from {{ source('static_calls') }}
        union all
        select *, 'images' as stream from {{ source('image_calls') }}
      )
      select
        head_service, requested_service, client_ip, ts, instance_ts, response_ms, bytes, instance_id, is_primary, stream,
        to_date(ts) as day,
        case when is_primary then 'page'
             when requested_service like '/img/%' then 'image'
             when requested_service like '%.css' then 'style'
             when requested_service like '%.js' then 'script'
             else 'other' end as kind,
        round(bytes / greatest(response_ms, 1), 2) as bytes_per_ms,
        (unix_micros(ts) - unix_micros(instance_ts)) / 1000 as offset_ms,
        count(*) over (partition by instance_id) as instance_calls,
        sum(bytes) over (partition by instance_id) as instance_bytes
      from calls
      where ts >= timestamp'2026-01-01 00:00:00'
"""

SUITE = r"""
    expectations:
      - expect_column_values_to_not_be_null: {column: head_service}
        severity: drop
      - expect_column_values_to_not_be_null: {column: client_ip}
        severity: drop
      - expect_column_values_to_be_between: {column: response_ms, min_value: 0, max_value: 60000}
        severity: drop
      - expect_column_values_to_be_in_set: {column: kind, value_set: [page, image, style, script]}
        severity: warn
      - expect_column_values_to_match_regex: {column: client_ip, regex: '^\d{1,3}(\.\d{1,3}){3}$'}
        severity: warn
      - expect_compound_columns_to_be_unique: {column_list: [instance_id, requested_service]}
        severity: warn
      - expect_table_row_count_to_be_between: {min_value: 1, max_value: 1000000000}
        severity: warn
      - expect_column_mean_to_be_between: {column: response_ms, min_value: 10, max_value: 1000}
        severity: warn
"""

# The same 8 checks, written by hand as one aggregation (GX ignores nulls in the value checks).
HAND_CHECKS = r"""
select
  count(*)                                                                          as row_count,
  count_if(head_service is null)                                                    as head_service_null,
  count_if(client_ip is null)                                                       as client_ip_null,
  count_if(response_ms is not null and not response_ms between 0 and 60000)         as response_ms_out_of_range,
  count_if(kind is not null and kind not in ('page', 'image', 'style', 'script'))   as kind_not_in_set,
  count_if(client_ip is not null and not client_ip rlike '^\\d{1,3}(\\.\\d{1,3}){3}$') as client_ip_bad,
  count(*) - count(distinct instance_id, requested_service)                         as duplicate_keys,
  avg(response_ms)                                                                  as response_ms_mean
from checked
"""


#: the wide shape: 24 more derived columns (40 in all)
WIDE_COLUMNS = ",\n".join(
    [f"        (bytes * {k} + response_ms) % 1000 as n{k:02d}" for k in range(1, 9)]
    + [f"        substr(requested_service, {k}, 6) as s{k:02d}" for k in range(1, 9)]
    + [f"        round(response_ms / {k + 1}.0, 2) as d{k:02d}" for k in range(1, 9)]
)
WIDE_SQL = STEP_SQL.replace("as instance_bytes\n", "as instance_bytes,\n" + WIDE_COLUMNS + "\n")

WIDE_SUITE = r"""
    expectations:
      - expect_column_values_to_not_be_null: {column: head_service}
        severity: drop
      - expect_column_values_to_not_be_null: {column: client_ip}
        severity: drop
      - expect_column_values_to_not_be_null: {column: s01}
        severity: warn
      - expect_column_values_to_be_between: {column: response_ms, min_value: 0, max_value: 60000}
        severity: drop
      - expect_column_values_to_be_between: {column: n01, min_value: 0, max_value: 999}
        severity: warn
      - expect_column_values_to_be_between: {column: d01, min_value: 0, max_value: 100000}
        severity: warn
      - expect_column_values_to_be_in_set: {column: kind, value_set: [page, image, style, script]}
        severity: warn
      - expect_column_values_to_be_in_set: {column: stream, value_set: [static, images]}
        severity: warn
      - expect_column_values_to_match_regex: {column: client_ip, regex: '^\d{1,3}(\.\d{1,3}){3}$'}
        severity: warn
      - expect_column_values_to_match_regex: {column: requested_service, regex: '^/'}
        severity: warn
      - expect_column_values_to_not_match_regex: {column: head_service, regex: '\s'}
        severity: warn
      - expect_column_value_lengths_to_be_between: {column: s02, min_value: 0, max_value: 6}
        severity: warn
      - expect_compound_columns_to_be_unique: {column_list: [instance_id, requested_service]}
        severity: warn
      - expect_compound_columns_to_be_unique: {column_list: [client_ip, ts, requested_service]}
        severity: warn
      - expect_table_row_count_to_be_between: {min_value: 1, max_value: 1000000000}
        severity: warn
      - expect_column_mean_to_be_between: {column: response_ms, min_value: 10, max_value: 1000}
        severity: warn
      - expect_column_mean_to_be_between: {column: bytes_per_ms, min_value: 0, max_value: 1000000000}
        severity: warn
      - expect_column_max_to_be_between: {column: n02, max_value: 999}
        severity: warn
      - expect_column_min_to_be_between: {column: d02, min_value: 0}
        severity: warn
      - expect_column_pair_values_a_to_be_greater_than_b: {column_A: instance_bytes, column_B: bytes, or_equal: true}
        severity: warn
"""

WIDE_HAND_CHECKS = r"""
select
  count(*)                                                                             as row_count,
  count_if(head_service is null)                                                       as head_service_null,
  count_if(client_ip is null)                                                          as client_ip_null,
  count_if(s01 is null)                                                                as s01_null,
  count_if(response_ms is not null and not response_ms between 0 and 60000)            as response_ms_out_of_range,
  count_if(n01 is not null and not n01 between 0 and 999)                              as n01_out_of_range,
  count_if(d01 is not null and not d01 between 0 and 100000)                           as d01_out_of_range,
  count_if(kind is not null and kind not in ('page', 'image', 'style', 'script'))      as kind_not_in_set,
  count_if(stream is not null and stream not in ('static', 'images'))                  as stream_not_in_set,
  count_if(client_ip is not null and not client_ip rlike '^\\d{1,3}(\\.\\d{1,3}){3}$') as client_ip_bad,
  count_if(requested_service is not null and not requested_service rlike '^/')         as service_bad,
  count_if(head_service is not null and head_service rlike '\\s')                      as head_service_spaces,
  count_if(s02 is not null and not length(s02) between 0 and 6)                        as s02_length,
  count(*) - count(distinct instance_id, requested_service)                            as duplicate_calls,
  count(*) - count(distinct client_ip, ts, requested_service)                          as duplicate_requests,
  avg(response_ms)                                                                     as response_ms_mean,
  avg(bytes_per_ms)                                                                    as bytes_per_ms_mean,
  max(n02)                                                                             as n02_max,
  min(d02)                                                                             as d02_min,
  count_if(instance_bytes is not null and bytes is not null and instance_bytes < bytes) as bytes_above_instance
from checked
"""


@dataclass(frozen=True)
class Shape:
    name: str
    step_sql: str
    suite: str
    hand_checks: str
    figures: tuple[str, str]  # docs/benchmarks.yaml ids: cost / A, cost / C

    @property
    def expectations(self) -> int:
        return self.suite.count("- expect_")


SHAPES = {
    "service": Shape("service", STEP_SQL, SUITE, HAND_CHECKS, ("quality.vs_step", "quality.vs_sql")),
    "wide": Shape("wide", WIDE_SQL, WIDE_SUITE, WIDE_HAND_CHECKS, ("quality.wide_vs_step", "quality.wide_vs_sql")),
}
TARGET_VS_STEP, TARGET_VS_SQL = 0.25, 1.5


PIPELINE = """\
name: {name}
mode: batch
sources:
  static_calls: {{format: parquet, path: {data}/static, schema: "{schema}"}}
  image_calls: {{format: parquet, path: {data}/images, schema: "{schema}"}}
steps:
  calls:
    description: Both streams, derived columns and per-instance figures.
    sql: |
{sql}{expectations}
outputs:
  calls: {{mode: overwrite}}
"""

#: phase -> (module or class, attribute) of the function doing it in a batch run
PHASES = {
    "plan": ("framework.engine.batch", "build_frames"),
    "check_outputs": ("framework.engine.batch", "check_outputs"),
    "check_rows": ("framework.quality.gate:QualityGate", "check_rows"),
    "stage": ("framework.engine.batch", "stage_outputs"),
    "stage_quarantine": ("framework.engine.batch", "stage_quarantine"),
    "commit": ("framework.engine.batch", "commit_all"),
    "record_quality": ("framework.engine.runner", "_record_quality"),
    "record_events": ("framework.engine.runner", "_record_events"),
}


def phase_owner(name: str) -> object:
    import importlib

    module, _, attr = name.partition(":")
    owner = importlib.import_module(module)
    return getattr(owner, attr) if attr else owner


def observed_checks(frame) -> dict:
    """The row-level and aggregate checks (all but uniqueness) as an Observation of one noop pass."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation(f"bench_checks_{time.monotonic_ns()}")
    ip = r"^\d{1,3}(\.\d{1,3}){3}$"
    frame.observe(
        observation,
        F.count(F.lit(1)).alias("rows"),
        F.count_if(F.col("head_service").isNull()).alias("head_service_null"),
        F.count_if(F.col("client_ip").isNull()).alias("client_ip_null"),
        F.count_if(~F.col("response_ms").between(0, 60000)).alias("response_ms_out_of_range"),
        F.count_if(~F.col("kind").isin("page", "image", "style", "script")).alias("kind_not_in_set"),
        F.count_if(~F.col("client_ip").rlike(ip)).alias("client_ip_bad"),
        F.avg("response_ms").alias("response_ms_mean"),
    ).write.format("noop").mode("overwrite").save()
    return observation.get


def write_pipeline(root: Path, name: str, data: Path, expectations: str, sql: str = STEP_SQL) -> Path:
    path = root / "pipelines" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PIPELINE.format(name=name, data=data, schema=SCHEMA, sql=sql, expectations=expectations))
    return path


def hand_written_floor(spark, step_frame, where: Path, checks: bool) -> tuple[float, dict | None]:
    """E (checks=False) or D (checks=True) of --floor: see the module's docstring."""
    import numpy as np
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from framework.io.delta.base import unsorted_split

    began = time.perf_counter()
    out = str(where / "out")
    if not checks:
        step_frame.write.mode("overwrite").parquet(out)
        return time.perf_counter() - began, None
    response = F.col("response_ms")
    refused = F.col("head_service").isNull() | F.col("client_ip").isNull() | ~F.coalesce(response.between(0, 60000), F.lit(True))
    observation = Observation("floor")
    kinds = ["page", "image", "style", "script"]
    observed = step_frame.withColumn("__drop", F.when(refused, F.lit(1))).observe(
        observation,
        F.count(F.lit(1)).alias("rows"),
        F.count_if(F.col("head_service").isNull()).alias("head_service_null"),
        F.count_if(F.col("client_ip").isNull()).alias("client_ip_null"),
        F.count_if(~F.coalesce(response.between(0, 60000), F.lit(True))).alias("response_ms_out_of_range"),
        F.count_if(~F.coalesce(F.col("kind").isin(kinds), F.lit(True))).alias("kind_not_in_set"),
        F.count_if(~F.coalesce(F.col("client_ip").rlike(r"^\d{1,3}(\.\d{1,3}){3}$"), F.lit(True))).alias("client_ip_bad"),
        F.avg(response).alias("response_ms_mean"),
    )
    with unsorted_split(spark):
        observed.write.mode("overwrite").partitionBy("__drop").parquet(out)
    found = dict(observation.get)
    kept = spark.read.parquet(out).where(F.col("__drop").isNull())
    hashes = kept.select(F.xxhash64("instance_id", "requested_service").alias("h")).toArrow().column(0).to_numpy()
    ordered = np.sort(hashes)
    found["duplicate_key_hashes"] = int((ordered[1:] == ordered[:-1]).sum())
    quarantine = spark.read.parquet(out).where(F.col("__drop").isNotNull())
    quarantine.write.mode("overwrite").parquet(str(where / "quarantine"))
    return time.perf_counter() - began, found


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} (5 min {five:.1f})"


class Phases:
    """Wall time and Spark job group per phase of one batch run, wrapped from the outside."""

    def __init__(self, spark, label: str) -> None:
        self.spark, self.label = spark, label
        self.seconds: dict[str, float] = defaultdict(float)
        self.profiler: cProfile.Profile | None = None

    def group(self, phase: str) -> str:
        return f"bench/{self.label}/{phase}"

    def wrap(self, owner: object, attr: str, phase: str, profile: bool = False) -> Callable[[], None]:
        """Time `owner.attr` as `phase`; returns what puts it back."""
        inner = getattr(owner, attr)
        sc = self.spark.sparkContext

        def timed(*args, **kwargs):
            sc.setJobGroup(self.group(phase), phase)
            began = time.perf_counter()
            if profile:
                self.profiler = cProfile.Profile()
                self.profiler.enable()
            try:
                return inner(*args, **kwargs)
            finally:
                if profile and self.profiler:
                    self.profiler.disable()
                self.seconds[phase] += time.perf_counter() - began
                sc.setJobGroup(self.group("other"), "other")

        setattr(owner, attr, timed)
        return lambda: setattr(owner, attr, inner)


def run_pipeline(spark, compiled, profile, warehouse: Path, label: str, cprofile: str | None = None):
    from framework.engine import runner

    phases = Phases(spark, label)
    undo = [phases.wrap(phase_owner(owner), attr, phase, profile=phase == cprofile) for phase, (owner, attr) in PHASES.items()]
    spark.sparkContext.setJobGroup(phases.group("other"), "other")
    began = time.perf_counter()
    try:
        result = runner.run_pipeline(compiled, profile.model_copy(update={"warehouse": str(warehouse)}), spark=spark)
    finally:
        for put_back in undo:
            put_back()
    total = time.perf_counter() - began
    clear_job_group(spark)
    if result.status != "ok":
        raise SystemExit(f"{label}: run ended {result.status}: {result.error}")
    phases.seconds["total"] = total
    return result, phases


def clear_job_group(spark) -> None:
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    spark.sparkContext.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


def spark_jobs(spark, group_prefix: str) -> list[dict]:
    """Jobs whose group starts with the prefix, with name (call site) and duration, from Spark's status store."""
    jobs = []
    try:
        store = spark.sparkContext._jsc.sc().statusStore()  # a benchmark's diagnostic
        listed = store.jobsList(None)
        for i in range(listed.size()):
            job = listed.apply(i)
            group = job.jobGroup().get() if job.jobGroup().isDefined() else ""
            if not group.startswith(group_prefix):
                continue
            began = job.submissionTime().get().getTime() if job.submissionTime().isDefined() else None
            ended = job.completionTime().get().getTime() if job.completionTime().isDefined() else None
            seconds = (ended - began) / 1000 if began is not None and ended is not None else 0.0
            jobs.append({"id": job.jobId(), "group": group, "name": job.name(), "seconds": seconds, "tasks": job.numTasks()})
    except Exception as e:  # noqa: BLE001 - fall back to counting jobs only
        tracker = spark.sparkContext.statusTracker()
        print(f"  (Spark status store not readable: {type(e).__name__}; counting jobs only)")
        for phase in (*PHASES, "other"):
            for job_id in tracker.getJobIdsForGroup(f"{group_prefix}{phase}"):
                jobs.append({"id": job_id, "group": f"{group_prefix}{phase}", "name": "?", "seconds": 0.0, "tasks": 0})
    return sorted(jobs, key=lambda j: j["id"])


def short_call_site(name: str) -> str:
    """`collect at /long/path/site-packages/pkg/mod.py:12` -> `collect at pkg/mod.py:12`."""
    if "CompletableFuture" in name:
        return "(submitted by adaptive query execution: a query stage or the write; no Python call site)"
    for marker in ("site-packages/", str(REPO) + "/"):
        if marker in name:
            verb, _, path = name.partition(" at ")
            return f"{verb} at {path.split(marker, 1)[1]}"
    return name


def median_of(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000, help="tuples in the trace, both streams together (approx.)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of A, B and C after the warm-up rounds (at least 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds of A, B and C first, per shape (JIT warm-up)")
    parser.add_argument("--shape", choices=["both", *SHAPES], default="both")
    parser.add_argument("--corrupt", type=int, default=None, help="corrupted tuples (default rows / 10,000)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--reference", action="store_true", help="time the step alone: noop sink, observed checks, persist")
    parser.add_argument("--floor", action="store_true", help="service shape: also time the hand-written floor, D and E")
    parser.add_argument(
        "--profile",
        nargs="?",
        const="check_rows",
        choices=list(PHASES),
        help="cProfile one more B run's phase (default check_rows)",
    )
    parser.add_argument("--per-expectation", action="store_true", help="time each expectation alone on the cached rows")
    args = parser.parse_args()

    from framework.engine.session import spark_session
    from framework.generators.service_trace import generate_service_trace
    from framework.profiles import Profile, SparkSettings

    with tempfile.TemporaryDirectory(prefix="bench-quality-") as tmp:
        root = Path(tmp) / "project"
        (root / "configs").mkdir(parents=True)
        (root / "configs" / "local.yaml").write_text(
            f"spark:\n  master: {args.master}\n  conf:\n    spark.sql.shuffle.partitions: 4\nwarehouse: ./warehouse\n"
        )
        data = root / "data"
        corrupt = args.corrupt if args.corrupt is not None else max(args.rows // 10_000, 4)
        began = time.perf_counter()
        trace = generate_service_trace(
            data, instances=max(round(args.rows / TUPLES_PER_INSTANCE), 1), seed=7, files=8, fmt="parquet", corrupt=corrupt
        )
        generated_s = time.perf_counter() - began
        spark = spark_session(
            Profile(spark=SparkSettings(master=args.master, conf={"spark.sql.shuffle.partitions": 4, "spark.ui.enabled": False}))
        )
        spark.range(10).count()  # JVM warm-up, excluded from all
        print(
            f"trace: {trace.tuples:,} tuples ({trace.instances:,} instances, {trace.corrupted} corrupted), "
            f"Parquet, 2 streams x {trace.files_per_stream['static']} files; generated in {generated_s:.1f} s"
        )
        print(
            f"spark: {args.master}, 4 shuffle partitions; per shape {args.warmup} warm-up round(s), then {args.repeat} rounds "
            f"of A, B, C (order rotating); {os.cpu_count()} cores, {load()}"
        )
        shapes = list(SHAPES) if args.shape == "both" else [args.shape]
        summary = [measure_shape(spark, SHAPES[name], root, data, Path(tmp), args) for name in shapes]
        print()
        print("== summary (ratios of medians within this run; targets: cost/A <= 0.25, cost/C <= 1.5) ==")
        for line in summary:
            print(line)
        print("note: one shared 2-core machine; medians of few runs; differences under ~0.3 s are within noise")
        shutil.rmtree(root, ignore_errors=True)


def measure_shape(spark, shape: Shape, root: Path, data: Path, tmp: Path, args) -> str:
    """A, B and C of one shape, alternated; prints the details, records the figures, returns a summary line."""
    from framework.compiler import compile_pipeline
    from framework.engine.runner import plan_frames
    from framework.profiles import load_profile
    from framework.project import Project

    plain_file = write_pipeline(root, f"plain_{shape.name}", data, "", shape.step_sql)
    checked_file = write_pipeline(root, f"checked_{shape.name}", data, shape.suite, shape.step_sql)
    project = Project(root)
    profile = load_profile(project)
    plain = compile_pipeline(project, plain_file, profile)
    checked = compile_pipeline(project, checked_file, profile)
    print()
    print(f"== shape {shape.name}: {shape.expectations} expectations ==")

    # C's rows: the step's rows cached once, as a copy with one more column (so neither A's nor
    # B's plan matches the cached one: they never read it)
    step_frame = plan_frames(plain, profile.model_copy(update={"warehouse": str(tmp / f"wh-c-{shape.name}")}), spark).frames[
        "calls"
    ]
    from pyspark.sql import functions as F

    step_rows = step_frame.withColumn("__bench_copy", F.lit(1)).persist()
    cached_rows = step_rows.count()
    step_rows.createOrReplaceTempView("checked")
    columns = len(step_frame.columns)

    def run_c() -> tuple[float, object]:
        began = time.perf_counter()
        row = spark.sql(shape.hand_checks).collect()[0]
        return time.perf_counter() - began, row

    floor = args.floor and shape.name == "service"
    totals: dict[str, list[float]] = {"A": [], "B": [], "C": [], "D": [], "E": []}
    phase_runs: dict[str, list[Phases]] = {"A": [], "B": []}
    loads: list[str] = []
    last_b, hand_result, floor_result = None, None, None
    order = ["A", "B", "C", "D", "E"] if floor else ["A", "B", "C"]
    warmup = args.warmup
    for i in range(args.repeat + warmup):  # the first rounds warm up (GX context, Python workers, JIT): not counted
        for label in order[i % len(order) :] + order[: i % len(order)]:
            if label == "C":
                seconds, hand_result = run_c()
            elif label in ("D", "E"):
                where = tmp / f"wh-{shape.name}-{label.lower()}{i}"
                seconds, checked_by_hand = hand_written_floor(spark, step_frame, where, checks=label == "D")
                floor_result = checked_by_hand or floor_result
                shutil.rmtree(where, ignore_errors=True)
            else:
                compiled = plain if label == "A" else checked
                where = tmp / f"wh-{shape.name}-{label.lower()}{i}"
                result, phases = run_pipeline(spark, compiled, profile, where, f"{shape.name}-{label}{i}")
                seconds = phases.seconds["total"]
                shutil.rmtree(where, ignore_errors=True)
                if label == "B":
                    last_b = result
                if i >= warmup:
                    phase_runs[label].append(phases)
            if i >= warmup:
                totals[label].append(seconds)
        loads.append(load())
    print(f"  load average after each round (the first {warmup} warm up): {'; '.join(loads)}")

    reference: dict[str, list[float]] = defaultdict(list)
    observed: list[dict] = []
    if args.reference and shape.name == "service":
        for i in range(args.repeat + 1):  # the first round is a warm-up, not counted
            for label, action in (
                ("step -> noop sink (compute only)", lambda: step_frame.write.format("noop").mode("overwrite").save()),
                ("step -> noop, 7 checks observed in the same pass", lambda: observed.append(observed_checks(step_frame))),
                ("step -> persist + count (compute + cache fill)", lambda: step_frame.persist().count()),
            ):
                began = time.perf_counter()
                action()
                if i:
                    reference[label].append(time.perf_counter() - began)
                step_frame.unpersist(blocking=True)

    single: list[tuple[str, float, int]] = []
    if args.per_expectation:
        from framework.quality.suite import check

        specs = list(checked.spec.steps["calls"].expectations)
        for spec in [None, *specs]:
            chosen = specs if spec is None else [spec]
            times = []
            for k in range(2):
                group = f"bench/single/{shape.name}/{len(single)}/{k}"
                spark.sparkContext.setJobGroup(group, "single")
                began = time.perf_counter()
                check(step_rows, "calls", "step", chosen)
                times.append(time.perf_counter() - began)
                clear_job_group(spark)
                jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
            single.append((f"whole suite ({len(specs)}), one check() call" if spec is None else spec.label, min(times), jobs))
    step_rows.unpersist()
    spark.catalog.dropTempView("checked")

    profiled = None
    if args.profile:
        _, profiled = run_pipeline(
            spark, checked, profile, tmp / f"wh-{shape.name}-profile", f"{shape.name}-profile", cprofile=args.profile
        )

    # -- report
    a, b, c = median_of(totals["A"]), median_of(totals["B"]), median_of(totals["C"])
    cost = b - a
    print(
        f"  step rows: {cached_rows:,}, {columns} columns; hand-written checks: {dict(hand_result.asDict()) if hand_result else {}}"
    )
    if observed:
        print(f"  observed in the noop pass: {observed[-1]}")
    assert last_b is not None
    quality = last_b.quality
    print(
        f"  B's expectations: {sum(r.success for r in quality)}/{len(quality)} passed; "
        f"quarantined {sum(last_b.quarantined.values()):,} rows; output {last_b.outputs[0].rows:,} rows"
    )
    for r in quality:
        seen = f"{r.unexpected_count:,} unexpected" if r.unexpected_count is not None else f"observed {r.observed_value}"
        print(f"    {'ok  ' if r.success else 'FAIL'} {r.severity:<4} {r.expectation}({r.threshold or ''}) {seen}")
    print("  wall time, median over rounds (s):")
    for label, values in (
        ("A  pipeline, no expectations (baseline)", totals["A"]),
        (f"B  pipeline + {shape.expectations} expectations", totals["B"]),
        (f"C  {shape.expectations} checks by hand, one SQL pass (cached rows)", totals["C"]),
    ):
        print(f"    {label:<50} {median_of(values):7.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
    if floor:
        for label, values in (
            ("E  floor: the step's rows written, by hand", totals["E"]),
            ("D  floor: the same write with the 8 checks, by hand", totals["D"]),
        ):
            print(f"    {label:<50} {median_of(values):7.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"    {'cost of the suite = B - A':<50} {cost:7.2f}")
    per_round = [(bv - av) / cv for av, bv, cv in zip(totals["A"], totals["B"], totals["C"], strict=True) if cv]
    print(f"    cost / C per round (B - A of that round over its C): {', '.join(f'{v:.2f}' for v in per_round)}")
    for label, values in reference.items():
        print(f"    {label:<50} {median_of(values):7.2f}  ({', '.join(f'{v:.2f}' for v in values)})")

    phase_columns = [*PHASES, "other", "total"]
    print("  phases, median over rounds (s); other = the rest of run_pipeline (events, lock, recovery check, cleanup):")
    print("       " + " ".join(f"{col:>{max(len(col), 6)}}" for col in phase_columns))
    for label in ("A", "B"):
        for ph in phase_runs[label]:
            ph.seconds["other"] = ph.seconds["total"] - sum(ph.seconds.get(col, 0.0) for col in phase_columns[:-2])
        row = [median_of([ph.seconds.get(col, 0.0) for ph in phase_runs[label]]) for col in phase_columns]
        print(f"    {label:<2} " + " ".join(f"{v:>{max(len(col), 6)}.2f}" for col, v in zip(phase_columns, row, strict=True)))
    last = args.repeat
    for label in ("A", "B"):
        jobs = spark_jobs(spark, f"bench/{shape.name}-{label}{last}/")
        per_phase: dict[str, list[dict]] = defaultdict(list)
        for job in jobs:
            per_phase[job["group"].rsplit("/", 1)[-1]].append(job)
        print(
            f"  {label}'s Spark jobs (last round): {len(jobs)}; "
            + ", ".join(f"{p} {len(js)} ({sum(j['seconds'] for j in js):.2f} s)" for p, js in per_phase.items())
        )
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for job in spark_jobs(spark, f"bench/{shape.name}-B{last}/"):
        grouped[(job["group"].rsplit("/", 1)[-1], short_call_site(job["name"]))].append(job)
    for (phase, site), js in grouped.items():
        print(f"      {phase:<16} {len(js):>3} {sum(j['seconds'] for j in js):6.2f} s  {site}")

    if single:
        print("  each expectation alone via framework.quality.suite.check on the cached step rows (best of 2):")
        for label, seconds, jobs in single:
            print(f"    {seconds:6.2f} s  {jobs:>2} jobs  {label}")
    if profiled is not None and profiled.profiler is not None:
        print(
            f"  cProfile of one B run's {args.profile} phase ({profiled.seconds.get(args.profile, 0):.2f} s), top 45 cumulative:"
        )
        out = io.StringIO()
        pstats.Stats(profiled.profiler, stream=out).sort_stats("cumulative").print_stats(45)
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:12000])

    vs_step, vs_sql = cost / a, cost / c
    verdict_step = "met" if vs_step <= TARGET_VS_STEP else "MISSED"
    verdict_sql = "met" if vs_sql <= TARGET_VS_SQL else "MISSED"
    print(f"  ratio cost / A (the step's own run):          {vs_step:5.2f}  (target <= {TARGET_VS_STEP}: {verdict_step})")
    print(f"  ratio cost / C (same checks by hand, one pass): {vs_sql:5.2f}  (target <= {TARGET_VS_SQL}: {verdict_sql})")
    if floor:
        floor_cost = median_of(totals["D"]) - median_of(totals["E"])
        print(f"  floor (by hand): {floor_result}")
        print(f"  floor's cost D - E:                            {floor_cost:5.2f} s")
        print(f"  ratio floor / C (the target's 1.5 against it): {floor_cost / c:5.2f}")
        print(f"  ratio cost / floor (Tributary's suite over it): {cost / floor_cost:5.2f}")
        record("quality.floor_vs_sql", floor_cost / c)
    record(shape.figures[0], vs_step)
    record(shape.figures[1], vs_sql)
    return (
        f"  {shape.name:<8} {shape.expectations:>2} expectations, {columns} columns: A {a:.2f} s, B {b:.2f} s, C {c:.2f} s; "
        f"cost/A {vs_step:.2f} ({verdict_step}), cost/C {vs_sql:.2f} ({verdict_sql}); {load()}"
    )


if __name__ == "__main__":
    main()
