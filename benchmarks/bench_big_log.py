"""A text source bigger than memory: one access log of `--mb` megabytes, read with the default
profile (embedded local Spark, its default driver heap).

    .venv/bin/python benchmarks/bench_big_log.py [--mb 1024] [--repeat 1] [--streaming]

The log is `tributary generate access-log`'s lines, repeated up to the size, one file. The pipeline
parses every line with the access_log example's pattern (a line that does not match goes to the
quarantine with its file and line) and writes per-status counts with each status's last line
number to Delta, so every line's `_line` is computed. Baseline, in the same run: Spark's own
`spark.read.text(file).count()` in a fresh process (no line numbers, no parsing). Each is a fresh
process, the JVM start included; peak memory is the largest resident size of the process tree.

With `--streaming` the same source is a stream (trigger available-now) and every parsed line is
written to Delta with its `_line`: a stream numbers lines as it reads them, split by split (the
`LineNumber` JVM function). The check is then that the lines written are numbered 1 to the line
count once each, less the quarantined ones.

Before text sources were read split by split, each file was one task and one string: a 200 MB log
killed the JVM (`OutOfMemoryError: Java heap space`), and a stream read each file that way until
2026-12-07 (a 300 MB log killed it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

from _common import REPO, record

sys.path.insert(0, str(REPO))

SOURCES = """\
sources:
  requests:
    format: text
    path: data/big
    parse:
      pattern: '^(\\S+) \\S+ \\S+ \\[([^\\]]+)\\] "(\\S+) (\\S+) [^"]*" (\\d{3}) (\\S+) "([^"]*)"$'
      columns: {client: STRING, ts_text: STRING, method: STRING, path: STRING, status: INT, bytes: BIGINT, referer: STRING}
"""

PIPELINE = (
    "name: big_log\n"
    + SOURCES
    + """\
steps:
  by_status:
    sql: |
      SELECT status, count(*) AS requests, sum(bytes) AS bytes, max(_line) AS last_line
      FROM {{ source('requests') }}
      GROUP BY status
outputs:
  by_status: {mode: overwrite}
"""
)

STREAMING_PIPELINE = (
    "name: big_log\nmode: streaming\n"
    + SOURCES
    + """\
steps:
  by_line:
    sql: SELECT _line, status, bytes FROM {{ source('requests') }}
outputs:
  by_line: {mode: append}
"""
)

BASELINE = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false").getOrCreate()
    print(spark.read.text(sys.argv[1]).count())
    """
)


def write_log(folder: Path, megabytes: int) -> int:
    """One log file of about `megabytes` MB; returns its line count."""
    from framework.generators.access_log import generate_access_log

    with tempfile.TemporaryDirectory() as tmp:
        generate_access_log(Path(tmp), instances=2000, files=1, garbage=3)
        sample = "".join(p.read_text(encoding="utf-8") for p in sorted(Path(tmp).glob("*.log")))
    folder.mkdir(parents=True, exist_ok=True)
    target, written, lines = megabytes * 1024 * 1024, 0, 0
    block = sample.encode()
    with open(folder / "access.log", "wb") as out:
        while written < target:
            out.write(block)
            written += len(block)
            lines += sample.count("\n")
    return lines


def peak_rss(command: list[str], cwd: Path) -> tuple[float, int, str]:
    """(seconds, peak resident bytes of the process and its children, stdout) of one command."""
    began = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0

    def watch() -> None:
        nonlocal peak
        while process.poll() is None:
            peak = max(peak, _tree_rss(process.pid))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = process.communicate()
    watcher.join()
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{err[-3000:]}")
    return time.perf_counter() - began, peak, out


def _tree_rss(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/statm") as handle:
                total += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{current}/task/{current}/children") as handle:
                todo += [int(c) for c in handle.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--streaming", action="store_true", help="the source as a stream, every line written")
    args = parser.parse_args()
    project = Path(tempfile.mkdtemp(prefix="tributary-big-log-"))
    try:
        (project / "pipelines").mkdir()
        (project / "pipelines" / "big_log.yaml").write_text(STREAMING_PIPELINE if args.streaming else PIPELINE)
        lines = write_log(project / "data" / "big", args.mb)
        size = (project / "data" / "big" / "access.log").stat().st_size
        print(f"log: {size / 2**20:,.0f} MB, {lines:,} lines, one file")
        env_python = sys.executable
        runs, baselines = [], []
        for round_ in range(1, args.repeat + 1):
            shutil.rmtree(project / "warehouse", ignore_errors=True)
            seconds, peak, _ = peak_rss([env_python, "-m", "framework", "run", "big_log", "--no-engine"], project)
            runs.append((seconds, peak))
            print(f"  tributary run   round {round_}: {seconds:6.1f} s, peak memory {peak / 2**20:,.0f} MB")
            script = project / "baseline.py"
            script.write_text(BASELINE)
            seconds, peak, out = peak_rss([env_python, str(script), str(project / "data" / "big" / "access.log")], project)
            baselines.append((seconds, peak))
            print(
                f"  spark text count round {round_}: {seconds:6.1f} s, peak memory {peak / 2**20:,.0f} MB ({out.strip()} lines)"
            )
        from framework.io.delta.delta_rs import DeltaRsStore

        store = DeltaRsStore()
        quarantine = project / "warehouse" / "_tributary" / "quarantine"
        quarantined = (
            store.query(str(quarantine), "SELECT count(*) AS n FROM t").to_pylist()[0]["n"] if quarantine.exists() else 0
        )
        if args.streaming:
            written = "SELECT count(*) AS n, count(DISTINCT _line) AS d, min(_line) AS lo, max(_line) AS hi FROM t"
            counts = store.query(str(project / "warehouse" / "by_line"), written).to_pylist()[0]
            parsed, last = counts["n"], counts["hi"]
            print(
                f"written {parsed:,} lines ({counts['d']:,} distinct _line, {counts['lo']:,} to {last:,}), quarantined {quarantined:,}"
            )
            assert counts["d"] == parsed and counts["lo"] >= 1, "each line written once, with its own number"
        else:
            table = store.query(str(project / "warehouse" / "by_status"), "SELECT * FROM t").to_pylist()
            parsed = sum(r["requests"] for r in table)
            last = max(r["last_line"] for r in table)
            print(f"parsed {parsed:,} lines, quarantined {quarantined:,}, largest _line {last:,} (of {lines:,})")
        assert parsed + quarantined == lines and last <= lines, "every line is parsed or quarantined, numbered within the file"
        run_s = sorted(r[0] for r in runs)[len(runs) // 2]
        base_s = sorted(b[0] for b in baselines)[len(baselines) // 2]
        peak_mb = max(r[1] for r in runs) / 2**20
        print(f"tributary run ÷ Spark's text count: {run_s / base_s:.2f} × the time ({size / 2**20 / run_s:,.1f} MB/s)")
        print(f"peak memory of the run: {peak_mb:,.0f} MB for a {size / 2**20:,.0f} MB file")
        record("text.big_log_stream_ratio" if args.streaming else "text.big_log_ratio", run_s / base_s)
    finally:
        shutil.rmtree(project, ignore_errors=True)


if __name__ == "__main__":
    main()
