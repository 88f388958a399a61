"""Which runs of a scheduled pipeline are due, and when the next one is.

A batch pipeline's candidates are intervals of its cron, up to its latest fire (and its `end`):
- with `catch_up: all` (the default), every interval since `start`; without `start`, every interval
  since the newest one the scheduler ran (or that a killed run left unfinished), and at the very
  first start the latest one only; older intervals are for `tributary backfill`;
- with `catch_up: N`, the same but only among the N latest intervals; `latest` (false) is N = 1.

Candidates are generated as they are read (framework.spec.intervals), from the newest ones back
when only the latest N count. More than MAX_CATCH_UP of them is a schedule the scheduler cannot
serve as it stands (a `start:` validated months ago for a minute's cron, or a scheduler stopped for
months without one): BadSchedule names the count and the `catch_up:` that bounds it, and the
scheduler and `next` leave that pipeline out and serve the others.

A candidate is settled when it is done (framework.schedule.history) or when the scheduler's
attempts at it failed 1 + retries.count times. An unsettled one is due at its fire, or after a
failed attempt at the end of that attempt plus the retry wait (retries.wait). Attempts the
scheduler abandoned when it was stopped, and runs killed outright, use up no try: they are due
again at once. Oldest first; later intervals do not wait for one waiting for its retry.

A streaming pipeline's only candidate is its latest fire: one available-now run processes
everything that came since the last one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import chain, islice
from typing import Any

from framework.errors import Problem
from framework.schedule.history import SCHEDULE, Slot
from framework.schedule.pipelines import ScheduledPipeline
from framework.spec.intervals import MAX_CATCH_UP, Interval

_JUST_BEFORE = timedelta(microseconds=1)


class BadSchedule(ValueError):
    """A pipeline whose due runs cannot be worked out as its schedule stands; says what fixes it."""

    def __init__(self, pipeline: ScheduledPipeline, message: str, hint: str):
        super().__init__(f"{message}; {hint}")
        self.problem = Problem(message, file=pipeline.shown, line=pipeline.line, hint=hint)


@dataclass(frozen=True)
class Due:
    """One run to make: the pipeline, its interval (batch) or fire, its attempt, when it is due."""

    pipeline: ScheduledPipeline
    interval: Interval | None
    fire: datetime
    attempt: int
    at: datetime

    @property
    def key(self) -> Any:
        return self.fire if self.interval is None else self.interval

    def label(self) -> str:
        return self.interval.label() if self.interval is not None else f"fire {self.fire.isoformat()} (available now)"


@dataclass(frozen=True)
class Outlook:
    """Where a pipeline's schedule stands at a moment."""

    due: list[Due]  # due now, oldest first
    waiting: list[Due]  # retries due later
    next_fire: datetime | None  # the next fire after now (None: past the schedule's end)

    @property
    def wake(self) -> datetime | None:
        """When something of the pipeline becomes due next."""
        times = [d.at for d in self.waiting] + ([self.next_fire] if self.next_fire is not None else [])
        return min(times, default=None)


def outlook(pipeline: ScheduledPipeline, slots: dict[Any, Slot], now: datetime) -> Outlook:
    schedule = pipeline.schedule
    cron, start, end = schedule.parsed(), schedule.start_at(), schedule.end_at()
    horizon = min(now, end) if end is not None else now
    after = cron.next_fire(now)
    if start is not None:  # not before the first fire that runs something
        first = cron.next_fire(start - _JUST_BEFORE)
        after = max(after, first if pipeline.streaming else cron.next_fire(first))
    next_fire = after if end is None or after <= end else None
    if start is not None and cron.last_fire(horizon) < start:
        return Outlook([], [], next_fire)  # the schedule has not begun
    if pipeline.streaming:
        candidates: list[tuple[Interval | None, datetime]] = [(None, cron.last_fire(horizon))]
    else:
        candidates = [(interval, interval.end) for interval in _intervals(pipeline, slots, horizon)]
    due: list[Due] = []
    waiting: list[Due] = []
    limit = schedule.retries.count + 1
    for interval, fire in candidates:
        slot = slots.get(fire if interval is None else interval)
        failures = slot.failures(SCHEDULE) if slot is not None else []
        if slot is not None and (slot.done or len(failures) >= limit):
            continue
        at = fire
        if failures:
            ended = max((f.finished_at for f in failures if f.finished_at is not None), default=fire)
            at = max(fire, ended + timedelta(seconds=schedule.retries.wait(len(failures))))
        planned = Due(pipeline, interval, fire, len(failures) + 1, at)
        (due if at <= now else waiting).append(planned)
    due.sort(key=lambda d: (d.at, d.fire))
    return Outlook(due, waiting, next_fire)


def _intervals(pipeline: ScheduledPipeline, slots: dict[Any, Slot], horizon: datetime) -> list[Interval]:
    schedule = pipeline.schedule
    cron, start, limit = schedule.parsed(), schedule.start_at(), schedule.catch_up_limit()
    latest = cron.latest_complete(horizon)
    floor = start  # no candidate starts before it
    if limit is not None:
        window = list(islice(cron.intervals_back(latest.end), limit))  # the `limit` latest, newest first
        floor = window[-1].start if floor is None else max(floor, window[-1].start)
    if start is not None:
        assert floor is not None
        return _bounded(pipeline, cron.intervals(floor, horizon), floor, horizon)
    begun = [interval for interval, slot in slots.items() if isinstance(interval, Interval) and slot.scheduled]
    if not begun:
        return [latest]
    newest = max(begun, key=lambda i: i.end)
    older = sorted((i for i in begun if i.end <= newest.start), key=lambda i: i.start)  # e.g. waiting for a retry
    since = newest.end if floor is None else max(newest.end, floor)
    found = chain(older, [newest], cron.intervals(since, horizon))
    return _bounded(pipeline, (i for i in found if floor is None or i.start >= floor), since, horizon)


def _bounded(pipeline: ScheduledPipeline, intervals: Iterable[Interval], since: datetime, horizon: datetime) -> list[Interval]:
    """The candidates, at most MAX_CATCH_UP of them; more is a BadSchedule naming the fix."""
    found = list(islice(intervals, MAX_CATCH_UP + 1))
    if len(found) <= MAX_CATCH_UP:
        return found
    schedule = pipeline.schedule
    count = schedule.parsed().count(since, horizon, up_to=MAX_CATCH_UP)
    raise BadSchedule(
        pipeline,
        f"catching up '{schedule.cron}' since {since.astimezone(schedule.parsed().zone).isoformat()} would run {count} "
        f"intervals, more than the {MAX_CATCH_UP:,} a schedule may catch up",
        f"set catch_up: N under schedule: to run only the N latest (N up to {MAX_CATCH_UP:,}; older ones: tributary "
        "backfill), or catch_up: latest",
    )
