"""`tributary tune`: choose an swa step's window size n and timeout t from its input (Li et al.,
"Small Window Arrays", §5.2–5.3), or with --learn add the input to the step's history of per-head
sizes (size: auto).

What is checked first (the step exists, its kind is tunable, --learn fits it) needs no JVM, so a
mistake is said before the warm engine or Spark is asked for (`checked`); the fit itself reads the
step's input with Spark (`tune`, `learn`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from framework.compiler import CompiledPipeline
from framework.errors import BadInput, Problem
from framework.project_context import ProjectContext

Status = Callable[[str], AbstractContextManager[Any]]


@dataclass(frozen=True)
class TuneRequest:
    """A step that can be tuned, and the pipeline file's text as read before tuning (a --write
    refuses when the file changed meanwhile)."""

    compiled: CompiledPipeline
    step: str
    text: str


def checked(context: ProjectContext, step: str, alpha: float, beta: float, sample: float | None, learn: bool) -> TuneRequest:
    """The request, or BadInput naming what is wrong (no Spark)."""
    from framework.capacity.tuning import check_levels
    from framework.operators import kind_of, kinds
    from framework.spec.base import did_you_mean
    from framework.spec.text import read_text

    check_levels(alpha, beta)
    if sample is not None and not 0 < sample <= 1:
        raise BadInput(Problem(f"--sample {sample:g}: a share must lie in (0, 1]", hint="e.g. --sample 0.1"))
    compiled = context.compiled
    loaded = compiled.loaded
    text = read_text(loaded.path, loaded.shown_as)
    spec = compiled.spec.steps.get(step)
    if spec is None:
        raise BadInput(
            loaded.problem(f"no step '{step}' in {compiled.name}", ("steps",), did_you_mean(step, list(compiled.spec.steps)))
        )
    if not kind_of(spec).tunable:
        tunable = [n for n, s in compiled.spec.steps.items() if kind_of(s).tunable]
        names = [k.name for k in kinds().values() if k.tunable]
        raise BadInput(
            loaded.problem(
                f"step '{step}' is a {spec.kind} step: tune chooses the size and timeout of an {' or '.join(names)} step, "
                "whose windows close by count and by event time",
                ("steps", step),
                f"{' or '.join(names)} steps here: {', '.join(tunable)}"
                if tunable
                else f"add an {' or '.join(f'{n}:' for n in names)} step with an event_time to tune",
            )
        )
    if learn and not kind_of(spec).learns(spec):
        raise BadInput(
            loaded.problem(
                f"--learn: step '{step}' has a fixed size and timeout, so it learns nothing per head",
                ("steps", step, spec.kind, "size"),
                "set size: auto (and optionally timeout: auto), or drop --learn",
            )
        )
    # the step and what it reads: nothing downstream runs
    return TuneRequest(replace(compiled, selected=compiled.graph.select(f"+{step}")), step, text)


def tune(
    context: ProjectContext,
    request: TuneRequest,
    alpha: float,
    beta: float,
    sample: float | None,
    plots: Path | None,
    status: Status = nullcontext,
) -> tuple[Any, list[Path]]:
    """The tuning (framework.capacity.tuning.Tuning) and the PNG plots drawn of it."""
    from framework.capacity.plots import plot_tuning
    from framework.capacity.tuning import read_instances
    from framework.capacity.tuning import tune as choose
    from framework.engine.runner import plan_frames
    from framework.engine.session import spark_session
    from framework.operators import kind_of

    compiled, step = request.compiled, request.step
    spec = compiled.spec.steps[step]
    spark = spark_session(context.profile)
    with status(f"reading the instances of step '{step}'"):
        instances = read_instances(plan_frames(compiled, context.profile, spark).contexts[step], sample)
    with status(f"fitting {len(instances.degree):,} instances"):
        tuning = choose(step, kind_of(spec).settings(spec), instances, alpha, beta)
    folder = plots or compiled.project.root / "reports" / "tune"
    return tuning, plot_tuning(tuning, folder, f"{compiled.name}-{step}")


def write_tuning(request: TuneRequest, tuning: Any) -> str:
    """Set the chosen size and timeout under the step's kind key in the pipeline's YAML; what was done."""
    from framework.spec.rewrite import set_scalars, write_if_unchanged

    loaded = request.compiled.loaded
    kind = request.compiled.spec.steps[request.step].kind
    at = ("steps", tuning.step, kind)
    text = request.text
    changed = set_scalars(text, loaded.shown_as, {(*at, "size"): str(tuning.size), (*at, "timeout"): f"{tuning.timeout}s"})
    if changed == text:
        return f"{loaded.shown_as} already has size: {tuning.size} and timeout: {tuning.timeout}s"
    write_if_unchanged(loaded.path, text, changed, loaded.shown_as)
    return f"wrote size: {tuning.size} and timeout: {tuning.timeout}s into {loaded.shown_as}"


def learn(context: ProjectContext, request: TuneRequest, status: Status = nullcontext) -> tuple[str, str]:
    """tune --learn: the step's input joins its history of per-head sizes (size: auto). Returns
    the sizes learned, described, and where the history is."""
    from framework.engine.results import new_run_id
    from framework.engine.runner import plan_frames
    from framework.engine.session import spark_session
    from framework.engine.window_history import learn_from
    from framework.integration.learned_sizes import describe, history_table
    from framework.io.delta import choose_store
    from framework.operators import StepContext, kind_of
    from framework.operators.keyed_windows import checked_input

    compiled, step, profile = request.compiled, request.step, context.profile
    spec = compiled.spec.steps[step]
    warehouse = context.warehouse()
    spark = spark_session(profile)
    store = choose_store(spark, profile.delta_writer, profile.storage_options)
    with status(f"learning per-head window sizes of step '{step}'"):
        inputs = plan_frames(compiled, profile, spark).contexts[step].inputs
        rows = checked_input(StepContext(spark, step, spec, inputs))
        settings = kind_of(spec).settings(spec)
        _, sizes = learn_from(store, warehouse.internal, compiled.name, step, settings, rows, f"tune-{new_run_id()}")
    return describe(sizes), history_table(warehouse.internal, compiled.name, step)
