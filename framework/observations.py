"""Reading Spark Observations (metrics counted as a side effect of a job) without blocking."""

from __future__ import annotations

from typing import Any


def observed_count(observation: Any, metric: str) -> int | None:
    """The metric once a job has run the observed plan; None if none has (asking would block)."""
    if observation is None:
        return None
    java = getattr(observation, "_jo", None)
    if java is not None and not java.future().isCompleted():
        return None
    return int(observation.get.get(metric, 0) or 0)
