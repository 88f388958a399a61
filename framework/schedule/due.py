"""Which runs of a scheduled pipeline are due, and when the next one is.

A batch pipeline's candidates are intervals of its cron, up to its latest fire (and its `end`):
- with `catch_up` (the default), every interval since `start`; without `start`, every interval
  since the newest one the scheduler ran (or that a killed run left unfinished), and at the very
  first start the latest one only; older intervals are for `tributary backfill`;
- without `catch_up`, the latest interval only.

A candidate is settled when it is done (framework.schedule.history) or when the scheduler's
attempts at it failed 1 + retries.count times. An unsettled one is due at its fire, or after a
failed attempt at the end of that attempt plus the retry wait (retries.wait). Attempts the
scheduler abandoned when it was stopped, and runs killed outright, use up no try: they are due
again at once. Oldest first; later intervals do not wait for one waiting for its retry.

A streaming pipeline's only candidate is its latest fire: one available-now run processes
everything that came since the last one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from framework.schedule.history import SCHEDULE, Slot
from framework.schedule.pipelines import ScheduledPipeline
from framework.spec.intervals import Interval


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
    cron, start = schedule.parsed(), schedule.start_at()
    latest = cron.latest_complete(horizon)
    if not schedule.catch_up:
        return [latest] if start is None or latest.start >= start else []
    if start is not None:
        return cron.intervals(start, horizon)
    begun = [interval for interval, slot in slots.items() if isinstance(interval, Interval) and slot.scheduled]
    if not begun:
        return [latest]
    newest = max(begun, key=lambda i: i.end)
    older = sorted((i for i in begun if i.end <= newest.start), key=lambda i: i.start)  # e.g. waiting for a retry
    return [*older, newest, *cron.intervals(newest.end, horizon)]
