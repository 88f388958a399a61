"""`tributary freshness [PIPELINE]`: each declared source's age against its `freshness:`, no Spark.

dbt's `source freshness` exits non-zero when a source is past its error_after; so does this (exit
1), so a CI job or a crontab line can stop on stale input. A warning alone exits 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from framework.errors import BadInput
from framework.project_context import ProjectContext
from framework.quality.freshness import SourceAge, pipeline_ages


@dataclass
class PipelineFreshness:
    pipeline: str
    shown: str
    ages: list[SourceAge]


def freshness(context: ProjectContext, paths: list[Path], now: datetime | None = None) -> list[PipelineFreshness]:
    """The pipelines' declared sources' freshness (pipelines declaring none are left out)."""
    now = now or datetime.now(UTC)
    context = context.across(paths)
    found, compiled_all = [], []
    for path in paths:
        compiled = context.for_pipeline(path).compiled
        compiled_all.append(compiled)
        ages = pipeline_ages(context.project, context.warehouse(), compiled.spec, now, context.profile.storage_options or None)
        if ages:
            found.append(PipelineFreshness(compiled.name, context.project.relative(path), ages))
    typo = context.vars_none_has(compiled_all)
    if typo:
        raise BadInput(*typo)
    return found
