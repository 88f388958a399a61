"""Scale curve of the stateful stream operators: SWA, the time join and a `group:` step, each run at
1×, 10× and 100× a base size, on the embedded default (local[2]) or (--cluster) on a local
standalone cluster.

    .venv/bin/python benchmarks/bench_scale.py [--sizes 1,10,100] [--base 1.0] [--batches 2]
        [--only swa,join,group] [--cluster [--workers 2]]

What is timed: one `run_pipeline` (compile + run, the in-process path of `tributary run`, Delta
write included) of a streaming pipeline with trigger availableNow, on one warm SparkSession (one
untimed run at 1× per operator first: JIT, Python workers). Generating the input is not timed.
It prints, per operator and size: input tuples, seconds, seconds per million tuples, micro-batches,
the peak state rows the run kept between micro-batches (the operator's own figure: SWA's held
tuples, the group step's held events, the time join's Spark state-store rows from its progress
reports; for SWA also their median over its micro-batches) with an estimate of their bytes (rows ×
the Arrow bytes of one input tuple), the driver JVM's resident memory after the run (on a cluster
the executors' is not in it; a JVM seldom returns memory, so it is a high-water mark), and the
ratios of seconds per million and of peak state at each size to 1×. The 1× peak is one sample
(the state after the first of two micro-batches), a larger size's the largest of many; and at 1×
the group step emits few groups (most are still held, waiting for the watermark, when the input
ends: 560 groups of 10, ~16 % of its events, against ~92 % at 10×), so it calls the function
for fewer events there. Compare 10× with 100× for the trend.

Why this shape: a stream that grows 10× should take 10× as long and hold the same state, as long
as the number of keys open at once does not change. So the input grows in event time, not in
density: every size has the same tuples per file and one file per source per micro-batch, and
10× is 10× as many files (micro-batches) over a 10× longer span at the same rate. 1× is two
micro-batches (--batches): a run's state is the state held between two of them (SWA's last
micro-batch of an availableNow run closes what is still open, so one micro-batch shows ~0).
Per generator:

- swa: `tributary generate service-trace` (framework.generators.service_trace): instances start
  as a Poisson process at a fixed mean interval (9.778 ms) and last ~11 s, so more instances are
  a longer trace with the same instances open at once; pages and clients are the same catalogue.
  Key head+client+time, n = 13, t = 22 s (benchmarks/bench_swa.py's pipeline).
- join: framework.generators.contacts at its fixed 50 people/s, the 30 s window and 1 min
  watermarks of the example's contact_join: the rows inside the join's horizon are the same at
  every size (names recur less as the people grow, which only lowers matches per row a little).
- group: benchmarks/bench_group.py's events (0.5 ms apart on average) over a fixed 2,000 keys,
  close by count 10, watermark 10 s: the held events are bounded by keys × 9 plus 10 s of events.

Targets: seconds per million at 10× and 100× ≤ ~1.2 × that at 1× (no worse than linear), and
peak state ≈ 1.0 × that at 1×. Fixed costs per run (~0.5 s: lock, run log, checkpoint
bookkeeping) weigh most at 1×, which flatters the larger sizes a little; per micro-batch costs
scale with the size and do not. Spark's file source lists its whole folder at each trigger, a
cost that grows with the number of files: a ratio well above 1 at 100× would show it.
"""

from __future__ import annotations

import argparse
import json
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

OPERATORS = ("swa", "join", "group")
#: input per micro-batch at --base 1 (one file per source per micro-batch)
SWA_INSTANCES_PER_BATCH = 1_600  # ≈ 18,000 tuples, ≈ 16 s of event time
JOIN_PEOPLE_PER_BATCH = 10_000  # ≈ 18,000 tuples, ≈ 200 s of event time
GROUP_EVENTS_PER_BATCH = 18_000  # ≈ 9 s of event time
GROUP_KEYS = 2_000

JOIN_PIPELINE = """
name: scale_join
mode: streaming
sources:
  phones: {{format: json, path: {data}/phones, schema: "name STRING, ts TIMESTAMP, phone STRING", event_time: ts, watermark: 1 min, max_files_per_trigger: 1}}
  emails: {{format: json, path: {data}/emails, schema: "name STRING, ts TIMESTAMP, email STRING", event_time: ts, watermark: 1 min, max_files_per_trigger: 1}}
steps:
  contacts:
    join: {{left: phones, right: emails, on: [name], type: inner, event_time: ts, within: {{before: 30s, after: 30s}}}}
outputs:
  contacts: {{mode: append}}
"""


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def jvm_rss_mib(spark) -> float | None:
    """The driver JVM's resident memory (Linux, a JVM pyspark launched), None otherwise."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except Exception:  # noqa: BLE001 - a figure only
        return None
    return None


def prepare(operator: str, root: Path, data: Path, multiple: int, base: float, batches: int) -> tuple[Path, int, float]:
    """Generate the input of one size and write its pipeline: (pipeline file, tuples, Arrow bytes per tuple)."""
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    files = batches * multiple
    if operator == "swa":
        from bench_swa import write_pipeline

        from framework.generators.service_trace import generate_service_trace

        trace = generate_service_trace(
            data, instances=round(SWA_INSTANCES_PER_BATCH * base * files), seed=7, files=files, fmt="parquet"
        )
        sample = pq.read_table(next((data / "static").glob("*.parquet")))
        pipeline = write_pipeline(root, "scale_swa", "streaming", "swa", 13, data, 1)
        return pipeline, trace.tuples, sample.nbytes / max(sample.num_rows, 1)
    if operator == "join":
        from framework.generators.contacts import generate_contacts

        counts = generate_contacts(data, people=round(JOIN_PEOPLE_PER_BATCH * base * files), files=files, seed=3)
        sample = pj.read_json(next((data / "phones").glob("*.json")))
        pipeline = root / "pipelines" / "scale_join.yaml"
        pipeline.write_text(JOIN_PIPELINE.format(data=data))
        return pipeline, counts["phones"] + counts["emails"], sample.nbytes / max(sample.num_rows, 1)
    from bench_group import PIPELINE, SIZE, generate_events

    events = round(GROUP_EVENTS_PER_BATCH * base * files)
    generate_events(data, events, GROUP_KEYS, files)
    sample = pq.read_table(next(data.glob("*.parquet")))
    pipeline = root / "pipelines" / "scale_group.yaml"
    pipeline.write_text(PIPELINE.format(data=data, size=SIZE).replace("name: group_bench", "name: scale_group"))
    return pipeline, events, sample.nbytes / max(sample.num_rows, 1)


def run_once(spark, root: Path, pipeline: Path, warehouse: Path) -> tuple[float, dict]:
    from framework.compiler import compile_pipeline
    from framework.engine.runner import run_pipeline
    from framework.profiles import load_profile
    from framework.project import Project

    began = time.perf_counter()
    project = Project(root)
    profile = load_profile(project).model_copy(update={"warehouse": str(warehouse)})
    result = run_pipeline(compile_pipeline(project, pipeline, profile), profile, spark=spark)
    seconds = time.perf_counter() - began
    observed = dict(result.outputs[0].observed)
    observed["rows_out"] = sum(o.rows or 0 for o in result.outputs)
    # an operator that models its state per micro-batch (SWA) reports the rows held after each one:
    # their median besides the peak (the last micro-batch of an availableNow run closes everything)
    held = [b["state_rows"] for f in result.capacity for b in (f.batches or []) if b.get("state_rows") is not None]
    observed["state_rows_median"] = statistics.median(held[:-1]) if len(held) > 1 else None
    return seconds, observed


def measure(spark, tmp: Path, operator: str, multiple: int, args) -> dict:
    root = tmp / "project"
    data = tmp / f"data-{operator}-{multiple}"
    began = time.perf_counter()
    pipeline, tuples, bytes_per_tuple = prepare(operator, root, data, multiple, args.base, args.batches)
    generated = time.perf_counter() - began
    try:
        seconds, observed = run_once(spark, root, pipeline, tmp / f"wh-{operator}-{multiple}")
    finally:
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(tmp / f"wh-{operator}-{multiple}", ignore_errors=True)
    peak = int(observed.get("state_rows_peak") or 0)
    row = {
        "operator": operator,
        "size": multiple,
        "tuples": tuples,
        "seconds": seconds,
        "per_million": seconds / tuples * 1e6,
        "batches": observed.get("batches"),
        "state_rows_peak": peak,
        "state_mib": peak * bytes_per_tuple / 2**20,
        "state_rows_median": observed.get("state_rows_median"),
        "rows_out": observed["rows_out"],
        "rss_mib": jvm_rss_mib(spark),
        "generated_s": generated,
        "load": load(),
    }
    print(
        f"    {operator} {multiple}×: {tuples:,} tuples in {seconds:.1f} s ({row['per_million']:.1f} s per million), "
        f"{row['batches']} micro-batches, peak state {peak:,} rows (median {row['state_rows_median'] or '–'}), "
        f"{row['rows_out']:,} rows out "
        f"(generated in {generated:.0f} s; {row['load']})",
        flush=True,
    )
    return row


def table(operator: str, rows: list[dict], where: str) -> None:
    base = rows[0]
    print(f"\n{operator} ({where}): seconds per million and peak state, ratios to {base['size']}×")
    print(
        f"  {'size':>5} {'tuples':>11} {'seconds':>8} {'s/M':>7} {'batches':>7} {'state rows':>10} {'median':>7} {'≈ MiB':>6} "
        f"{'JVM MiB':>7} {'s/M ratio':>9} {'state ratio':>11}  load"
    )
    for r in rows:
        per = r["per_million"] / base["per_million"]
        state = r["state_rows_peak"] / base["state_rows_peak"] if base["state_rows_peak"] else float("nan")
        rss = f"{r['rss_mib']:.0f}" if r["rss_mib"] is not None else "–"
        median = f"{r['state_rows_median']:,.0f}" if r.get("state_rows_median") is not None else "–"
        print(
            f"  {str(r['size']) + '×':>5} {r['tuples']:>11,} {r['seconds']:>8.1f} {r['per_million']:>7.1f} "
            f"{r['batches'] if r['batches'] is not None else '–':>7} {r['state_rows_peak']:>10,} {median:>7} {r['state_mib']:>6.1f} "
            f"{rss:>7} {per:>9.2f} {state:>11.2f}  {r['load']}"
        )


def bench(args) -> list[dict]:
    from framework.engine.session import spark_session
    from framework.profiles import Profile, SparkSettings

    conf = {
        "spark.sql.shuffle.partitions": 4,
        "spark.ui.enabled": False,
        # the time join's peak state comes from the query's progress reports: keep all of them
        "spark.sql.streaming.numRecentProgressUpdates": 100_000,
    }
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        root = tmp / "project"
        for folder in ("configs", "pipelines", "udfs"):
            (root / folder).mkdir(parents=True)
        conf_lines = "".join(f"    {k}: {v}\n" for k, v in conf.items())
        (root / "configs" / "local.yaml").write_text(
            f"spark:\n  master: {args.master}\n  conf:\n{conf_lines}warehouse: ./warehouse\ndelta_writer: auto\n"
        )
        from bench_group import UDF

        (root / "udfs" / "bench.py").write_text(UDF)
        spark = spark_session(Profile(spark=SparkSettings(master=args.master, conf=conf)))
        where = "local cluster " + args.master if args.master.startswith("spark://") else f"embedded {args.master}"
        print(f"scale curve, {where}, base {args.base:g}, {args.batches} micro-batch(es) at 1× ({load()})", flush=True)
        for operator in args.only:
            print(f"  {operator}: warm-up at 1× (not counted)", flush=True)
            measure(spark, tmp, operator, 1, args)
        # every operator at one size before the next size: a run cut short still has whole columns
        for multiple in args.sizes:
            for operator in args.only:
                rows.append(measure(spark, tmp, operator, multiple, args))
                if args.json:
                    Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
        for operator in args.only:
            table(operator, [r for r in rows if r["operator"] == operator], where)
    return rows


def record_ratios(rows: list[dict]) -> None:
    for operator in OPERATORS:
        found = {r["size"]: r for r in rows if r["operator"] == operator}
        for multiple in (10, 100):
            if 1 not in found or multiple not in found:
                continue
            record(f"scale.{operator}_per_million_{multiple}x", found[multiple]["per_million"] / found[1]["per_million"])
            if found[1]["state_rows_peak"]:
                record(f"scale.{operator}_state_{multiple}x", found[multiple]["state_rows_peak"] / found[1]["state_rows_peak"])


def on_cluster(args) -> None:
    """The same bench in a child process whose driver talks to a local standalone cluster."""
    from framework.localcluster.launcher import start_cluster

    with tempfile.TemporaryDirectory() as folder:
        cluster = start_cluster(Path(folder), workers=args.workers, cores=1, memory=args.worker_memory, tied=True)
        try:
            env = {**cluster.env, "PYTHONPATH": str(REPO), "TRIBUTARY_ENGINE": "0", "TRIBUTARY_BENCH_RECORD": "0"}
            command = [sys.executable, __file__, "--master", cluster.master, "--sizes", ",".join(map(str, args.sizes))]
            command += ["--base", str(args.base), "--batches", str(args.batches), "--only", ",".join(args.only)]
            command += ["--json", str(Path(args.json).resolve())] if args.json else []
            subprocess.run(command, env=env, cwd=folder, check=True)
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,10,100", help="multiples of the base size, the first is the reference")
    parser.add_argument("--base", type=float, default=1.0, help="scales the input per micro-batch")
    parser.add_argument("--batches", type=int, default=2, help="micro-batches at 1×")
    parser.add_argument("--only", default=",".join(OPERATORS), help="operators to run, comma-separated")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--cluster", action="store_true", help="on a local standalone cluster (started and stopped here)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="1g")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.only = [o for o in args.only.split(",") if o]
    unknown = set(args.only) - set(OPERATORS)
    if unknown:
        parser.error(f"unknown operator(s) {', '.join(sorted(unknown))}: choose from {', '.join(OPERATORS)}")
    if args.cluster:
        on_cluster(args)
        return
    rows = bench(args)
    if args.master == "local[2]" and args.base == 1.0 and args.batches == 2:  # the published setting
        record_ratios(rows)


if __name__ == "__main__":
    main()
