"""`tributary scheduler`: run due pipelines, in the foreground, until stopped.

A loop: read which pipelines have a schedule (their YAML, every time: a new or changed file is
seen at the next wake), read what the run log says is done, run the oldest due run, and when
nothing is due sleep until the next fire or retry. One run at a time, on one SparkSession
(framework.schedule.attempt), and never two runs of a pipeline at once: each attempt holds the
pipeline's run lock, so a manual `tributary run` or a second scheduler is waited for, not
overlapped.

SIGTERM or Ctrl-C abandons the run under way (its Spark jobs are cancelled; nothing it staged is
committed) and stops; the next start runs that interval again. SIGKILL at any moment is fine as
well: the interval a killed run left is found unfinished in the run log and the Delta commits.
`--once` runs what is due now and exits, for a crontab line (overlapping crontab starts meet at
the run lock).

A pipeline with `schedule: {after: [...]}` runs an interval only once the pipelines it names have
committed its time (framework.schedule.dependencies); until then the interval waits, said once,
and is looked at again after each run (an upstream run of this scheduler frees it at once) or
within a minute (an upstream committed by a backfill or a run by hand).
"""

from __future__ import annotations

import re
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from framework.errors import BadInput, Problem
from framework.project_context import ProjectContext
from framework.schedule.attempt import (
    ALREADY_DONE,
    BUSY,
    Attempted,
    Attempts,
    Say,
    Sessions,
    describe,
    restore_signals,
    stop_on_signals,
)
from framework.schedule.clock import Clock, SystemClock
from framework.schedule.dependencies import Upstream, waiting_note
from framework.schedule.due import BadSchedule, Due, Outlook, outlook
from framework.schedule.history import OK, RunLog
from framework.schedule.pipelines import ScheduledPipeline, scheduled_pipelines

#: how long a pipeline whose lock another run holds is left alone
BUSY_WAIT = timedelta(seconds=15)


@dataclass
class Scheduler:
    context: ProjectContext  # the project, profile and vars (--var) every run compiles with
    say: Say
    pipelines: list[str] | None = None  # names given on the command line (default: every scheduled pipeline)
    clock: Clock = field(default_factory=SystemClock)
    spark: Any = None  # a SparkSession to run on (tests); default: one started at the first run
    stopping: threading.Event = field(default_factory=threading.Event)
    attempted: deque[Attempted] = field(default_factory=lambda: deque(maxlen=100))  # its latest attempts
    _busy: dict[str, datetime] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)
    _announced: set[str] = field(default_factory=set)
    _waits: set[str] = field(default_factory=set)
    _next: str = ""

    def __post_init__(self) -> None:
        self.context = self.context.across(self.pipelines)

    def serve(self, once: bool = False, until: datetime | None = None) -> bool:
        """Run due pipelines until stopped (`once`: until nothing is due now; `until`: until the
        clock passes it, for tests). Whether every run it made ended ok."""
        previous = stop_on_signals(self.stopping)
        sessions = Sessions(self.context.profile, self.spark, started=lambda: stop_on_signals(self.stopping))
        attempts = Attempts(self.context, self.clock, sessions, self.stopping, self.say)
        all_ok = True
        try:
            first = True
            while not self.stopping.is_set():
                now = self.clock.now()
                try:
                    outlooks = self._outlooks(attempts.runlog, now, first)
                except BadInput:
                    if first:
                        raise
                    outlooks = {}
                except Exception as e:  # e.g. the run log unreadable for a moment: a long-running process waits
                    if first:
                        raise
                    self.say(f"error reading the schedules or the run log, trying again in a minute: {type(e).__name__}: {e}")
                    self.clock.sleep_until(now + timedelta(minutes=1), self.stopping)
                    continue
                first = False
                self._busy = {name: t for name, t in self._busy.items() if t > now}
                due = self._next_due(outlooks, now)
                if due is not None:
                    done = attempts.attempt(due)
                    self.attempted.append(done)
                    self.say(describe(done))
                    all_ok = all_ok and done.outcome in (OK, ALREADY_DONE, BUSY)
                    if done.outcome == BUSY:
                        self._busy[due.pipeline.name] = now + BUSY_WAIT
                    continue
                if once:
                    return all_ok
                wake = min(
                    (w for w in [*(o.wake for o in outlooks.values()), *self._busy.values()] if w is not None), default=None
                )
                if until is not None and (wake is None or wake > until):
                    return all_ok
                line = f"next: {self._next_line(outlooks, wake)}" if wake is not None else "nothing more to run"
                if line != self._next:  # said once, not at every wake
                    self._next = line
                    self.say(line)
                self.clock.sleep_until(wake, self.stopping)
        finally:
            restore_signals(previous)
            attempts.sessions.close()
            if self.stopping.is_set():
                self.say("stopped")
        return all_ok

    def _outlooks(self, runlog: RunLog, now: datetime, first: bool) -> dict[str, Outlook]:
        found, problems = scheduled_pipelines(self.context.project, self.pipelines)
        if first:
            self._check_vars(found)
        self._announce(found, first and not problems)
        outlooks: dict[str, Outlook] = {}
        slots: dict[str, Any] = {}

        def slots_of(name: str, streaming: bool = False) -> Any:
            if name not in slots:
                slots[name] = runlog.slots(name, streaming)
            return slots[name]

        for p in found:
            try:
                upstream = Upstream.of(p.schedule.after, slots_of) if p.schedule.after and not p.streaming else None
                outlooks[p.name] = outlook(p, slots_of(p.name, p.streaming), now, upstream)
            except BadSchedule as e:  # left out; the others are served
                problems.append(e.problem)
        for o in outlooks.values():
            for waits, upstream_left in o.blocked:  # each once, while it waits
                assert waits.interval is not None
                note = waiting_note(waits.pipeline, waits.interval, upstream_left)
                if note not in self._waits:
                    self._waits.add(note)
                    self.say(note)
        for problem in problems:  # each once: the file is read again at every wake
            if _said_as(problem) not in self._reported:
                self._reported.add(_said_as(problem))
                self.say(f"not scheduled: {problem}")
        if first and self.pipelines and not found:  # later, a broken file is waited for
            raise BadInput(*problems) if problems else BadInput(Problem("no pipeline to schedule"))
        return outlooks

    def _check_vars(self, found: list[ScheduledPipeline]) -> None:
        """A --var no pipeline served has is a mistake, said before anything runs (exit 2), not at
        every fire of every pipeline; a pipeline that does not compile now is left to its runs."""
        if not self.context.variables:
            return
        compiled, typos = [], []
        for p in found:
            try:
                compiled.append(self.context.for_pipeline(p.path).compiled)
            except BadInput as e:
                typos += [problem for problem in e.problems if problem.message.startswith("--var ")]
        typos += self.context.vars_none_has(compiled, "of the pipelines scheduled") if self.context.shared_vars else []
        if typos:
            raise BadInput(*typos)

    def _next_due(self, outlooks: dict[str, Outlook], now: datetime) -> Due | None:
        ready = [d for o in outlooks.values() for d in o.due if self._busy.get(d.pipeline.name, now) <= now]
        return min(ready, key=lambda d: (d.at, d.fire), default=None)

    @property
    def left_out(self) -> bool:
        """Whether a pipeline was not scheduled (its schedule or spec is wrong): `--once` says so
        with exit 2, for the crontab line's owner to see."""
        return bool(self._reported)

    def _announce(self, found: list[ScheduledPipeline], first: bool) -> None:
        if first and not found:
            self.say("no pipeline has a schedule: add schedule: {cron: '0 * * * *'} to one under pipelines/")
        for p in found:
            said = f"{p.name} {p.schedule.cron} {p.schedule.timezone}"
            if said not in self._announced:
                self._announced.add(said)
                kind = "available-now runs" if p.streaming else "an interval per run"
                self.say(f"scheduling {p.name} ({p.shown}): '{p.schedule.cron}' in {p.schedule.timezone}, {kind}")

    @staticmethod
    def _next_line(outlooks: dict[str, Outlook], wake: datetime) -> str:
        names = [name for name, o in outlooks.items() if o.wake == wake]
        return f"{', '.join(names) or 'a pipeline another run held'} at {wake.isoformat()}"


def _said_as(problem: Problem) -> str:
    """A problem as the scheduler remembers having said it: without its numbers, which may move
    from one wake to the next (how many intervals a catch-up would run) while the problem stays."""
    return re.sub(r"\d[\d,.]*", "#", str(problem))
