"""Reading Spark Observations (metrics counted as a side effect of a job) without blocking.

On Spark Connect the client fills an Observation only when the plan it ran holds it. A step reads
its inputs through temporary views (every SQL step does), so the Observation on a source or a
step another step reads was left empty, though the server counted it and sent the metrics back
with the action's result: a text source's bad lines read as 0, and were never quarantined. So
after each staging write on Connect the metrics sent back are kept by name (`keep_sent_back`),
for the run, and read where the Observation itself is empty.
"""

from __future__ import annotations

from typing import Any

#: Spark Connect: the metrics the server sent back with this run's actions, by Observation name
_sent_back: dict[str, dict[str, Any]] = {}


def forget_sent_back() -> None:
    """A new run: Observation names repeat between runs (one per source, step or check)."""
    _sent_back.clear()


def keep_sent_back(frame: Any) -> None:
    """After an action on `frame`: on Spark Connect, keep every Observation's metrics the server
    sent back with it (public `DataFrame.executionInfo`, Connect only)."""
    if not type(frame).__module__.startswith("pyspark.sql.connect"):
        return
    info = frame.executionInfo
    for name, pairs in info.flows if info is not None else []:
        _sent_back[name] = dict(pairs)


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
    metrics = dict(observation.get)
    if java is None and not metrics:  # Spark Connect: a plan that read the observed rows through a view
        return _sent_back.get(getattr(observation, "_name", None) or "", metrics)
    return metrics


def observed_count(observation: Any, metric: str) -> int | None:
    """The metric once a job has run the observed plan (0 when the job counted nothing, the rows
    being empty); None if none has run it (asking would block)."""
    if observation is None or not has_run(observation):
        return None
    return int((observed(observation) or {}).get(metric, 0) or 0)
