"""Tasks done / total while an output is computed: a long stage shows that it moves.

Spark runs an output's query as stages of tasks; its status tracker knows, for each active stage,
how many tasks there are and how many finished. A background thread reads it every `every`
seconds while the output is staged and reports "stage 4: 37/200 tasks" on the output's progress
line, once the work has taken longer than `after` seconds (a short stage stays quiet). Without a
status tracker (e.g. a Spark Connect session) it reports nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def task_progress(spark: Any, report: Callable[[str], None], every: float = 1.0, after: float = 2.0) -> Iterator[None]:
    tracker = _tracker(spark)
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


def describe(tracker: Any) -> str:
    """The active stages as "stage 4: 37/200 tasks (8 running)", joined; "" when none is active."""
    parts = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage_id)
        if info is None or info.numTasks <= 0:
            continue
        running = f" ({info.numActiveTasks} running)" if info.numActiveTasks else ""
        parts.append(f"stage {stage_id}: {info.numCompletedTasks:,}/{info.numTasks:,} tasks{running}")
    return "; ".join(parts)


def _tracker(spark: Any) -> Any:
    try:
        return spark.sparkContext.statusTracker()
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no SparkContext
        return None
