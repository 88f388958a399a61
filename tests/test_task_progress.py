"""A long output stage reports its tasks done / total while it runs."""

from __future__ import annotations

import re

from framework.engine.task_progress import task_progress


def test_a_slow_stage_reports_tasks_done_out_of_total(spark):
    reports: list[str] = []
    slow = spark.range(0, 8, 1, numPartitions=8).selectExpr("reflect('java.lang.Thread', 'sleep', cast(300 as bigint)) as s")
    with task_progress(spark, reports.append, every=0.1, after=0.0):
        slow.write.format("noop").mode("overwrite").save()
    counts = [tuple(map(int, m.groups())) for r in reports if (m := re.search(r"stage \d+: (\d+)/(\d+) tasks", r))]
    assert counts, reports
    assert all(total == 8 and 0 <= done <= 8 for done, total in counts)
    assert len({done for done, _ in counts}) >= 2, "the count moves while the stage runs"


def test_a_quick_stage_stays_quiet(spark):
    reports: list[str] = []
    with task_progress(spark, reports.append, every=0.1, after=5.0):
        spark.range(10).write.format("noop").mode("overwrite").save()
    assert reports == []
