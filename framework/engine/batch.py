"""A batch run of a plan: build the frames, stage every output, judge the checks, commit all.

Order of work, so that a failure changes nothing:
1. undo what a run killed between two commits left behind (framework.engine.recovery);
2. build each step's DataFrame (Spark's analysis errors are found here, per step) and check each
   output against its table (framework.engine.output_checks);
3. stage every output and the quarantine, computing the checks' metrics in the same pass; judge
   the expectations and the integration figures: a failing `fail` stops the run here; predict
   and observe the state of window steps (framework.engine.state_figures);
4. commit every output (framework.engine.transaction), then append the integration figures and
   add the input to the history of steps that learn their window sizes (framework.engine.window_history);
5. say what the checks quarantined as what this run committed (`settle_quarantined`): a run that
   failed, or an identical rerun whose writes were all skipped, quarantined nothing.
"""

from __future__ import annotations

from framework.engine.context import RunContext
from framework.engine.frames import BatchReading, Frames, build_frames
from framework.engine.output_checks import check_outputs
from framework.engine.recovery import recover_interrupted_runs
from framework.engine.results import OutputStatus, Progress, StepStatus
from framework.engine.state_figures import measure_batch
from framework.engine.transaction import QUARANTINE_OUTPUT, Staged, commit_all, discard, stage_outputs, stage_quarantine
from framework.engine.window_history import add_run_to_history
from framework.integration.evaluation import evaluate_step, metrics_rows
from framework.integration.evaluation import record as record_integration
from framework.io.locations import INTEGRATION_TABLE
from framework.observations import forget_sent_back, observed_count
from framework.quality.gate import ROWS


def run_batch(run: RunContext) -> None:
    recover_interrupted_runs(run)
    forget_sent_back()
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
        settle_quarantined(run)
        record_integration(run.store, run.internal(INTEGRATION_TABLE), run.result.integration, run.run_id, run.pipeline)
        add_run_to_history(run, frames)
    except BaseException:
        discard(run, staged)
        settle_quarantined(run, failed=True)
        raise


def settle_quarantined(run: RunContext, failed: bool = False) -> None:
    """The checks' `quarantined` figures as what this run committed to the quarantine table.

    The checks count the rows they turn away while the run stages; those rows reach the quarantine
    only with this run's commit of it. A run that failed before that commit (or whose commits were
    rolled back) committed nothing; an identical rerun skipped the quarantine ("unchanged": an
    earlier run's commit holds those rows, under that run's id); both quarantined 0. A run that
    committed nothing at all names the run whose commit holds the rows it checked (`written_by`)."""
    quarantine = run.result.output(QUARANTINE_OUTPUT)
    if quarantine is None or quarantine.status != OutputStatus.WRITTEN:
        for result in run.quality.results:
            if result.quarantined:
                result.quarantined = 0
    outputs = run.result.outputs
    if failed or not outputs or any(o.status != OutputStatus.SKIPPED for o in outputs):
        return
    writer = next((o.written_by for o in outputs if o.written_by), None)
    for result in run.quality.results:
        result.written_by = writer


def _count_step_rows(run: RunContext, frames: Frames) -> None:
    """Each step's rows, as observed while the outputs were staged."""
    for step in run.result.steps:
        rows = observed_count(frames.row_counts.get(step.name), ROWS)
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
