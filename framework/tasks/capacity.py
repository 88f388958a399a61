"""`tributary capacity`: what a pipeline's stateful steps need, predicted from their input, next to
what the last run observed (docs/references.md has the models: nodes for a windowed join, open
windows and state for swa, queue length and residence time for tumbling)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
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
    events = local_store(context.profile.storage_options).query(
        context.events_table(), "SELECT * FROM t WHERE event IN ('output_end', 'capacity', 'micro_batches') ORDER BY ts"
    )
    logged = events.to_pylist() if events.num_rows else []
    spreads = last_spreads(logged, [n for n in compiled.spec.steps if step in (None, n)])
    measured = {n: s for n, s in compiled.spec.steps.items() if kind_of(s).state_model is not None and step in (None, n)}
    if not measured and spreads:
        return list(spreads.values())
    if not measured:
        raise BadInput(
            Problem(
                f"no join, swa or tumbling step {'named ' + repr(step) + ' ' if step else ''}in {compiled.name}",
                hint="capacity models the steps that hold state: windowed joins and window aggregations "
                "(and shows the micro-batches of swa, tumbling, count-join and group steps after a streaming run)",
            )
        )
    spark = spark_session(context.profile)
    frames = plan_frames(compiled, context.profile, spark)
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
    return found + list(spreads.values())


@dataclass
class MicroBatchSpreads:
    """The partitions and executors each micro-batch of a step's last streaming run had (a
    per-micro-batch step: swa, tumbling, count join, group; its `partitions:` may change between runs)."""

    step: str
    run_id: str
    batches: list[dict[str, Any]]


def last_spreads(logged: list[dict[str, Any]], steps: list[str]) -> dict[str, MicroBatchSpreads]:
    """Per step, its micro-batches in the last run that logged any (the run log's `micro_batches`)."""
    found: dict[str, MicroBatchSpreads] = {}
    for event in logged:  # in time order: a later run replaces an earlier one
        if event["event"] == "micro_batches" and event["name"] in steps:
            batches = json.loads(event["details"]).get("batches", [])
            found[event["name"]] = MicroBatchSpreads(event["name"], event["run_id"], batches)
    return {name: found[name] for name in steps if name in found}
