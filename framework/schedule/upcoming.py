"""`tributary next`: when each schedule fires next, what it runs then, and what is due now.

Read from the pipelines' YAML and the run log alone (no Spark), so it answers at once; a pipeline
whose schedule cannot be served (framework.schedule.due.BadSchedule) is named with the problem
while the others are listed. Intervals that wait for their upstream pipelines (`after:`) are
listed with what they wait for.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from framework.errors import Problem
from framework.io.delta import local_store
from framework.project_context import ProjectContext
from framework.schedule.clock import SystemClock
from framework.schedule.dependencies import Upstream
from framework.schedule.due import BadSchedule, outlook
from framework.schedule.history import RunLog
from framework.schedule.pipelines import scheduled_pipelines


@dataclass
class Upcoming:
    now: datetime
    rows: list[dict[str, Any]]  # one per pipeline served
    problems: list[Problem]  # pipelines that cannot be scheduled
    scheduled: int  # pipelines with a schedule found (0: none has one)


def upcoming(context: ProjectContext, names: list[str] | None) -> Upcoming:
    found, problems = scheduled_pipelines(context.project, names)
    now = SystemClock().now()
    if not found:
        return Upcoming(now, [], problems, 0)
    log = RunLog(local_store(context.profile.storage_options), context.events_table())
    rows = []
    for p in found:
        try:
            upstream = Upstream.of(p.schedule.after, log.slots) if p.schedule.after and not p.streaming else None
            seen = outlook(p, log.slots(p.name, p.streaming), now, upstream)
        except BadSchedule as e:  # named below; the others are listed
            problems.append(e.problem)
            continue
        cron = p.schedule.parsed()
        fire = seen.next_fire
        runs_then = "available now" if p.streaming else (cron.interval_ending(fire).label() if fire else "–")
        rows.append(
            {
                "pipeline": p.name,
                "schedule": f"{p.schedule.cron} ({p.schedule.timezone})",
                "next fire": fire.astimezone(cron.zone).isoformat() if fire else "– (past its end)",
                "runs then": runs_then,
                "due now": (f"{len(seen.due)}: from {seen.due[0].label()}" if seen.due else "–"),
                "retries waiting": ", ".join(
                    f"{d.label()} (attempt {d.attempt}) at {d.at.astimezone(cron.zone).isoformat()}" for d in seen.waiting
                )
                or "–",
                **(
                    {"after": ", ".join(p.schedule.after), "waiting for upstream": _waiting(seen.blocked)}
                    if p.schedule.after
                    else {}
                ),
            }
        )
    if any("after" in row for row in rows):  # the columns only when some pipeline waits for another
        rows = [
            {**row, "after": row.get("after", "–"), "waiting for upstream": row.get("waiting for upstream", "–")} for row in rows
        ]
    return Upcoming(now, rows, problems, len(found))


def _waiting(blocked: list[tuple[Any, list[str]]]) -> str:
    """`3: from 2026-11-02 00:00 → 01:00+00:00 (for up)`: the intervals due but for their upstream."""
    if not blocked:
        return "–"
    first, upstream = blocked[0]
    return f"{len(blocked)}: from {first.label()} (for {', '.join(upstream)})"
