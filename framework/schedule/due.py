"""Which runs of a scheduled pipeline are due, and when the next one is.

A batch pipeline's candidates are intervals of its cron, up to its latest fire (and its `end`):
- with `catch_up: all` (the default), every interval since `start`; without `start`, every interval
  since the newest one the scheduler ran (or that a killed run left unfinished), and at the very
  first start the latest one only; older intervals are for `tributary backfill`;
- with `catch_up: N`, the same but only among the N latest intervals; `latest` (false) is N = 1.

A candidate is settled when it is done (framework.schedule.history) or when the scheduler's
attempts at it failed 1 + retries.count times. An unsettled one is due at its fire, or after a
failed attempt at the end of that attempt plus the retry wait (retries.wait). Attempts the
scheduler abandoned when it was stopped, and runs killed outright, use up no try: they are due
again at once. Oldest first; later intervals do not wait for one waiting for its retry.

The backlog (the unsettled candidates: what the scheduler still has to run) may hold at most
MAX_CATCH_UP intervals. More is a schedule the scheduler cannot serve as it stands (a minute's
cron given a `start:` months back and never run, or a scheduler stopped for months): BadSchedule
names the count and what bounds it, the scheduler and `next` leave that pipeline out and serve the
others, and `validate` refuses it (unserved()). Only the backlog counts, never the intervals done:
a schedule the scheduler keeps up with stays served however long ago its `start:` lies.

Candidates are generated as they are read (framework.spec.intervals), from the newest ones back
when only the latest N count; with `start:` and `catch_up: all`, stretches of settled intervals
are followed through the run history rather than walked through the cron (_skipping_settled).

A streaming pipeline's only candidate is its latest fire: one available-now run processes
everything that came since the last one.

A candidate of a pipeline with `after:` whose upstream pipelines have not yet committed its time
(framework.schedule.dependencies) is not due: it waits (`blocked`), uses up no try, and is looked
at again when the scheduler next looks (after each run it makes, else within a minute).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from framework.errors import Problem
from framework.schedule.dependencies import RECHECK, Upstream
from framework.schedule.pipelines import ScheduledPipeline
from framework.spec.intervals import MAX_CATCH_UP, Count, Cron, Interval

if TYPE_CHECKING:  # the run history reads Delta with Arrow: `validate` imports it only when it reads one
    from framework.schedule.history import Slot

_JUST_BEFORE = timedelta(microseconds=1)


class BadSchedule(ValueError):
    """A pipeline whose due runs cannot be worked out as its schedule stands; says what fixes it."""

    def __init__(self, pipeline: ScheduledPipeline, message: str, hint: str):
        super().__init__(f"{message}; {hint}")
        line, col = (pipeline.line, None) if pipeline.schedule.start is None else (pipeline.start_position or (None, None))
        self.problem = Problem(message, file=pipeline.shown, line=line, col=col, hint=hint)


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
    blocked: list[tuple[Due, list[str]]] = field(default_factory=list)  # due but for the upstream pipelines named
    recheck: datetime | None = None  # when to look again for the upstream commits they wait for

    @property
    def wake(self) -> datetime | None:
        """When something of the pipeline becomes due next."""
        times = [d.at for d in self.waiting] + [t for t in (self.next_fire, self.recheck) if t is not None]
        return min(times, default=None)


def outlook(pipeline: ScheduledPipeline, slots: dict[Any, Slot], now: datetime, upstream: Upstream | None = None) -> Outlook:
    """What is due at `now` and what waits (`upstream`: what the pipelines it runs after have
    committed; None: it waits for none); BadSchedule when more than MAX_CATCH_UP runs are left."""
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
    tries = schedule.retries.count + 1
    if pipeline.streaming:
        candidates: Iterable[tuple[Interval | None, datetime]] = [(None, cron.last_fire(horizon))]
    else:
        candidates = ((interval, interval.end) for interval in _intervals(pipeline, slots, horizon, tries))
    due: list[Due] = []
    waiting: list[Due] = []
    blocked: list[tuple[Due, list[str]]] = []
    walked = 0
    for interval, fire in candidates:
        walked += 1
        slot = slots.get(fire if interval is None else interval)
        if _settled(slot, tries):
            continue
        if len(due) + len(waiting) + len(blocked) == MAX_CATCH_UP and interval is not None:
            held = [*due, *waiting, *(d for d, _ in blocked)]
            raise _too_many(pipeline, min(held, key=lambda d: d.fire), interval, walked, horizon)
        failures = slot.failures(_scheduled()) if slot is not None else []
        at = fire
        if failures:
            ended = max((f.finished_at for f in failures if f.finished_at is not None), default=fire)
            at = max(fire, ended + timedelta(seconds=schedule.retries.wait(len(failures))))
        planned = Due(pipeline, interval, fire, len(failures) + 1, at)
        upstream_left = upstream.waiting_for(pipeline, interval) if upstream is not None and interval is not None else []
        if upstream_left and at <= now:
            blocked.append((planned, upstream_left))
        else:
            (due if at <= now else waiting).append(planned)
    due.sort(key=lambda d: (d.at, d.fire))
    return Outlook(due, waiting, next_fire, blocked, now + RECHECK if blocked else None)


def unserved(pipeline: ScheduledPipeline, history: Callable[[], dict[Any, Slot]], now: datetime) -> Problem | None:
    """Why the scheduler would leave the pipeline out at `now` (None: it serves it), for
    `tributary validate`: outlook() as the scheduler runs it. `history()` (the pipeline's slots from
    the run log) is read only where it can change the answer: with a `start:` or a `catch_up: N`
    the run history only takes candidates away, so a backlog within the bound without it is within
    the bound; a batch schedule with neither resumes from the history, so it is always read."""
    schedule = pipeline.schedule
    if pipeline.streaming or schedule.start is not None or schedule.catch_up_limit() is not None:
        try:
            outlook(pipeline, {}, now)
            return None
        except BadSchedule:
            pass
    try:
        outlook(pipeline, history(), now)
    except BadSchedule as e:
        return e.problem
    return None


def _settled(slot: Slot | None, tries: int) -> bool:
    return slot is not None and (slot.done or len(slot.failures(_scheduled())) >= tries)


def _scheduled() -> str:
    """The run log's word for a scheduler's run (imported once a slot exists, so history is loaded)."""
    from framework.schedule.history import SCHEDULE

    return SCHEDULE


def _intervals(pipeline: ScheduledPipeline, slots: dict[Any, Slot], horizon: datetime, tries: int) -> Iterator[Interval]:
    """A batch pipeline's candidates (see the module's docstring), generated as they are read."""
    schedule = pipeline.schedule
    cron, start, limit = schedule.parsed(), schedule.start_at(), schedule.catch_up_limit()
    latest = cron.latest_complete(horizon)
    floor = start  # no candidate starts before it
    if limit is not None:
        window = list(islice(cron.intervals_back(latest.end), limit))  # the `limit` latest, newest first
        floor = window[-1].start if floor is None else max(floor, window[-1].start)
    if start is not None:
        assert floor is not None
        return _skipping_settled(cron, floor, horizon, slots, tries) if limit is None else cron.intervals(floor, horizon)
    begun = [interval for interval, slot in slots.items() if isinstance(interval, Interval) and slot.scheduled]
    if not begun:
        return iter([latest])
    newest = max(begun, key=lambda i: i.end)
    older = sorted(  # begun before the newest and not settled, e.g. waiting for a retry
        (i for i in begun if i.end <= newest.start and (floor is None or i.start >= floor) and not _settled(slots[i], tries)),
        key=lambda i: i.start,
    )
    since = newest.end if floor is None else max(newest.end, floor)
    head = [*older, newest] if floor is None or newest.start >= floor else older
    return chain(head, cron.intervals(since, horizon))


def _skipping_settled(cron: Cron, begin: datetime, horizon: datetime, slots: dict[Any, Slot], tries: int) -> Iterator[Interval]:
    """The cron's intervals from `begin` to `horizon`, less the stretches of settled ones, which are
    followed through the history instead: a schedule kept up with has one stretch from its start to
    its latest fire, and following it costs a lookup per interval where walking the cron costs cron
    arithmetic (a minute's cron with a year done: well under a second instead of ~11 s, at every
    wake). Every interval not in a stretch is walked, so gaps in the history still run.

    The history's intervals are checked to be the cron's own where their length changes and at the
    ends of each part of one length (a history another cron wrote differs there); a part that fails
    the check is walked through as if it were not there."""
    settled = {i.start: i for i, slot in slots.items() if isinstance(i, Interval) and _settled(slot, tries)}
    at = cron.next_fire(begin - _JUST_BEFORE)
    while True:
        at, walk_to = _past_settled(cron, at, settled)
        for interval in cron.intervals(at, horizon):
            if interval.start > at and interval.start >= walk_to and settled.get(interval.start) == interval:
                at = interval.start  # a stretch of settled ones begins: follow it
                break
            yield interval
        else:
            return


def _past_settled(cron: Cron, at: datetime, settled: dict[datetime, Interval]) -> tuple[datetime, datetime]:
    """Where the stretch of settled intervals following one another from `at` ends (`at` when
    none starts there), and up to where the cron must be walked from there on without following
    the history (the end of a part that failed the check, see _skipping_settled)."""
    part, previous = at, None  # part: where the current part of one length began
    while (interval := settled.get(at)) is not None:
        if previous is None or interval.end - interval.start != previous.end - previous.start:
            if previous is not None and previous.start != part and not _is_cron_interval(cron, previous):
                return part, previous.end
            if not _is_cron_interval(cron, interval):
                return interval.start, interval.end
            part = interval.start
        previous, at = interval, interval.end
    if previous is not None and previous.start != part and not _is_cron_interval(cron, previous):
        return part, previous.end
    return at, at


def _is_cron_interval(cron: Cron, interval: Interval) -> bool:
    return cron.next_fire(interval.start - _JUST_BEFORE) == interval.start and cron.next_fire(interval.start) == interval.end


def _too_many(pipeline: ScheduledPipeline, oldest: Due, reached: Interval, walked: int, horizon: datetime) -> BadSchedule:
    """BadSchedule naming how many runs are left and what bounds them. The walk met MAX_CATCH_UP
    + 1 unsettled candidates among the `walked` it looked at, up to `reached`; the rest is estimated
    at that rate (exact when the rest is short and every candidate looked at was unsettled):
    counting them all could take as long as the range is wide."""
    schedule = pipeline.schedule
    cron, found = schedule.parsed(), MAX_CATCH_UP + 1
    rest = cron.count(reached.end, horizon, up_to=MAX_CATCH_UP)
    left = Count(found + round(rest.n * found / walked), rest.approximate or (walked > found and rest.n > 0))
    since = oldest.interval.start if oldest.interval is not None else oldest.fire
    message = (
        f"catching up '{schedule.cron}' since {since.astimezone(cron.zone).isoformat()} would run {left} intervals "
        f"not yet run, more than the {MAX_CATCH_UP:,} a schedule may catch up"
    )
    fixes = f"set catch_up: N under schedule: to run only the N latest missed intervals (N up to {MAX_CATCH_UP:,}) or catch_up: latest"
    fixes += ", or write a later start:" if schedule.start is not None else ""
    fixes += "; run the older ones with tributary backfill"
    return BadSchedule(pipeline, message, fixes)
