"""Which pipelines have a schedule, read from their YAML alone.

The scheduler reads `name`, `mode` and `schedule:` without validating the rest of the file: a
pipeline whose steps or templates break between two fires still fires, and its run fails with
exit 2 in the run log at its interval, instead of silently dropping out of the schedule. Only a
file that is no YAML mapping, or a `schedule:` block that is itself wrong, cannot be scheduled;
the scheduler says so and keeps serving the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from framework.errors import BadInput, Problem
from framework.project import Project
from framework.spec.loader import validation_problems
from framework.spec.schedule import Schedule
from framework.spec.yaml_source import load_yaml_file

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _ScheduleOnly(BaseModel):
    model_config = ConfigDict(extra="ignore")
    schedule: Schedule | None = None


@dataclass(frozen=True)
class ScheduledPipeline:
    path: Path
    shown: str  # the file as shown to the user
    name: str  # as the run log knows it
    mode: str  # batch | streaming
    schedule: Schedule
    line: int | None = None  # of its `schedule:`, for what is said about it
    start_position: tuple[int, int] | None = None  # line, column of its `start:` (a catch-up too long is said there)
    after_positions: tuple[tuple[int, int] | None, ...] = ()  # line, column of each name under `after:`

    @property
    def streaming(self) -> bool:
        return self.mode == "streaming"

    def after_at(self, index: int) -> tuple[int | None, int | None]:
        """Line and column of the index-th name under `after:` (else of `schedule:`)."""
        at = self.after_positions[index] if index < len(self.after_positions) else None
        return at if at is not None else (self.line, None)


def read_schedule(project: Project, path: Path) -> ScheduledPipeline | None:
    """The pipeline's schedule (None: it has none); BadInput when the file or the block is wrong."""
    shown = project.relative(path)
    doc = load_yaml_file(path, shown)
    if not isinstance(doc.data, dict):
        raise BadInput(Problem("a pipeline file must be a mapping (name:, steps:, outputs: ...)", file=shown, line=1))
    if doc.data.get("schedule") is None:
        return None
    try:
        schedule = _ScheduleOnly.model_validate(doc.data).schedule
    except ValidationError as e:
        raise BadInput(*validation_problems(e, doc)) from None
    assert schedule is not None
    name = doc.data.get("name")
    mode = doc.data.get("mode")
    return ScheduledPipeline(
        path,
        shown,
        name if isinstance(name, str) and _NAME.match(name) else path.stem,
        mode if mode in ("batch", "streaming") else "batch",
        schedule,
        located[0] if (located := doc.locate(("schedule",))) else None,
        doc.locate(("schedule", "start")),
        tuple(doc.locate(("schedule", "after", i)) for i in range(len(schedule.after))),
    )


def scheduled_pipelines(project: Project, names: list[str] | None = None) -> tuple[list[ScheduledPipeline], list[Problem]]:
    """The pipelines with a schedule (those named, else all under pipelines/), and the problems of
    those that cannot be scheduled. A named pipeline without a schedule is a problem too."""
    found: list[ScheduledPipeline] = []
    problems: list[Problem] = []
    paths = []
    for name in names or []:
        try:
            paths.append(project.pipeline_path(name))
        except BadInput as e:  # e.g. deleted while the scheduler serves it
            problems += e.problems
    for path in paths if names else project.all_pipelines():
        try:
            scheduled = read_schedule(project, path)
        except BadInput as e:
            problems += e.problems
            continue
        if scheduled is not None:
            found.append(scheduled)
        elif names:
            problems.append(
                Problem("the pipeline has no schedule", file=project.relative(path), hint="add schedule: {cron: '0 * * * *'}")
            )
    seen: dict[str, ScheduledPipeline] = {}
    for p in found:
        if p.name in seen:
            problems.append(Problem(f"pipeline name '{p.name}' is also used by {seen[p.name].shown}", file=p.shown, line=1))
        seen.setdefault(p.name, p)
    return list(seen.values()), problems


def pipeline_names(project: Project) -> dict[str, str]:
    """Every pipeline under pipelines/ by the name the run log knows it by (its `name:`, else its
    file's stem), to the file as shown; files that are not YAML mappings are left out."""
    names: dict[str, str] = {}
    for path in project.all_pipelines():
        try:
            doc = load_yaml_file(path, project.relative(path))
        except BadInput:
            continue
        name = doc.data.get("name") if isinstance(doc.data, dict) else None
        names.setdefault(name if isinstance(name, str) and _NAME.match(name) else path.stem, project.relative(path))
    return names
