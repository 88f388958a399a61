"""Where the time of `tributary test` goes, test by test, in one process (`--no-engine`'s path).

bench_tests.py says how long the whole command takes; this says what inside it costs, with
figures that do not move with the machine's load next to the seconds that do:

- the session's start (the JVM; a warm engine has it already), and reading and checking the tests;
- per test: its seconds, and the Spark jobs, stages and tasks it ran (Spark's status store, every
  job, the streaming queries' included);
- per micro-batch of a scenario's streaming queries: Spark's own split of the trigger (planning,
  the sink's work in `addBatch`: the per-micro-batch operator, the staging and the Delta commits).

`--passes 2` runs every test again in the same session: the second pass is what a warm engine
pays (the first carries the JVM's class loading and code generation).

`--workers 1` runs the tests one by one on the session (`tributary test` runs two at a time, each
on a session of its own, whose streaming queries this script does not hear): the micro-batch split
is printed only then.

    .venv/bin/python benchmarks/profile_tests.py [--passes 2] [--select NAMES] [--workers 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from _common import REPO, example_copy


def spark_work(spark: Any) -> tuple[int, int, int]:
    """Jobs, stages and tasks Spark ran so far (all of them, in job groups or not)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    count, stages, tasks = jobs.size(), 0, 0
    for i in range(count):
        job = jobs.apply(i)
        stages += job.stageIds().size()
        tasks += job.numTasks()
    return count, stages, tasks


class Printer:
    """Told each test's outcome: prints its seconds and the Spark work since the one before."""

    def __init__(self, spark: Any, work: list[tuple[int, int, int]]):
        self.spark, self.work = spark, work

    def __call__(self, outcome: Any) -> None:
        self.work.append(spark_work(self.spark))
        jobs, stages, tasks = (a - b for a, b in zip(self.work[-1], self.work[-2], strict=True))
        mark = "ok  " if outcome.passed else "FAIL"
        print(
            f"  {mark} {outcome.test.id:72} {outcome.seconds:6.2f} s  jobs {jobs:3}  stages {stages:3}  tasks {tasks:3}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passes", type=int, default=1, help="runs of every test in the same session")
    parser.add_argument("--select", default=None, help="test names or steps (as tributary test --select)")
    parser.add_argument("--workers", type=int, default=None, help="tests at a time (default: tributary test's)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    import framework.testing.run

    if args.workers is not None:
        framework.testing.run.TEST_WORKERS = args.workers
    from pyspark.sql.streaming import StreamingQueryListener

    from framework.engine.session import spark_session, stop_started_session
    from framework.project_context import ProjectContext
    from framework.testing.run import run_tests, tests_to_run

    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(example_copy(Path(tmp) / "project"))
        began = time.perf_counter()
        planned = tests_to_run(ProjectContext.load(None), None, args.select)
        print(f"reading and checking the tests   {time.perf_counter() - began:6.2f} s")
        began = time.perf_counter()
        spark = spark_session(planned[0].context.profile)
        print(f"the session's start (JVM)        {time.perf_counter() - began:6.2f} s  (load {os.getloadavg()[0]:.1f})")

        batches: list[tuple[str, int, dict[str, int]]] = []

        class Progress(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None: ...
            def onQueryIdle(self, event: Any) -> None: ...
            def onQueryTerminated(self, event: Any) -> None: ...

            def onQueryProgress(self, event: Any) -> None:
                p = event.progress
                batches.append((p.name or "", p.batchId, dict(p.durationMs)))

        spark.streams.addListener(Progress())
        try:
            for number in range(args.passes):
                print(f"\npass {number + 1}")
                work = [spark_work(spark)]
                run = run_tests(planned, Printer(spark, work))
                total = [a - b for a, b in zip(work[-1], work[0], strict=True)]
                print(
                    f"  all {len(run.outcomes)} tests {run.seconds:6.1f} s  jobs {total[0]}  stages {total[1]}  tasks {total[2]}"
                    f"  (load {os.getloadavg()[0]:.1f})"
                )
            time.sleep(1)  # the listener hears the last progress events asynchronously
            split: dict[str, int] = defaultdict(int)
            for _, _, durations in batches:
                for phase, ms in durations.items():
                    if phase != "triggerExecution":
                        split[phase] += ms
            total_ms = sum(d.get("triggerExecution", 0) for _, _, d in batches)
            print(f"\nmicro-batches: {len(batches)}, their triggers {total_ms / 1000:.1f} s, of which:")
            for phase, ms in sorted(split.items(), key=lambda kv: -kv[1]):
                print(f"  {phase:20} {ms / 1000:6.1f} s")
        finally:
            stop_started_session()


if __name__ == "__main__":
    main()
