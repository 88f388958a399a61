"""`tributary backfill P --from A --to B`: every interval of the schedule in a range, once.

The range is cut by the pipeline's cron into intervals (those lying wholly within it). An interval
already committed is skipped (framework.schedule.history: a run of it ended ok, or its commits are
in the tables), so a backfill run again writes nothing twice. The rest run in order, one after
another on one SparkSession, or `--parallel K` at a time.

The backfill holds the pipeline's run lock for all its runs: no other run of the pipeline starts
meanwhile, and its own runs, which share the lock, leave each other alone (framework.engine.runner's
`concurrent`). With --parallel each worker runs on a session of its own over the shared JVM (views
and settings belong to a session), and commits to one table take turns (framework.io.delta.delta_rs).
Outputs that overwrite the whole table are refused with --parallel: the table would end as
whichever interval committed last; interval-sliced outputs are disjoint slices, each replaced by
its own interval's run, so they run in any order. A failed interval does not stop the others;
running the backfill again runs it.

`--rerun` redoes the committed intervals too, on purpose (late data, a fixed bug): each run
replaces its interval's slice, and one whose input and code did not change commits nothing (its
run key is the one its commit carries). It is refused for outputs that append, which would add
a changed interval's rows a second time. Chosen over a `clear` command that marks intervals for
the scheduler: a rerun replaces in place, so nothing needs to be marked, the result is there
when the command ends, and the run log stays the only record (no "cleared" state to reconcile).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from framework.errors import BadInput, Problem
from framework.project_context import ProjectContext
from framework.schedule.attempt import Attempted, Attempts, Say, Sessions, describe, restore_signals, stop_on_signals
from framework.schedule.clock import SystemClock
from framework.schedule.due import Due
from framework.schedule.history import BACKFILL, OK
from framework.schedule.pipelines import ScheduledPipeline
from framework.spec.intervals import MAX_INTERVALS, Interval, take


@dataclass
class Backfilled:
    """What a backfill came to: its attempts in order, and whether a signal stopped it."""

    done: list[Attempted]
    stopped: bool

    @property
    def failed(self) -> list[Attempted]:
        return [d for d in self.done if d.outcome != OK]


def check_range(
    context: ProjectContext, begin: str, end: str, parallel: int, rerun: bool = False
) -> tuple[ScheduledPipeline, list[Interval]]:
    """The backfill's pipeline and its intervals within --from `begin` … --to `end` (naive times
    in its schedule's timezone), or BadInput; no Spark (the CLI says bad input before it waits for
    a warm engine)."""
    first, last = context.instant(begin, "--from"), context.instant(end, "--to")
    if first >= last:
        raise BadInput(Problem(f"--from {begin} must come before --to {end}"))
    return _planned(context, context.pipeline_path, first, last, parallel, rerun)


def backfill_range(context: ProjectContext, begin: str, end: str, parallel: int, say: Say, rerun: bool = False) -> Backfilled:
    """`tributary backfill`: the context's pipeline over --from `begin` … --to `end` (naive times
    in its schedule's timezone), on one Spark session (or `parallel` sessions over one JVM)."""
    first, last = context.instant(begin, "--from"), context.instant(end, "--to")
    if first >= last:
        raise BadInput(Problem(f"--from {begin} must come before --to {end}"))
    stopping = threading.Event()
    sessions = Sessions(context.profile, started=lambda: stop_on_signals(stopping))
    attempts = Attempts(context, SystemClock(), sessions, stopping, say)
    try:
        done = backfill(attempts, context.pipeline_path, first, last, parallel, rerun)
    finally:
        sessions.close()
    return Backfilled(done, stopping.is_set())


def backfill(
    attempts: Attempts, path: Path, begin: datetime, end: datetime, parallel: int = 1, rerun: bool = False
) -> list[Attempted]:
    """Run the intervals of [begin, end] not yet committed (`rerun`: all of them); what each
    attempt came to, in order."""
    pipeline, intervals = _planned(attempts.context, path, begin, end, parallel, rerun)
    previous = stop_on_signals(attempts.stopping)
    try:
        with attempts.lock(pipeline.name, f"backfill-{os.getpid()}"):
            return _run(attempts, pipeline, intervals, parallel, rerun)
    finally:
        restore_signals(previous)


def _planned(
    context: ProjectContext, path: Path, begin: datetime, end: datetime, parallel: int, rerun: bool
) -> tuple[ScheduledPipeline, list[Interval]]:
    """The pipeline as a scheduled one and the intervals of [begin, end]; BadInput when it cannot be backfilled."""
    compiled = context.for_pipeline(path).compile()
    spec, loaded = compiled.spec, compiled.loaded
    if spec.mode == "streaming":
        raise BadInput(
            loaded.problem(
                "a streaming pipeline has no intervals to backfill: one run processes everything new",
                ("mode",),
                hint=f"run it: tributary run {spec.name}",
            )
        )
    if spec.schedule is None:
        raise BadInput(
            loaded.problem(
                "backfill cuts the range into the intervals of the pipeline's schedule, and it has none",
                ("name",),
                hint="add schedule: {cron: '0 0 * * *'} (daily intervals), or run one interval: tributary run --interval START/END",
            )
        )
    if parallel < 1:
        raise BadInput(Problem(f"--parallel {parallel}: at least 1"))
    overwritten = [name for name, output in spec.outputs.items() if output.mode == "overwrite" and not spec.sliced_by(name)]
    if parallel > 1 and overwritten:
        raise BadInput(
            loaded.problem(
                f"--parallel: output(s) {', '.join(overwritten)} overwrite their table, so intervals committing out of order "
                "would leave whichever came last",
                ("outputs", overwritten[0]),
                hint="slice them by interval (interval: {column: day}: each run replaces its own rows), backfill them in "
                "order (drop --parallel), or make the outputs merge",
            )
        )
    appended = [name for name, output in spec.outputs.items() if output.mode == "append"]
    if rerun and appended:
        raise BadInput(
            loaded.problem(
                f"--rerun: output(s) {', '.join(appended)} append, so a rerun of an interval whose input changed would add "
                "its rows a second time",
                ("outputs", appended[0], "mode"),
                hint="slice them by interval (interval: {column: day} and no mode): a rerun then replaces the interval's rows",
            )
        )
    cron = spec.schedule.parsed()
    start, stop = spec.schedule.start_at(), spec.schedule.end_at()  # no interval before start: nor after end:
    begin, end = max(begin, start) if start is not None else begin, min(end, stop) if stop is not None else end
    try:
        intervals = take(cron.intervals(begin, end), MAX_INTERVALS, f"{begin.isoformat()} … {end.isoformat()}")
    except ValueError as e:
        raise BadInput(Problem(str(e), hint="backfill a shorter range")) from None
    if not intervals:
        raise BadInput(
            Problem(
                f"no interval of '{spec.schedule.cron}' ({spec.schedule.timezone}) lies within {begin.isoformat()} … {end.isoformat()}"
                + (" (the range within the schedule's start: and end:)" if start is not None or stop is not None else ""),
                hint="widen the range: --from and --to are the first interval's start and the last one's end",
            )
        )
    return ScheduledPipeline(path, loaded.shown_as, spec.name, spec.mode, spec.schedule), intervals


def _run(
    attempts: Attempts, pipeline: ScheduledPipeline, intervals: list[Interval], parallel: int, rerun: bool = False
) -> list[Attempted]:
    slots = attempts.runlog.slots(pipeline.name)
    for interval in intervals:
        if interval in slots and slots[interval].done:
            attempts.close_committed(slots[interval])
    now = attempts.clock.now()
    committed = sum(1 for i in intervals if i in slots and slots[i].done)
    todo = [
        Due(pipeline, i, i.end, len(slots[i].runs) + 1 if i in slots else 1, now)
        for i in intervals
        if rerun or not (i in slots and slots[i].done)
    ]
    attempts.say(
        f"{pipeline.name}: {len(intervals)} interval(s) from {intervals[0].label()} to {intervals[-1].label()}; "
        + (
            f"{committed} committed, {len(todo)} to rerun (each replaces its slice; an unchanged one commits nothing)"
            if rerun
            else f"{committed} already committed, {len(todo)} to run"
        )
        + (f", {parallel} at a time" if parallel > 1 else "")
    )
    concurrent: set[str] = set()
    if parallel == 1 or len(todo) <= 1:
        done = []
        for due in todo:
            if attempts.stopping.is_set():
                break
            done.append(attempts.attempt(due, BACKFILL, concurrent=concurrent, final=True))
            attempts.say(describe(done[-1]))
        return done
    shared = attempts.sessions.get()
    local = threading.local()

    def work(due: Due) -> Attempted | None:
        if attempts.stopping.is_set():
            return None
        session: Any = getattr(local, "session", None)
        if session is None:
            session = local.session = shared.newSession()
        finished = attempts.attempt(due, BACKFILL, spark=session, concurrent=concurrent, final=True)
        attempts.say(describe(finished))
        return finished

    with ThreadPoolExecutor(parallel, thread_name_prefix="tributary-backfill") as pool:
        return [d for d in pool.map(work, todo) if d is not None]
