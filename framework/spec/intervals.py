"""Time intervals of scheduled runs, and the cron arithmetic that cuts time into them.

A scheduled batch run covers one interval: from the schedule's previous fire to the fire that
started it ([start, end), as Airflow's data intervals and dbt's microbatches). Templates see it as
`{{ interval_start }}` / `{{ interval_end }}`, typed timestamp literals in the schedule's timezone.

Cron times come from cronsim (pure Python, no dependencies), which follows Debian cron's rules
for clock changes: a job set in the hour a spring-forward skips runs once when the clock jumps
(02:30 on the night to summer time runs at 03:00), and a job set at a fixed time in the hour a
fall-back repeats runs once (wildcard jobs, e.g. hourly ones, run in both repeated hours).
croniter, the better-known library, fires a daily 02:30 job twice on the night to winter time
(two "daily" intervals an hour apart), which a data interval should not do.

Intervals are generated as they are read (`Cron.intervals` and `intervals_back` are iterators):
a schedule over decades of minutes costs what its reader takes from it, and a range only becomes a
list where a command needs all of it (a backfill, up to MAX_INTERVALS). Instants lie between
EARLIEST and LATEST: cron arithmetic looks years either side of an instant (a 29 February cron fires
every 4 to 8 years) and Python's datetimes end at years 1 and 9999, so a date outside is refused as
bad input where it is written, never met as an OverflowError in the middle of a command.

Every comparison is made in UTC: Python compares two datetimes of one tzinfo by their wall clock
and ignores `fold`, so the two 02:00 of a fall-back night would compare equal. An interval keeps
its instants in UTC and the timezone it is shown and rendered in; intervals from one cron tile
time: each starts where the one before it ended, whatever the clocks did.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import partial
from itertools import pairwise, takewhile
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from framework.errors import BadInput, Problem

#: The longest cron expression read: every minute, hour, day, month and weekday listed one by one
#: with commas is under 400 characters; a longer one is a mistake, and cronsim's and any check's
#: time grows with it (a 100 KB one took 51 s to validate).
MAX_CRON_CHARS = 1_000

#: cron's nicknames (cronsim reads five fields only)
NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
#: intervals one backfill range may hold: more is surely a mistake in the range
MAX_INTERVALS = 100_000
#: intervals the scheduler may catch up at once: it runs one run at a time, oldest first, so a
#: longer catch-up of one pipeline (hours to days of runs) would hold back every other pipeline
MAX_CATCH_UP = 10_000
#: the instants a schedule, an interval or a backfill range may name (see the module's docstring)
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
#: longer than any hour the clocks repeat when they go back (one hour; Lord Howe's is half an hour)
_FOLD = timedelta(hours=3)


def zone(name: str) -> ZoneInfo:
    """A timezone by its IANA name (Europe/Berlin, UTC); ValueError says what is wrong."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone '{name}': use an IANA name such as UTC, Europe/Berlin, America/New_York") from None


class IntervalBound(datetime):
    """`interval_start` / `interval_end` in a template: a datetime the renderer notices being used
    (framework.templating), so a run knows whether its SQL depends on its interval."""


@dataclass(frozen=True)
class Interval:
    """[start, end) of one run, as UTC instants, shown in `timezone`."""

    start: datetime = field(compare=True)
    end: datetime = field(compare=True)
    timezone: str = field(default="UTC", compare=False)

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("an interval's bounds need a timezone")
        object.__setattr__(self, "start", self.start.astimezone(UTC))
        object.__setattr__(self, "end", self.end.astimezone(UTC))
        if not self.start < self.end:
            raise ValueError(f"an interval must end after it starts ({_iso(self.start)} / {_iso(self.end)})")

    def local(self) -> tuple[datetime, datetime]:
        tz = ZoneInfo(self.timezone)
        return self.start.astimezone(tz), self.end.astimezone(tz)

    def bounds(self) -> tuple[IntervalBound, IntervalBound]:
        """The two bounds as templates see them: aware, in the schedule's timezone."""
        return tuple(IntervalBound.fromisoformat(t.isoformat()) for t in self.local())  # type: ignore[return-value]

    @property
    def tag(self) -> str:
        """Compact and sortable, for application transaction ids: 20261024T2200Z-20261024T2300Z."""
        return f"{_compact(self.start)}-{_compact(self.end)}"

    def as_dict(self) -> dict[str, str]:
        start, end = self.local()
        return {"start": start.isoformat(), "end": end.isoformat(), "timezone": self.timezone}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> Interval:
        return cls(datetime.fromisoformat(data["start"]), datetime.fromisoformat(data["end"]), data.get("timezone") or "UTC")

    def __str__(self) -> str:
        start, end = self.local()
        return f"{start.isoformat()}/{end.isoformat()}"

    def label(self) -> str:
        """Short, for tables: 2026-10-25 02:00+02:00 → 03:00+01:00 (the date once when it does not change)."""
        start, end = self.local()
        right = end.strftime("%H:%M") if end.date() == start.date() else end.strftime("%Y-%m-%d %H:%M")
        return f"{start.strftime('%Y-%m-%d %H:%M')}{_offset(start)} → {right}{_offset(end)}"


def _compact(t: datetime) -> str:
    return t.strftime("%Y%m%dT%H%M%SZ" if t.second or t.microsecond else "%Y%m%dT%H%MZ")


def _iso(t: datetime) -> str:
    return t.isoformat()


def _offset(t: datetime) -> str:
    text = t.strftime("%z")
    return f"{text[:3]}:{text[3:]}" if text else ""


def instant(value: datetime | date | str, timezone: str) -> datetime:
    """A point in time: aware as given, naive (or a date, at midnight) in `timezone`. ValueError
    says what is wrong with text."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = (
                datetime.fromisoformat(text.replace("Z", "+00:00")) if "T" in text or " " in text else date.fromisoformat(text)
            )
        except ValueError:
            raise ValueError(
                f"'{value}' is not a date or time; write e.g. 2026-11-01 or 2026-11-01T08:00 (+01:00 or Z optional)"
            ) from None
    shown = value.isoformat() if isinstance(value, date) else str(value)
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if value.tzinfo is None:
        value = value.replace(tzinfo=ZoneInfo(timezone))
    try:
        at = value.astimezone(UTC)
    except OverflowError:  # a zone's offset takes it past year 1 or 9999
        at = None
    if at is None or not EARLIEST <= at <= LATEST:
        raise ValueError(f"{shown} is out of range: dates lie between {EARLIEST.date()} and {LATEST.date()}")
    return at


def parse_interval(text: str, timezone: str, option: str = "--interval") -> Interval:
    """`START/END` (ISO 8601 dates or times; naive ones in `timezone`) as an interval, else bad input."""
    start, sep, end = text.partition("/")
    hint = f"write {option} START/END, e.g. {option} 2026-11-01T00:00/2026-11-02T00:00 (naive times are in {timezone})"
    if not sep or not start.strip() or not end.strip():
        raise BadInput(Problem(f"{option} '{text}': expected START/END", hint=hint))
    try:
        return Interval(instant(start, timezone), instant(end, timezone), timezone)
    except ValueError as e:
        raise BadInput(Problem(f"{option} '{text}': {e}", hint=hint)) from None


class Cron:
    """A cron expression read in a timezone: its fires, and the intervals between them."""

    def __init__(self, expression: str, timezone: str = "UTC"):
        from cronsim import CronSim, CronSimError

        self.expression = expression.strip()
        self.timezone = timezone
        self.zone = zone(timezone)
        if len(self.expression) > MAX_CRON_CHARS:
            raise ValueError(
                f"cron expression of {len(self.expression):,} characters: more than {MAX_CRON_CHARS:,}; "
                "write five fields, e.g. '*/5 * * * *' rather than a list of every minute"
            )
        self._fields = NICKNAMES.get(self.expression.lower(), self.expression)
        if len(self._fields.split()) > 5:
            raise ValueError(f"cron '{expression}': five fields (minute hour day month weekday), not six")
        try:
            CronSim(self._fields, datetime(2026, 1, 1, tzinfo=self.zone))
        except CronSimError as e:
            raise ValueError(f"cron '{expression}': {e}; write five fields, e.g. '0 * * * *' (hourly) or '30 2 * * *'") from None

    def _fires(self, after: datetime, reverse: bool = False) -> Iterator[datetime]:
        from cronsim import CronSim

        for fire in CronSim(self._fields, after.astimezone(self.zone), reverse=reverse):
            yield fire.astimezone(UTC)

    def next_fire(self, after: datetime) -> datetime:
        """The first fire strictly after `after` (UTC)."""
        return next(self._fires(after))

    def last_fire(self, at: datetime) -> datetime:
        """The latest fire at or before `at` (UTC)."""
        return next(self._fires_back(at))

    def interval_ending(self, fire: datetime) -> Interval:
        """The interval a fire closes: from the fire before it to it."""
        return Interval(self.last_fire(fire - timedelta(microseconds=1)), fire, self.timezone)

    def latest_complete(self, now: datetime) -> Interval:
        """The newest interval that has ended by `now`: the one the schedule ran (or runs) last."""
        return self.interval_ending(self.last_fire(now))

    def intervals(self, begin: datetime, end: datetime) -> Iterator[Interval]:
        """Every interval lying within [begin, end], oldest first, made as they are read: each
        starts at a fire at or after `begin` and ends at the next fire, at or before `end`."""
        start = self.next_fire(begin - timedelta(microseconds=1))
        for fire in self._fires(start):
            if fire > end:
                return
            yield Interval(start, fire, self.timezone)
            start = fire

    def intervals_back(self, end: datetime) -> Iterator[Interval]:
        """The intervals ending at or before `end`, newest first, made as they are read; the last
        is the one reaching back over EARLIEST."""
        for later, earlier in pairwise(self._fires_back(end)):
            yield Interval(earlier, later, self.timezone)

    def _fires_back(self, at: datetime) -> Iterator[datetime]:
        """The fires at or before `at`, newest first: the fires forward iteration makes, read back
        a few hours at a time. CronSim's reverse iteration misses or moves a fire in an hour the
        clocks repeat (on 1 November 2026 in New York, '15 1 * * *' at 01:15 EDT, the fire forward
        iteration makes), so it only says where each stretch starts: a fire at least `_FOLD`
        earlier, from which forward iteration makes the stretch's fires."""
        upper = at
        while True:
            start = self._reverse_fire(upper - _FOLD)
            stretch = list(takewhile(partial(operator.ge, upper), self._fires(start - timedelta(microseconds=1))))
            for fire in reversed(stretch):
                yield fire
                if fire < EARLIEST:
                    return
            upper = start - timedelta(microseconds=1)

    def _reverse_fire(self, at: datetime) -> datetime:
        """A fire at or before `at` by CronSim's reverse iteration (see `_fires_back`)."""
        for fire in self._fires(at + timedelta(minutes=1), reverse=True):
            if fire <= at:
                return fire
        raise AssertionError("a cron fires in the past")  # pragma: no cover - CronSim iterates forever

    def count(self, begin: datetime, end: datetime, up_to: int) -> Count:
        """How many intervals lie within [begin, end]: exact up to `up_to`, past it an estimate
        from the first up_to + 1 (counting them all could take as long as the range is wide)."""
        counted = 0
        for fire in self._fires(self.next_fire(begin - timedelta(microseconds=1))):
            if fire > end:
                break
            counted += 1
            if counted > up_to:
                span, covered = (end - begin).total_seconds(), (fire - begin).total_seconds()
                return Count(max(counted, round(counted * span / covered)), approximate=True)
        return Count(counted, approximate=False)


@dataclass(frozen=True)
class Count:
    """A number of intervals, exact or estimated."""

    n: int
    approximate: bool

    def __str__(self) -> str:
        return f"about {self.n:,}" if self.approximate else f"{self.n:,}"


def take(intervals: Iterator[Interval], limit: int, what: str) -> list[Interval]:
    """The intervals as a list, when a command needs them all; ValueError past `limit`."""
    found: list[Interval] = []
    for interval in intervals:
        if len(found) == limit:
            raise ValueError(f"{what} holds more than {limit:,} intervals")
        found.append(interval)
    return found
