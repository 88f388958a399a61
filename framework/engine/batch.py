"""A batch run of a plan: build the frames, stage every output, judge the checks, commit all.

Order of work, so that a failure changes nothing:
1. undo what a run killed between two commits left behind (framework.engine.recovery);
2. build each step's DataFrame (Spark's analysis errors are found here, per step) and check each
   output against its table (framework.engine.output_checks);
3. stage every output and the quarantine, computing the checks' metrics in the same pass; judge
   the expectations and the integration figures: a failing `fail` stops the run here; predict
   and observe the state of window steps (framework.engine.state_figures);
4. commit every output (framework.engine.transaction), then append the integration figures and
   add the input to the history of steps that learn their window sizes (framework.engine.window_history).
"""

from __future__ import annotations

from framework.engine.context import RunContext
from framework.engine.frames import BatchReading, Frames, build_frames
from framework.engine.output_checks import check_outputs
from framework.engine.recovery import recover_interrupted_runs
from framework.engine.results import Progress, StepStatus
from framework.engine.state_figures import measure_batch
from framework.engine.transaction import Staged, commit_all, discard, stage_outputs, stage_quarantine
from framework.engine.window_history import add_run_to_history
from framework.integration.evaluation import evaluate_step, metrics_rows
from framework.integration.evaluation import record as record_integration
from framework.io.locations import INTEGRATION_TABLE
from framework.observations import observed_count


def run_batch(run: RunContext) -> None:
    recover_interrupted_runs(run)
    staged: list[Staged] = []
    try:
        frames = build_frames(run, BatchReading())
        check_outputs(run, frames)
        staged = stage_outputs(run, frames)  # computes the checked frames' metrics too
        _count_step_rows(run, frames)
        run.quality.check_rows(lambda name, status, detail: run.reporter.update("check", name, status, detail))
        staged += stage_quarantine(run, frames)
        _evaluate_integration(run, frames)
        measure_batch(run, frames, staged)
        commit_all(run, staged)
        record_integration(run.store, run.internal(INTEGRATION_TABLE), run.result.integration, run.run_id, run.pipeline)
        add_run_to_history(run, frames)
    except BaseException:
        discard(run, staged)
        raise


def _count_step_rows(run: RunContext, frames: Frames) -> None:
    """Each step's rows, as observed while the outputs were staged."""
    for step in run.result.steps:
        rows = observed_count(frames.row_counts.get(step.name), "rows")
        if rows is not None:
            step.rows, step.status = rows, StepStatus.OK
            run.reporter.update("step", step.name, StepStatus.OK, f"{rows:,} rows")


def _evaluate_integration(run: RunContext, frames: Frames) -> None:
    """Completeness and correctness of the steps that declare ground truth (truth:), and the
    expectations put on those figures, before anything is committed."""
    for step in run.plan.steps:
        if step.selected and step.kind.evaluable(step.spec):
            run.reporter.update("step", step.name, Progress.EVALUATING)
            evaluation = evaluate_step(frames.contexts[step.name])
            run.result.integration.append(evaluation)
            run.reporter.update("step", step.name, Progress.EVALUATED)
            figures = metrics_rows([evaluation], run.run_id, run.pipeline)
            run.quality.check_integration(run.spark, step.name, figures, list(step.expectations))
