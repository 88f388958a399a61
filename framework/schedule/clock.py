"""The scheduler's clock: what time it is and how to wait. Injected, so tests drive many fires
in seconds (a clock whose waits move its time instead of sleeping).

The system clock waits in slices of at most a minute, so a clock set forward (NTP, a suspended
machine waking) is noticed within a minute: due intervals are computed from the cron and the run
log, never from a timer, and a clock set back runs nothing twice (intervals are identified by
their instants, done ones stay done).
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Protocol

MAX_SLICE_S = 60.0


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, aware (UTC)."""

    def sleep_until(self, when: datetime | None, wake: threading.Event) -> None:
        """Wait until `when` (None: until woken), or less; return at once when `wake` is set."""


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def sleep_until(self, when: datetime | None, wake: threading.Event) -> None:
        seconds = MAX_SLICE_S if when is None else (when - self.now()).total_seconds()
        wake.wait(min(max(seconds, 0.0), MAX_SLICE_S))
