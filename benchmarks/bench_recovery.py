"""Kill a streaming run N times at random moments (SIGKILL), restart it each time, and count what
survived: rows lost and rows duplicated against an uninterrupted run of the same input, and the
mean time from each restart until the stream had caught up (all input processed).

    .venv/bin/python benchmarks/bench_recovery.py [--kills 20] [--files 40] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import REPO

sys.path.insert(0, str(REPO))

PIPELINE = """\
name: recovery
mode: streaming
sources:
  clicks:
    format: json
    path: landing
    schema: user STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: 1h
    max_files_per_trigger: 1
steps:
  kept:
    sql: select user, ts, ms from {{ source('clicks') }} where ms >= 0
outputs:
  kept:
    mode: append
"""


def rows_of(table: Path) -> Counter:
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    if not DeltaTable.is_deltatable(str(table)):
        return Counter()
    data = pa.table(QueryBuilder().register("t", DeltaTable(str(table))).execute("select user, ts, ms from t").read_all())
    return Counter(map(tuple, zip(*[data.column(c).to_pylist() for c in data.column_names], strict=True)))


def run(project: Path, kill_after: float | None) -> tuple[int, float]:
    # embedded: a kill must hit the process that commits (a warm engine would cancel the run cleanly instead)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "TRIBUTARY_ENGINE": "0"}
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "framework", "run", "recovery"],
        cwd=project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    if kill_after is not None:
        try:
            process.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    return process.wait(), time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        (root / "pipelines").mkdir(parents=True)
        shutil.copytree(REPO / "configs", root / "configs")
        (root / "pipelines" / "recovery.yaml").write_text(PIPELINE)
        (root / "landing").mkdir()
        for f in range(args.files):
            lines = [
                json.dumps({"user": f"u{rng.randrange(50)}", "ts": f"2026-11-02T08:{f % 60:02d}:{i % 60:02d}Z", "ms": i})
                for i in range(200)
            ]
            (root / "landing" / f"part-{f:04d}.json").write_text("\n".join(lines) + "\n")
        reference_root = Path(tmp) / "reference"
        shutil.copytree(root, reference_root)
        _, uninterrupted = run(reference_root, None)
        expected = rows_of(reference_root / "warehouse" / "kept")

        catch_up: list[float] = []
        killed = survived = lost = duplicated = 0
        for _ in range(args.kills):
            shutil.rmtree(root / "warehouse", ignore_errors=True)
            code, _ = run(root, rng.uniform(4.0, uninterrupted))  # killed at a random moment
            killed += code != 0
            code, seconds = run(root, None)  # restart and let it catch up
            got = rows_of(root / "warehouse" / "kept")
            lost += sum((expected - got).values())
            duplicated += sum((got - expected).values())
            survived += code == 0 and got == expected
            if code == 0:
                catch_up.append(seconds)
        print(
            f"{args.kills} kill/restart cycles ({killed} killed mid-run), {args.files} files x 200 rows, one file per micro-batch"
        )
        print(f"uninterrupted run: {uninterrupted:.1f} s for {sum(expected.values()):,} rows")
        print(f"survived: {survived}/{args.kills}; lost rows: {lost}; duplicated rows: {duplicated}")
        if catch_up:
            print(
                f"restart to caught up: mean {statistics.mean(catch_up):.1f} s, median {statistics.median(catch_up):.1f} s "
                f"(baseline: the uninterrupted run, {uninterrupted:.1f} s; JVM start included in both)"
            )


if __name__ == "__main__":
    main()
