"""Kill a streaming run with SIGKILL at random moments, restart it, and count what survived in
every table it writes: the outputs, the quarantine and the late rows, each compared row by row
(as multisets) with an uninterrupted run of the same input. Also the time from a restart until
the stream has caught up.

The pipeline has what can go wrong between a crash and a replay: an SWA step (state carried
between micro-batches beside the checkpoint), a time-window join of two streams (Spark's state
store), a `drop` expectation (refused rows leave the stream through a quarantine query of their
own) and one on an output (split in the output's sink), malformed records and late rows.

    .venv/bin/python benchmarks/bench_recovery.py [--kills 20] [--kills-per-cycle 4] [--files 16] [--seed 1]

A cycle starts from an empty warehouse, kills `--kills-per-cycle` runs one after the other
(each resumes what the killed one left), then lets a last run finish; its tables must equal the
reference run's. Baseline: the uninterrupted run (its duration, and its tables as the truth).
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

from _common import REPO, record

sys.path.insert(0, str(REPO))

PIPELINE = """\
name: recovery
mode: streaming
sources:
  clicks:
    format: json
    path: landing/clicks
    schema: user STRING, page STRING, ts TIMESTAMP, ms INT
    event_time: ts
    watermark: 30s
    max_files_per_trigger: 1
  views:
    format: json
    path: landing/views
    schema: user STRING, ts TIMESTAMP, ad STRING
    event_time: ts
    watermark: 30s
    max_files_per_trigger: 1
steps:
  clean:
    sql: select user, page, ts, ms from {{ source('clicks') }}
    expectations:
      - expect_column_values_to_be_between: {column: ms, min_value: 0}
        severity: drop
  sessions:
    swa: {input: clean, key: [user], size: 5, timeout: 20s, event_time: ts,
          aggregates: {clicks: count(*), total_ms: sum(ms), pages: sort_array(collect_list(page))}}
  seen:
    join: {left: clicks, right: views, on: [user], within: {before: 10s, after: 10s}}
outputs:
  sessions: {mode: append}
  seen:
    mode: append
    expectations:
      - expect_column_values_to_not_be_null: {column: ad}
        severity: drop
"""

#: what each table is compared on (columns a rerun may change, such as run ids and times, left out)
TABLES = {
    "sessions": None,
    "seen": None,
    "_tributary/quarantine": ("source", "file", "line", "record", "reason"),
    "_tributary/late_rows": ("source", "steps", "event_time", "watermark", "record", "reason"),
}


def land(root: Path, files: int, rng: random.Random) -> None:
    """Per file (one micro-batch): 200 clicks and 60 views of 40 users in that file's minute, a few
    with a negative duration or no ad (refused), a few late by ten minutes, one malformed line."""
    for f in range(files):
        minute = 8 * 60 + f

        def ts(second: int, minute: int = minute) -> str:
            return f"2026-11-02T{minute // 60:02d}:{minute % 60:02d}:{second:02d}Z"

        clicks = [
            {
                "user": f"u{rng.randrange(40)}",
                "page": f"/p{rng.randrange(9)}",
                "ts": ts(rng.randrange(60)),
                "ms": rng.randrange(-3, 400),
            }
            for _ in range(200)
        ]
        if f >= 12:  # late: ten minutes behind the newest rows seen
            clicks += [{"user": f"u{i}", "page": "/late", "ts": ts(i, minute - 10), "ms": 1} for i in range(3)]
        views = [
            {
                "user": f"u{rng.randrange(40)}",
                "ts": ts(rng.randrange(60)),
                "ad": None if rng.random() < 0.05 else f"a{rng.randrange(5)}",
            }
            for _ in range(60)
        ]
        for side, rows in (("clicks", clicks), ("views", views)):
            path = root / "landing" / side / f"part-{f:04d}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r) + "\n" for r in rows) + ("{not json\n" if side == "clicks" else ""))
            os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # new files are read in this order


def tables(project: Path) -> dict[str, Counter]:
    """Each table's rows as a multiset, paths made relative to the project."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    found = {}
    for name, columns in TABLES.items():
        path = project / "warehouse" / name
        if not DeltaTable.is_deltatable(str(path)):
            found[name] = Counter()
            continue
        data = pa.table(QueryBuilder().register("t", DeltaTable(str(path))).execute("select * from t").read_all())
        keep = columns or tuple(data.column_names)
        rows = zip(*[data.column(c).to_pylist() for c in keep], strict=True)
        found[name] = Counter(tuple(str(v).replace(str(project), "") for v in row) for row in rows)
    return found


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
    parser.add_argument("--kills-per-cycle", type=int, default=4)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="print a few of the rows each cycle lost or added")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        (root / "pipelines").mkdir(parents=True)
        shutil.copytree(REPO / "configs", root / "configs")
        (root / "pipelines" / "recovery.yaml").write_text(PIPELINE)
        land(root, args.files, rng)
        reference_root = Path(tmp) / "reference"
        shutil.copytree(root, reference_root)
        code, uninterrupted = run(reference_root, None)
        assert code == 0, "the uninterrupted run failed"
        expected = tables(reference_root)

        catch_up: list[float] = []
        kills = cycles = cycles_equal = 0
        lost: Counter = Counter()
        duplicated: Counter = Counter()
        while kills < args.kills:
            shutil.rmtree(root / "warehouse", ignore_errors=True)
            for _ in range(min(args.kills_per_cycle, args.kills - kills)):
                code, _ = run(root, rng.uniform(3.0, uninterrupted))  # killed at a random moment
                kills += code != 0
            code, seconds = run(root, None)  # the last restart catches up
            cycles += 1
            got = tables(root)
            differences, rows = [], []
            for name in TABLES:
                missing, extra = expected[name] - got[name], got[name] - expected[name]
                lost[name] += sum(missing.values())
                duplicated[name] += sum(extra.values())
                differences += [f"{name}: {sum(missing.values())} lost, {sum(extra.values())} extra"] if missing or extra else []
                rows += [f"  {name} - {row}" for row in list(missing)[:3]] + [f"  {name} + {row}" for row in list(extra)[:3]]
            cycles_equal += code == 0 and got == expected
            if code == 0:
                catch_up.append(seconds)
            said = "; ".join(differences) if differences else "every table equals the reference"
            print(f"cycle {cycles}: {kills} kills so far (last run exit {code}); {said}", flush=True)
            if args.verbose:
                print("\n".join(rows), flush=True)

        rows = {name: sum(c.values()) for name, c in expected.items()}
        print(f"\n{kills} SIGKILLs at random moments in {cycles} cycles; {args.files} files per source, one per micro-batch")
        print(f"uninterrupted run (baseline): {uninterrupted:.1f} s; rows: " + ", ".join(f"{n} {r:,}" for n, r in rows.items()))
        print(f"cycles whose tables equal the uninterrupted run's: {cycles_equal}/{cycles}")
        print("lost rows:       " + ", ".join(f"{n} {lost[n]}" for n in TABLES))
        print("duplicated rows: " + ", ".join(f"{n} {duplicated[n]}" for n in TABLES))
        record("recovery.lost_duplicated", f"{sum(lost.values())} / {sum(duplicated.values())}")
        if catch_up:
            print(
                f"last restart to caught up: median {statistics.median(catch_up):.1f} s "
                f"= {statistics.median(catch_up) / uninterrupted:.2f} x the uninterrupted run (JVM start included in both)"
            )
            record("recovery.catch_up", statistics.median(catch_up) / uninterrupted)


if __name__ == "__main__":
    main()
