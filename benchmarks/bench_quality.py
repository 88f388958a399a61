"""The cost of a suite of 8 common expectations on ~1M rows, against the step's own run and a hand-written pass.

    .venv/bin/python benchmarks/bench_quality.py [--rows 1000000] [--repeat 3] [--profile] [--per-expectation]

One generated service trace (Parquet, two streams, a few corrupted tuples) and one Tributary
project in a temp folder. One SQL step stacks both streams, adds derived columns and per-instance
window figures and filters; one output, overwrite. All in one process on one SparkSession
(local[2], JVM start excluded), alternating, each run into a fresh warehouse:

A. the pipeline without expectations: the whole run (read, step, stage, commit) is the step's
   own compute time, the baseline;
B. the same pipeline with 8 expectations on the step (not_null x2, between: drop; in_set,
   match_regex, compound unique, table row count, column mean: warn). Cost = median(B) - median(A);
C. the same 8 checks as one hand-written Spark SQL aggregation (count_if ... in one select) over
   the step's rows, cached beforehand so only the checks are timed.

Also times, for reference, the step's rows sent to Spark's noop sink (compute only), the same with
7 of the checks as an Observation of that pass (what Tributary does inside its staging pass), and
persist + count (what caching the checked step would cost). Prints medians, the per-phase breakdown of A and B (functions of framework.engine and
QualityGate.check_rows wrapped from the outside, nothing in the framework changed), B's Spark jobs
per phase and call site (job groups + Spark's status store), and the ratios
cost / A (target <= 0.25) and cost / C.
--profile: cProfile of one more B run's quality phase. --per-expectation: each expectation alone
through Tributary's suite runner (framework.quality.suite.check) over the cached step rows.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
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


def write_pipeline(root: Path, name: str, data: Path, expectations: str) -> Path:
    path = root / "pipelines" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PIPELINE.format(name=name, data=data, schema=SCHEMA, sql=STEP_SQL, expectations=expectations))
    return path


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


def run_pipeline(spark, compiled, profile, warehouse: Path, label: str, cprofile: bool = False):
    from framework.engine import runner

    phases = Phases(spark, label)
    undo = [
        phases.wrap(phase_owner(owner), attr, phase, profile=cprofile and phase == "check_rows")
        for phase, (owner, attr) in PHASES.items()
    ]
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
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--corrupt", type=int, default=None, help="corrupted tuples (default rows / 10,000)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--profile", action="store_true", help="cProfile one more run's quality phase")
    parser.add_argument("--per-expectation", action="store_true", help="time each expectation alone on the cached rows")
    args = parser.parse_args()

    from framework.compiler import compile_pipeline
    from framework.engine.session import spark_session
    from framework.generators.service_trace import generate_service_trace
    from framework.profiles import Profile, SparkSettings, load_profile
    from framework.project import Project

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
        plain_file = write_pipeline(root, "plain", data, "")
        checked_file = write_pipeline(root, "checked", data, SUITE)

        project = Project(root)
        profile = load_profile(project)
        spark = spark_session(
            Profile(spark=SparkSettings(master=args.master, conf={"spark.sql.shuffle.partitions": 4, "spark.ui.enabled": False}))
        )
        plain = compile_pipeline(project, plain_file, profile)
        checked = compile_pipeline(project, checked_file, profile)
        spark.range(10).count()  # JVM warm-up, excluded from all

        print(
            f"trace: {trace.tuples:,} tuples ({trace.instances:,} instances, {trace.corrupted} corrupted), "
            f"Parquet, 2 streams x {trace.files_per_stream['static']} files; generated in {generated_s:.1f} s"
        )
        print(f"spark: {args.master}, 4 shuffle partitions; {args.repeat} alternating runs of A and B after one warm-up of each")

        # -- A and B: warm up both once (GX context, Python workers, JIT), then alternate
        run_pipeline(spark, plain, profile, Path(tmp) / "wh-a-warm", "A-warm")
        warm_b, _ = run_pipeline(spark, checked, profile, Path(tmp) / "wh-b-warm", "B-warm")
        totals: dict[str, list[float]] = {"A": [], "B": []}
        phase_runs: dict[str, list[Phases]] = {"A": [], "B": []}
        last_b = warm_b
        for i in range(args.repeat):
            for label, compiled in (("A", plain), ("B", checked)):
                result, phases = run_pipeline(spark, compiled, profile, Path(tmp) / f"wh-{label.lower()}{i}", f"{label}{i}")
                totals[label].append(phases.seconds["total"])
                phase_runs[label].append(phases)
                if label == "B":
                    last_b = result
                shutil.rmtree(Path(tmp) / f"wh-{label.lower()}{i}", ignore_errors=True)

        # -- C: the same checks by hand, one aggregation over the step's rows (cached beforehand)
        from framework.engine.runner import plan_frames

        step_frame = plan_frames(plain, profile.model_copy(update={"warehouse": str(Path(tmp) / "wh-c")}), spark).frames["calls"]
        # where B's extra time can go: the step computed alone, with the checks observed in the same
        # pass, and computed into the cache (what persisting the checked step costs)
        reference: dict[str, list[float]] = defaultdict(list)
        observed: list[dict] = []
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
        step_rows = step_frame.persist()
        cached_rows = step_rows.count()
        step_rows.createOrReplaceTempView("checked")
        hand: list[float] = []
        hand_result = None
        for _ in range(args.repeat + 1):  # the first is a warm-up, not counted
            began = time.perf_counter()
            hand_result = spark.sql(HAND_CHECKS).collect()[0]
            hand.append(time.perf_counter() - began)
        hand = hand[1:]

        # -- optional: each expectation alone through Tributary's suite runner, on the same cached rows
        single: list[tuple[str, float, int]] = []
        if args.per_expectation:
            from framework.quality.suite import check

            specs = list(checked.spec.steps["calls"].expectations)
            for spec in [None, *specs]:
                chosen = specs if spec is None else [spec]
                times = []
                for k in range(2):
                    group = f"bench/single/{len(single)}/{k}"
                    spark.sparkContext.setJobGroup(group, "single")
                    began = time.perf_counter()
                    check(step_rows, "calls", "step", chosen)
                    times.append(time.perf_counter() - began)
                    clear_job_group(spark)
                    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
                single.append(("whole suite (8), one check() call" if spec is None else spec.label, min(times), jobs))
        step_rows.unpersist()
        spark.catalog.dropTempView("checked")

        # -- optional: cProfile of one more B run's quality phase
        profiled = None
        if args.profile:
            _, profiled = run_pipeline(spark, checked, profile, Path(tmp) / "wh-b-profile", "B-profile", cprofile=True)

        # -- report
        a, b, c = median_of(totals["A"]), median_of(totals["B"]), median_of(hand)
        cost = b - a
        print()
        print(f"step rows: {cached_rows:,}; hand-written checks: {dict(hand_result.asDict()) if hand_result else {}}")
        print(f"observed in the noop pass: {observed[-1]}")
        quality = last_b.quality
        print(
            f"B's expectations: {sum(r.success for r in quality)}/{len(quality)} passed; "
            f"quarantined {sum(last_b.quarantined.values()):,} rows; output {last_b.outputs[0].rows:,} rows"
        )
        for r in quality:
            seen = f"{r.unexpected_count:,} unexpected" if r.unexpected_count is not None else f"observed {r.observed_value}"
            print(f"  {'ok  ' if r.success else 'FAIL'} {r.severity:<4} {r.expectation}({r.threshold or ''}) {seen}")
        print()
        print("wall time, median over runs (s):")
        for label, values in (
            ("A  pipeline, no expectations (baseline)", totals["A"]),
            ("B  pipeline + 8 expectations", totals["B"]),
            ("C  8 checks by hand, one SQL pass (cached rows)", hand),
        ):
            print(f"  {label:<50} {median_of(values):7.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
        print(f"  {'cost of the suite = B - A':<50} {cost:7.2f}")
        print("  for reference, the step's rows without writing them:")
        for label, values in reference.items():
            print(f"    {label:<48} {median_of(values):7.2f}  ({', '.join(f'{v:.2f}' for v in values)})")

        print()
        columns = [*PHASES, "other", "total"]
        print("phases, median over runs (s); other = the rest of run_pipeline (events, lock, recovery check, cleanup):")
        print("     " + " ".join(f"{c:>{max(len(c), 6)}}" for c in columns))
        for label in ("A", "B"):
            for ph in phase_runs[label]:
                ph.seconds["other"] = ph.seconds["total"] - sum(ph.seconds.get(c, 0.0) for c in columns[:-2])
            row = [median_of([ph.seconds.get(c, 0.0) for ph in phase_runs[label]]) for c in columns]
            print(f"  {label:<2} " + " ".join(f"{v:>{max(len(c), 6)}.2f}" for c, v in zip(columns, row, strict=True)))
        print(
            "  B computes its metrics while it stages (an Observation of the staging pass), so its extra time is "
            "in plan (GX resolving the checks on an empty frame), stage and check_rows (GX judging the observed metrics)"
        )
        print()
        print("Spark jobs per phase (last repeat):")
        for label in ("A", "B"):
            jobs = spark_jobs(spark, f"bench/{label}{args.repeat - 1}/")
            per_phase: dict[str, list[dict]] = defaultdict(list)
            for job in jobs:
                per_phase[job["group"].rsplit("/", 1)[-1]].append(job)
            print(
                f"  {label}: {len(jobs)} jobs; "
                + ", ".join(f"{p} {len(js)} ({sum(j['seconds'] for j in js):.2f} s)" for p, js in per_phase.items())
            )
        print("  B's jobs by phase and call site (last repeat): jobs, summed job seconds")
        grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for job in spark_jobs(spark, f"bench/B{args.repeat - 1}/"):
            grouped[(job["group"].rsplit("/", 1)[-1], short_call_site(job["name"]))].append(job)
        for (phase, site), js in grouped.items():
            print(f"    {phase:<16} {len(js):>3} {sum(j['seconds'] for j in js):6.2f} s  {site}")

        if single:
            print()
            print("each expectation alone via framework.quality.suite.check on the cached step rows (best of 2):")
            for label, seconds, jobs in single:
                print(f"  {seconds:6.2f} s  {jobs:>2} jobs  {label}")

        if profiled is not None and profiled.profiler is not None:
            print()
            print(f"cProfile of one B run's quality phase ({profiled.seconds.get('check_rows', 0):.2f} s), top 25 cumulative:")
            out = io.StringIO()
            pstats.Stats(profiled.profiler, stream=out).sort_stats("cumulative").print_stats(25)
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])

        print()
        print(
            f"ratio cost / A (the step's own run):          {cost / a:5.2f}  (target <= 0.25: {'met' if cost / a <= 0.25 else 'MISSED'})"
        )
        print(f"ratio cost / C (same checks by hand, one pass): {cost / c:5.1f}")
        record("quality.vs_step", cost / a)
        record("quality.vs_sql", cost / c, digits=1)
        print("note: one noisy 2-core machine; medians of few runs; differences under ~0.3 s are within noise")
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
