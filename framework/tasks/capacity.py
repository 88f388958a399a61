"""`tributary capacity`: what a pipeline's stateful steps need, predicted from their input, next to
what the last run observed (docs/references.md has the models: nodes for a windowed join, open
windows and state for swa, queue length and residence time for tumbling)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from framework.errors import BadInput, Problem
from framework.project_context import ProjectContext

Status = Callable[[str], AbstractContextManager[Any]]


def capacity(context: ProjectContext, step: str | None, sample: int, status: Status = nullcontext) -> list[Any]:
    """Per stateful step (`step`, else all), in pipeline order: a join's measured capacity
    (framework.capacity.join.JoinCapacity) or a window step's figures (framework.integration.capacity.Figures)."""
    from framework.capacity.join import last_observed, measure_join
    from framework.engine.runner import plan_frames
    from framework.engine.session import spark_session
    from framework.engine.state_figures import predicted
    from framework.integration.capacity import Figures
    from framework.io.delta import local_store
    from framework.operators import kind_of
    from framework.operators.registry import StateModel

    compiled = context.selecting(f"+{step}" if step else None).compiled
    measured = {n: s for n, s in compiled.spec.steps.items() if kind_of(s).state_model is not None and step in (None, n)}
    if not measured:
        raise BadInput(
            Problem(
                f"no join, swa or tumbling step {'named ' + repr(step) + ' ' if step else ''}in {compiled.name}",
                hint="capacity models the steps that hold state: windowed joins and window aggregations",
            )
        )
    spark = spark_session(context.profile)
    frames = plan_frames(compiled, context.profile, spark)
    events = local_store(context.profile.storage_options).query(
        context.events_table(), "SELECT * FROM t WHERE event IN ('output_end', 'capacity') ORDER BY ts"
    )
    logged = events.to_pylist() if events.num_rows else []
    found: list[Any] = []
    for name, spec in measured.items():
        if kind_of(spec).state_model == StateModel.JOIN_NODES:
            settings = kind_of(spec).settings(spec)
            inputs = {i: frames.frames[i] for i in (settings.left, settings.right)}
            result = measure_join(spark, name, settings, inputs, sample)
            outputs = [o for o in compiled.spec.outputs if compiled.spec.output_step(o) == name]
            result.observed = last_observed(events, outputs) if events.num_rows else {}
            found.append(result)
            continue
        with status(f"reading the input of step '{name}'"):
            figures, _, _ = predicted(frames.contexts[name])
        last = [json.loads(e["details"]) for e in logged if e["event"] == "capacity" and e["name"] == name]
        if last:
            figures.observed = Figures.from_dict(last[-1]).observed
            figures.notes.append("observed: the last run of this step in the run log")
        else:
            figures.notes.append("observed: no run of this step in the run log yet")
        found.append(figures)
    return found
