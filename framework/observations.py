"""Reading Spark Observations (metrics counted as a side effect of a job) without blocking."""

from __future__ import annotations

from typing import Any


def has_run(observation: Any) -> bool:
    """Whether a job has run the observed plan (before that, asking for its metrics blocks)."""
    java = getattr(observation, "_jo", None)
    return java is None or bool(java.future().isCompleted())


def observed_count(observation: Any, metric: str) -> int | None:
    """The metric once a job has run the observed plan; None if none has (asking would block)."""
    if observation is None or not has_run(observation):
        return None
    return int(observation.get.get(metric, 0) or 0)
