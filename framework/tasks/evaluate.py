"""`tributary evaluate`: completeness and correctness of SWA/tumbling steps against the ground
truth in their input (truth: {instance, primary}), over all input read in batch. The figures are
appended to _tributary/integration_quality; no output is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from framework.compiler import CompiledPipeline
from framework.errors import BadInput, Problem
from framework.project_context import ProjectContext


def evaluable_steps(context: ProjectContext, steps: list[str] | None) -> tuple[CompiledPipeline, list[str]]:
    """The pipeline compiled for the steps to evaluate (`steps`, else every one declaring truth:),
    and those steps; BadInput when there are none (no Spark)."""
    from framework.integration.evaluation import evaluable
    from framework.operators import kinds

    compiled = context.selecting(",".join(f"+{s}" for s in steps) if steps else None).compiled
    chosen = [n for n in compiled.selected if evaluable(compiled.spec.steps.get(n)) and (not steps or n in steps)]
    if not chosen:
        named = f"step(s) {', '.join(steps)} of {compiled.name}" if steps else f"the steps of {compiled.name}"
        measured = " or ".join(f"{k.name}:" for k in kinds().values() if k.units is not None)
        raise BadInput(
            Problem(
                f"nothing to evaluate in {named}: evaluation needs a {measured} step declaring truth:",
                hint="add truth: {instance: <instance id column>, primary: <is-head column>} to the step",
            )
        )
    return compiled, chosen


def evaluate(
    context: ProjectContext, compiled: CompiledPipeline, chosen: list[str], progress: Callable[[str], None]
) -> tuple[list[Any], str]:
    """Each chosen step's evaluation (framework.integration.evaluation), recorded; and the table
    they were appended to."""
    from framework.engine.results import new_run_id
    from framework.engine.runner import plan_frames
    from framework.engine.session import spark_session
    from framework.integration.evaluation import evaluate_step, record
    from framework.io.delta import choose_store
    from framework.io.locations import INTEGRATION_TABLE

    spark = spark_session(context.profile)
    contexts = plan_frames(compiled, context.profile, spark).contexts
    evaluations = []
    for name in chosen:
        progress(f"evaluating {name}")
        evaluations.append(evaluate_step(contexts[name]))
    store = choose_store(spark, context.profile.delta_writer, context.profile.storage_options)
    table = context.warehouse().internal(INTEGRATION_TABLE)
    record(store, table, evaluations, "evaluate-" + new_run_id(), compiled.name)
    return evaluations, table
