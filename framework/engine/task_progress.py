"""Tasks done / total while an output is computed: a long stage shows that it moves.

Spark runs an output's query as stages of tasks; its status tracker knows, for each active stage,
how many tasks there are and how many finished. A background thread reads it every `every`
seconds while the output is staged and reports "stage 4: 37/200 tasks" on the output's progress
line, once the work has taken longer than `after` seconds (a short stage stays quiet). Without a
status tracker (e.g. a Spark Connect session) it reports nothing.

A streaming query runs its micro-batches' jobs in a job group of its own (its run id), so
`group_tasks` tells the stages of one query's jobs apart from those of the queries beside it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def task_progress(spark: Any, report: Callable[[str], None], every: float = 1.0, after: float = 2.0) -> Iterator[None]:
    tracker = tracker_of(spark)
    if tracker is None:
        yield
        return
    done = threading.Event()

    def poll() -> None:
        began, last = time.perf_counter(), ""
        while not done.wait(every):
            if time.perf_counter() - began < after:
                continue
            try:
                text = describe(tracker)
            except Exception:  # noqa: BLE001 - the JVM went away: the run says so, not this thread
                return
            if text and text != last:
                report(text)
                last = text

    thread = threading.Thread(target=poll, name="tributary-task-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def group_tasks(spark: Any, tracker: Any, group: str) -> str:
    """`describe` for the active stages of job group `group`'s running jobs ("" when none runs)."""
    listed = spark.sparkContext._jvm.java.util.Arrays.toString(tracker._jtracker.getJobIdsForGroup(group))
    in_group = {int(job) for job in str(listed).strip("[]").split(",") if job.strip()}  # one call, not one per job
    stages: set[int] = set()
    for job in in_group.intersection(tracker.getActiveJobsIds()):
        info = tracker.getJobInfo(job)
        if info is not None:
            stages.update(int(stage) for stage in info.stageIds)
    return describe(tracker, stages)


def describe(tracker: Any, among: set[int] | None = None) -> str:
    """The active stages (`among` those, when given) as "stage 4: 37/200 tasks (8 running)",
    joined; "" when none is active."""
    parts = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        if among is not None and stage_id not in among:
            continue
        info = tracker.getStageInfo(stage_id)
        if info is None or info.numTasks <= 0:
            continue
        running = f" ({info.numActiveTasks} running)" if info.numActiveTasks else ""
        parts.append(f"stage {stage_id}: {info.numCompletedTasks:,}/{info.numTasks:,} tasks{running}")
    return "; ".join(parts)


def tracker_of(spark: Any) -> Any:
    """The session's status tracker; None on a session without one (Spark Connect)."""
    try:
        return spark.sparkContext.statusTracker()
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no SparkContext
        return None
