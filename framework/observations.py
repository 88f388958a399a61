"""Reading Spark Observations (metrics counted as a side effect of a job) without blocking."""

from __future__ import annotations

from typing import Any


def has_run(observation: Any) -> bool:
    """Whether a job has run the observed plan (before that, asking for its metrics blocks)."""
    java = getattr(observation, "_jo", None)
    return java is None or bool(java.future().isCompleted())


def observed(observation: Any) -> dict[str, Any] | None:
    """The metrics once a job has run the observed plan; None if none has (asking would block), or
    if the job left the observed rows out (Spark saw they were empty, so nothing was counted, and
    pyspark's `get` of that row fails a Java assertion)."""
    if observation is None or not has_run(observation):
        return None
    java = getattr(observation, "_jo", None)
    if java is not None and java.getRow().size() == 0:
        return None
    return dict(observation.get)


def observed_count(observation: Any, metric: str) -> int | None:
    """The metric once a job has run the observed plan (0 when the job counted nothing, the rows
    being empty); None if none has run it (asking would block)."""
    if observation is None or not has_run(observation):
        return None
    return int((observed(observation) or {}).get(metric, 0) or 0)
