"""`schedule: {after: [upstream]}`: a pipeline's interval waits for its upstream pipelines' commits.

The rule: an interval [start, end) of the downstream pipeline is ready when, for each upstream
pipeline, the intervals that pipeline has committed cover it together: the same interval, one
longer interval holding it (an hourly pipeline after a daily one waits for its day), or shorter
ones tiling it (a daily pipeline after an hourly one waits for all of the day's hours). Schedules
of other lengths, timezones or offsets meet by the same rule: what counts is time covered, not
matching cron expressions.

Committed is what the run log says (framework.schedule.history: a run of the interval ended ok,
or a run killed after its commits left them in every table), whoever ran it: the scheduler, a
backfill or `run --interval`. Until then the downstream interval is not due: the scheduler
waits, it never fails or uses up a try for it (the upstream may be retrying), and `next` says
what waits for what. As Airflow's ExternalTaskSensor and Dagster's partition dependencies, but
read from the tables' history instead of a scheduler database.

`validate` checks the block as a whole (dependency_problems): every name is a pipeline under
pipelines/, has a batch schedule (a streaming run commits no interval), and the `after:` links
form no cycle, each problem at the line of the name that makes it.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from framework.errors import Problem
from framework.project import Project
from framework.schedule.pipelines import ScheduledPipeline, pipeline_names, scheduled_pipelines
from framework.spec.base import did_you_mean
from framework.spec.intervals import Interval

if TYPE_CHECKING:  # the run history reads Delta with Arrow: `validate` imports it only when it reads one
    from framework.schedule.history import Slot

#: how often a waiting interval looks again for an upstream commit made outside this scheduler (a
#: backfill, a run by hand); one this scheduler makes is seen at once
RECHECK = timedelta(minutes=1)


def covered(interval: Interval, done: Iterable[Interval]) -> bool:
    """Whether the `done` intervals together cover `interval` (without a gap)."""
    at = interval.start
    for piece in sorted((d for d in done if d.end > interval.start and d.start < interval.end), key=lambda d: d.start):
        if piece.start > at:
            return False
        at = max(at, piece.end)
        if at >= interval.end:
            return True
    return at >= interval.end


@dataclass(frozen=True)
class Upstream:
    """What each upstream pipeline has committed, read once per look at the schedule."""

    committed: dict[str, list[Interval]]  # upstream name -> its committed intervals

    @classmethod
    def of(cls, names: Iterable[str], slots_of: Any) -> Upstream:
        """`slots_of(name)`: the run log's slots of a pipeline (history.RunLog.slots)."""
        return cls({name: _done(slots_of(name)) for name in names})

    def waiting_for(self, pipeline: ScheduledPipeline, interval: Interval) -> list[str]:
        """The upstream pipelines that have not yet committed all of `interval`."""
        return [name for name in pipeline.schedule.after if not covered(interval, self.committed.get(name, []))]


def _done(slots: dict[Any, Slot]) -> list[Interval]:
    return [i for i, slot in slots.items() if isinstance(i, Interval) and slot.done]


def dependency_check(project: Project) -> list[Problem]:
    """Problems of the project's `after:` lists, for validate (none when no pipeline has one)."""
    found, _ = scheduled_pipelines(project)
    if not any(p.schedule.after for p in found):
        return []
    return dependency_problems(found, pipeline_names(project))


def _said_of(
    upstream: str, p: ScheduledPipeline, by_name: dict[str, ScheduledPipeline], every_name: dict[str, str]
) -> tuple[str, str] | None:
    """What is wrong with one name of `p`'s `after:` list, and the hint; None when nothing is."""
    if p.streaming:
        return "a streaming pipeline has no intervals to wait for: after: is for batch schedules", (
            "drop after:, or make the pipeline batch"
        )
    if upstream not in every_name:
        return f"after: no pipeline is named '{upstream}'", (
            did_you_mean(upstream, sorted(every_name)) or "name a pipeline under pipelines/ (its name:)"
        )
    if upstream not in by_name:
        return (
            f"after: '{upstream}' ({every_name[upstream]}) has no schedule, so it commits no intervals to wait for",
            f"add a schedule: to {every_name[upstream]}, or drop it from after:",
        )
    if by_name[upstream].streaming:
        return f"after: '{upstream}' is a streaming pipeline: its runs commit no intervals to wait for", (
            "wait only for batch pipelines"
        )
    return None


def dependency_problems(pipelines: list[ScheduledPipeline], every_name: dict[str, str]) -> list[Problem]:
    """What is wrong with the `after:` lists of `pipelines` (every scheduled pipeline of the
    project), each at the line of the name: `every_name` maps each pipeline name under pipelines/
    to its file (those without a schedule too)."""
    by_name = {p.name: p for p in pipelines}
    problems: list[Problem] = []
    for p in pipelines:
        for index, upstream in enumerate(p.schedule.after):
            line, col = p.after_at(index)
            said = _said_of(upstream, p, by_name, every_name)
            if said is not None:
                problems.append(Problem(said[0], file=p.shown, line=line, col=col, hint=said[1]))
            if p.streaming:
                break  # said once for the pipeline, not per name
    cycle = _cycle(pipelines)
    if cycle:
        first = by_name[cycle[0]]
        at = first.after_at(first.schedule.after.index(cycle[1]))
        problems.append(
            Problem(
                f"the pipelines wait for each other in a cycle: {' → '.join(cycle)} (each waits for the next)",
                file=first.shown,
                line=at[0],
                col=at[1],
                hint="no interval of theirs could ever run: drop one of these after: names",
            )
        )
    return problems


def _cycle(pipelines: list[ScheduledPipeline]) -> list[str]:
    """A cycle of `after:` links, each pipeline waiting for the next (empty: none)."""
    known = {p.name for p in pipelines}
    graph = {p.name: [u for u in p.schedule.after if u in known] for p in pipelines}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        return list(reversed(e.args[1]))  # graphlib lists each node before the one that waits for it
    return []


def waiting_note(pipeline: ScheduledPipeline, interval: Interval, upstream: list[str]) -> str:
    """How the scheduler and `next` say what an interval waits for."""
    return f"{pipeline.name} {interval.label()} waits for {', '.join(upstream)} to commit it"
