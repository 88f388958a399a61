"""A run's part in learning per-head window sizes (`size: auto`; framework.operators.window_sizes):
read the history once when the step is built, add the run's input to it once the run has committed.

A batch run with no history yet learns from its own input before folding (and that input becomes
the history). A streaming run uses the history as it finds it and does not add to it: its tuples
arrive a micro-batch at a time, so a key's instance is only whole once the stream is past it; with
no history, it is bad input, and `tributary tune PIPELINE STEP --learn` starts one.
"""

from __future__ import annotations

from typing import Any

from framework.engine.context import RunContext
from framework.engine.results import OutputStatus
from framework.errors import BadInput, Problem
from framework.integration.learned_sizes import History, choose, history_table, observe_history, read_history, write_history
from framework.operators import StepContext
from framework.operators.keyed_windows import checked_input
from framework.operators.window_sizes import Sizes


def learned_sizes(run: RunContext, step: Any, inputs: dict[str, Any]) -> Sizes | None:
    """The sizes this run uses for `step` (None: the step learns nothing)."""
    if not step.kind.learns(step.spec):
        return None
    spec = step.kind.settings(step.spec)
    internal = run.plan.sample.real.internal if run.plan.sample is not None else run.internal  # a try uses what runs learned
    history = read_history(run.store, history_table(internal, run.pipeline, step.name))
    if history.instances():
        return choose(history, spec, "learned from earlier runs")
    if any(frame.isStreaming for frame in inputs.values()):
        raise BadInput(
            Problem(
                f"step '{step.name}': size: auto / timeout: auto have no history to learn from yet, and a stream "
                "does not learn by itself",
                hint=f"run `tributary tune {run.pipeline} {step.name} --learn` on input you have (or a batch run of the step)",
            )
        )
    own = observe_history(checked_input(StepContext(run.spark, step.name, step.spec, inputs)), spec)
    run.learned[step.name] = own
    return choose(own, spec, "no history yet: learned from this run's input")


def add_run_to_history(run: RunContext, frames: Any) -> None:
    """After a batch run committed: its input joins each learning step's history (a try's first
    rows teach nothing)."""
    if (
        run.compiled.spec.mode == "streaming"
        or run.plan.sample is not None
        or not any(o.status == OutputStatus.WRITTEN for o in run.result.outputs)
    ):
        return
    for step in run.plan.steps:
        if not step.selected or not step.kind.learns(step.spec):
            continue
        spec = step.kind.settings(step.spec)
        table = history_table(run.internal, run.pipeline, step.name)
        context = frames.contexts[step.name]
        own = run.learned.get(step.name) or observe_history(
            checked_input(StepContext(run.spark, step.name, step.spec, context.inputs)), spec
        )
        history = History() if step.name in run.learned else read_history(run.store, table)
        history.add(own)
        write_history(run.store, table, history, choose(history, spec), run.run_id)


def learn_from(store: Any, internal: Any, pipeline: str, step: str, spec: Any, rows: Any, run_id: str) -> tuple[History, Sizes]:
    """`tributary tune --learn`: add these tuples (a step's checked input) to the step's history."""
    table = history_table(internal, pipeline, step)
    history = read_history(store, table).add(observe_history(rows, spec))
    sizes = choose(history, spec)
    write_history(store, table, history, sizes, run_id)
    return history, sizes
